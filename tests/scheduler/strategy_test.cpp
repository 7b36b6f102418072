// The braid strategy against the baselines on the simulator, the fluid
// model, and make_plan's dispatch.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "braid/plan/validate.hpp"
#include "braid/planner/fluid_model.hpp"
#include "braid/planner/compare.hpp"
#include "braid/planner/make_plan.hpp"
#include "braid/planner/predict.hpp"
#include "braid/planner/tune_candidates.hpp"
#include "test_graphs.hpp"

#include "error_of.hpp"

using namespace braid;
using braid::testing::error_of;
using braid::testing::TestGraph;

TEST_CASE("braid's plan is valid, never slower than a baseline within its stream cap, and never below the lower bound") {
    const DeviceSpec& dev = find_device("h200");
    for (sim::LaunchMode mode : {sim::LaunchMode::eager, sim::LaunchMode::graph}) {
        for (const TestGraph& t : braid::testing::planner_test_graphs()) {
            CAPTURE(t.name);
            CAPTURE(static_cast<int>(mode));
            PlanOptions opt;
            opt.mode = mode;
            opt.max_streams = 4;
            std::vector<double> others;  // baselines within the stream cap (nimble may need more)
            for (const std::string& s : baseline_strategies()) {
                if (s == "ios") continue;  // weighed only when asked (below)
                opt.strategy = s;
                Plan p = make_plan(t.graph, dev, t.costs, opt);
                REQUIRE(first_violation(p, t.graph) == "");
                if (p.stream_count() <= opt.max_streams) others.push_back(predict(t.graph, p, dev, t.costs, mode).predicted_ns);
            }
            CHECK(others.size() >= 2);
            opt.strategy = "braid";
            Plan b = make_plan(t.graph, dev, t.costs, opt);
            REQUIRE(first_violation(b, t.graph) == "");
            CHECK(b.strategy == "braid");
            CHECK(b.graph_fingerprint == t.graph.fingerprint());
            const Prediction pb = predict(t.graph, b, dev, t.costs, mode);
            for (double o : others) CHECK(pb.predicted_ns <= o * (1.0 + 1e-9));
            CHECK(pb.predicted_ns >= pb.bound.bound_ns * (1.0 - 1e-9));
            CHECK(pb.lb_ratio >= 1.0 - 1e-9);
            REQUIRE(b.options.predicted_ms.has_value());
            CHECK(*b.options.predicted_ms == doctest::Approx(pb.predicted_ns / 1e6));
            CHECK(b.options.max_streams == 4u);
            CHECK(b.options.mode == mode);
            REQUIRE(b.options.chosen.has_value());
            CHECK(b.stream_count() <= 4u);
        }
    }
}

TEST_CASE("asked to weigh IOS's plan, braid is never slower than it either, and tuning measures it") {
    const DeviceSpec& dev = find_device("h200");
    for (const TestGraph& t : {braid::testing::inception_like(3), braid::testing::training_dag(6, 12, 3, "training12")}) {
        CAPTURE(t.name);
        strategy::BraidOptions bo;
        bo.max_streams = 4;
        bo.mode = sim::LaunchMode::graph;
        CHECK(strategy::braid_plan(t.graph, dev, t.costs, bo).find_baseline("ios") == nullptr);
        bo.weigh_ios = true;
        bo.complete_top = 4;
        const strategy::BraidResult r = strategy::braid_plan(t.graph, dev, t.costs, bo);
        const strategy::BraidCandidate* ios = r.find_baseline("ios");
        REQUIRE(ios != nullptr);
        PlanOptions po;
        po.strategy = "ios";
        po.max_streams = 4;
        po.mode = sim::LaunchMode::graph;
        CHECK(ios->plan == make_plan(t.graph, dev, t.costs, po));
        const double ios_ns = predict(t.graph, ios->plan, dev, t.costs, bo.mode).predicted_ns;
        CHECK(r.predicted_ns <= ios_ns * (1.0 + 1e-9));
        // Tuning measures every baseline braid weighed, ios among them, after braid's own best.
        std::vector<std::string> names;
        for (const TuneCandidate& c : tune_candidates(r, 4)) names.push_back(c.name);
        CHECK(std::any_of(names.begin(), names.end(),
                          [](const std::string& n) { return n.find("ios baseline") != std::string::npos; }));
        CHECK(names.front().rfind("model #1: ", 0) == 0);
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
                                                      << b.stream_count() << " streams: " << b.options.chosen.value().describe());
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
          "unknown strategy 'fastest'; known strategies: serial, glp4nn, nimble, ooo, opara, ios, braid");
    OpCosts fewer(t.costs.begin(), t.costs.end() - 1);
    CHECK(error_of([&] { (void)make_plan(t.graph, dev, fewer, {"serial"}); }) == "make_plan: got costs for 3 ops, the graph has 4");
    PlanOptions zero;
    zero.max_streams = 0;
    CHECK(error_of([&] { (void)make_plan(t.graph, dev, t.costs, zero); }) == "max_streams must be at least 1");
}

