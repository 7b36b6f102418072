// The braid strategy against the baselines on the simulator, the fluid
// model, and make_plan's dispatch.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "braid/plan/validate.hpp"
#include "braid/planner/fluid_model.hpp"
#include "braid/planner/make_plan.hpp"
#include "braid/planner/predict.hpp"
#include "test_graphs.hpp"

#include "error_of.hpp"

using namespace braid;
using braid::testing::error_of;
using braid::testing::TestGraph;

TEST_CASE("braid's plan is valid, never slower than any baseline, and never below the lower bound") {
    const DeviceSpec& dev = find_device("h200");
    for (sim::LaunchMode mode : {sim::LaunchMode::eager, sim::LaunchMode::graph}) {
        for (const TestGraph& t : braid::testing::planner_test_graphs()) {
            CAPTURE(t.name);
            CAPTURE(static_cast<int>(mode));
            PlanOptions opt;
            opt.mode = mode;
            opt.max_streams = 4;
            std::vector<double> others;
            for (const char* s : {"serial", "glp4nn", "nimble"}) {
                opt.strategy = s;
                Plan p = make_plan(t.graph, dev, t.costs, opt);
                REQUIRE(first_violation(p, t.graph) == "");
                others.push_back(predict(t.graph, p, dev, t.costs, mode).predicted_ns);
            }
            opt.strategy = "braid";
            Plan b = make_plan(t.graph, dev, t.costs, opt);
            REQUIRE(first_violation(b, t.graph) == "");
            CHECK(b.strategy == "braid");
            CHECK(b.graph_fingerprint == t.graph.fingerprint());
            const Prediction pb = predict(t.graph, b, dev, t.costs, mode);
            for (double o : others) CHECK(pb.predicted_ns <= o * (1.0 + 1e-9));
            CHECK(pb.predicted_ns >= pb.bound.bound_ns * (1.0 - 1e-9));
            CHECK(pb.lb_ratio >= 1.0 - 1e-9);
            CHECK(b.options["predicted_ms"].get<double>() == doctest::Approx(pb.predicted_ns / 1e6));
        }
    }
}

TEST_CASE("braid beats serial on a training step, using more than one stream") {
    const DeviceSpec& dev = find_device("h200");
    TestGraph t = braid::testing::training_dag(21, 16, 4, "training16");
    PlanOptions opt;
    opt.mode = sim::LaunchMode::graph;
    const double serial_ns = predict(t.graph, make_plan(t.graph, dev, t.costs, {"serial"}), dev, t.costs, opt.mode).predicted_ns;
    Plan b = make_plan(t.graph, dev, t.costs, opt);
    const double braid_ns = predict(t.graph, b, dev, t.costs, opt.mode).predicted_ns;
    MESSAGE("training16 on h200, graph mode: serial " << serial_ns / 1e3 << " us, braid " << braid_ns / 1e3 << " us, "
                                                      << b.stream_count() << " streams: " << b.options["chosen_description"]);
    CHECK(braid_ns < serial_ns);
    CHECK(b.stream_count() > 1);
}

TEST_CASE("fluid model: serial sums, small steps overlap, wide steps do not") {
    // Two independent ops on two streams, hand-built compiled plan.
    CompiledPlan c;
    c.stream_priorities = {0, 0};
    c.steps.resize(2);
    c.steps[0].stream = 0;
    c.steps[1].stream = 1;
    sim::Params p;
    p.dispatch_latency_ns = 0;
    p.graph_launch_ns = 0;
    std::vector<FluidStep> small{{1000.0, 0.25, 1}, {1000.0, 0.25, 1}};
    CHECK(fluid_makespan_ns(c, small, sim::LaunchMode::graph, p) == doctest::Approx(1000.0));
    std::vector<FluidStep> wide{{1000.0, 1.0, 1}, {1000.0, 1.0, 1}};
    CHECK(fluid_makespan_ns(c, wide, sim::LaunchMode::graph, p) == doctest::Approx(2000.0));
    std::vector<FluidStep> mixed{{1000.0, 0.75, 1}, {1000.0, 0.5, 1}};  // 1.25 of the GPU wanted: the urgent one gets 0.75
    CHECK(fluid_makespan_ns(c, mixed, sim::LaunchMode::graph, p) == doctest::Approx(1500.0));
    // One stream: steps in sequence, and eager launches cost host time first.
    c.steps[1].stream = 0;
    c.stream_priorities = {0};
    p.launch_latency_ns = 100;
    CHECK(fluid_makespan_ns(c, small, sim::LaunchMode::eager, p) == doctest::Approx(2100.0));
}

TEST_CASE("make_plan rejects unknown strategies and mismatched costs") {
    TestGraph t = braid::testing::diamond();
    const DeviceSpec& dev = find_device("a100");
    CHECK(error_of([&] { (void)make_plan(t.graph, dev, t.costs, {"fastest"}); }) ==
          "unknown strategy 'fastest'; known strategies: serial, glp4nn, nimble, braid");
    OpCosts fewer(t.costs.begin(), t.costs.end() - 1);
    CHECK(error_of([&] { (void)make_plan(t.graph, dev, fewer, {"serial"}); }) == "make_plan: got costs for 3 ops, the graph has 4");
    PlanOptions zero;
    zero.max_streams = 0;
    CHECK(error_of([&] { (void)make_plan(t.graph, dev, t.costs, zero); }) == "max_streams must be at least 1");
}