namespace {

// Four ops that each read x and write their own y_i: one small kernel each,
// so a plan with a stream per op is what the simulator likes best.
TestGraph fan_of_four() {
    OpGraphBuilder b;
    const BufferId x = b.add_buffer("x", 1024);
    b.add_op({"src", OpKind::forward, "", {}, {x}, 0});
    OpCosts costs(1);
    costs[0].kernels.push_back(KernelCost{KernelShape{"src", {1, 1, 1}, {128, 1, 1}, 32, 0, 0}, 20'000.0, 0.0});
    for (int i = 0; i < 4; ++i) {
        const std::string y = "y" + std::to_string(i);
        b.add_op({"op" + std::to_string(i), OpKind::forward, "", {x}, {b.add_buffer(y, 1024)}, 0});
        costs.push_back(costs[0]);
    }
    return TestGraph{"fan_of_four", b.finalize(), std::move(costs)};
}

}  // namespace

TEST_CASE("braid honours max_streams whichever candidate wins") {
    const DeviceSpec& dev = find_device("h200");
    std::vector<TestGraph> graphs;
    graphs.push_back(fan_of_four());
    graphs.push_back(braid::testing::inception_like(6));
    for (const TestGraph& t : graphs) {
        for (std::uint32_t cap : {1u, 2u, 3u}) {
            CAPTURE(t.name);
            CAPTURE(cap);
            PlanOptions opt;
            opt.max_streams = cap;
            opt.mode = sim::LaunchMode::graph;
            const Plan nimble = make_plan(t.graph, dev, t.costs, {"nimble"});
            REQUIRE(nimble.stream_count() > cap);  // the baseline alone would break the cap
            const Plan b = make_plan(t.graph, dev, t.costs, opt);
            CHECK(b.stream_count() <= cap);
            CHECK(first_violation(b, t.graph) == "");
        }
    }
    // With room for all four, the fan gets them.
    const TestGraph fan = fan_of_four();
    PlanOptions wide;
    wide.max_streams = 4;
    wide.mode = sim::LaunchMode::graph;
    CHECK(make_plan(fan.graph, dev, fan.costs, wide).stream_count() == 4u);
}

TEST_CASE("compare_strategies plans each strategy once: the baselines' rows are braid's candidates") {
    const DeviceSpec& dev = find_device("h200");
    const TestGraph t = braid::testing::training_dag(21, 8, 4, "training8");
    ComparisonOptions co;
    co.max_streams = 4;
    co.mode = sim::LaunchMode::eager;
    const Comparison c = compare_strategies(t.graph, dev, t.costs, co);
    REQUIRE(c.braid.has_value());
    const strategy::BraidResult& br = *c.braid;
    CHECK(c.row("braid").plan == br.plan);
    CHECK(c.row("braid").predicted_ns == br.predicted_ns);
    for (const std::string& name : baseline_strategies()) {
        CAPTURE(name);
        const StrategyRow& row = c.row(name);
        PlanOptions po;
        po.strategy = name;
        po.max_streams = co.max_streams;
        CHECK(row.plan == make_plan(t.graph, dev, t.costs, po));  // the same plan as the strategy alone makes
        if (const strategy::BraidCandidate* cand = br.find_baseline(name); cand && cand->simulated)
            CHECK(row.plan == cand->plan);
        CHECK((br.find_baseline(name) != nullptr) == (name != "ios"));  // ios is weighed only when asked
        // Every row carries the timeline it was judged by, and it is the
        // simulator's answer for that plan.
        const SimulatedPlan again = simulate_plan(t.graph, row.plan, dev, t.costs, co.mode);
        CHECK(row.predicted_ns == again.result.makespan_ns);
        CHECK(row.simulated.result.kernels.size() == row.simulated.program.kernels.size());
        CHECK(row.simulated.program.kernels.size() == again.program.kernels.size());
    }
    const StrategyRow& serial = c.row("serial");
    CHECK(c.serial_eager_ns == serial.predicted_ns);
    CHECK(c.serial_graph_ns == simulate_plan(t.graph, serial.plan, dev, t.costs, sim::LaunchMode::graph).result.makespan_ns);
    // braid's report: every candidate, judged ones with a time, and the winner's timeline kept.
    CHECK(br.candidates.size() == br.plan.options.candidates.value());
    std::size_t judged = 0, cut = 0;
    for (const strategy::BraidCandidate& cand : br.candidates) {
        if (cand.simulated_ns > 0.0 || cand.cut_off) ++judged;
        CHECK((cand.eligible || cand.simulated_ns == 0.0));
        if (!cand.cut_off) continue;
        // A candidate given up early really was slower than the winner.
        ++cut;
        CHECK(simulate_plan(t.graph, cand.plan, dev, t.costs, co.mode).result.makespan_ns > br.predicted_ns);
    }
    MESSAGE(judged << " candidates judged, " << cut << " of them given up early");
    CHECK(judged == br.plan.options.simulated.value());
    REQUIRE(br.chosen().simulated.has_value());
    CHECK(br.chosen().simulated->result.makespan_ns == br.predicted_ns);
    CHECK(br.chosen().choice == br.plan.options.chosen.value());
}
