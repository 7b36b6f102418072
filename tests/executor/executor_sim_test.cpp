// Executor on the simulator backend: the Program it builds is exactly the
// calls the plan makes, it matches to_sim_program for the same costs, and
// simulated results are deterministic.
#include <doctest/doctest.h>

#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "braid/exec/executor.hpp"
#include "braid/exec/sim.hpp"
#include "braid/model/device_table.hpp"
#include "braid/plan/sim_program.hpp"
#include "braid/plan/waits.hpp"
#include "random_case.hpp"

using namespace braid;

namespace {

using SimExecutor = Executor<SimBackend>;

KernelCost kernel(const std::string& name, std::uint32_t grid, double ns) {
    KernelCost k;
    k.shape.name = name;
    k.shape.grid = Dim3{grid, 1, 1};
    k.shape.block = Dim3{256, 1, 1};
    k.shape.regs_per_thread = 32;
    k.duration_ns = ns;
    return k;
}

bool same_action(const sim::Action& a, sim::ActionKind kind, std::uint32_t stream, std::uint32_t index) {
    return a.kind == kind && a.stream == stream && a.index == index;
}

OpCosts random_costs(const OpGraph& g, std::mt19937_64& rng) {
    OpCosts costs(g.op_count());
    for (OpId op = 0; op < g.op_count(); ++op) {
        const int kernels = static_cast<int>(rng() % 3) + 1;
        for (int k = 0; k < kernels; ++k)
            costs[op].kernels.push_back(kernel(g.op(op).name + "." + std::to_string(k),
                                               static_cast<std::uint32_t>(rng() % 300) + 1,
                                               500.0 + static_cast<double>(rng() % 30000)));
        if (rng() % 2 == 0) costs[op].host_ns = static_cast<double>(rng() % 20000);  // a body the profiler timed
    }
    return costs;
}

}  // namespace

TEST_CASE("the sim backend's Program is exactly what a hand-made plan issues") {
    // a (stream 0) writes x; b (stream 1, priority -1) reads x; c (stream 0)
    // writes y; d (stream 0) reads x and y... and b's output.
    OpGraphBuilder gb;
    const BufferId x = gb.add_buffer("x", 64), y = gb.add_buffer("y", 64), z = gb.add_buffer("z", 64);
    gb.add_op({.name = "a", .writes = {x}});
    gb.add_op({.name = "b", .reads = {x}, .writes = {z}});
    gb.add_op({.name = "c", .writes = {y}});
    gb.add_op({.name = "d", .reads = {x, y, z}});
    const OpGraph g = gb.finalize();
    Plan plan;
    plan.strategy = "hand";
    plan.graph_fingerprint = g.fingerprint();
    plan.stream_priorities = {0, -1};
    plan.steps = {{0, 0, 1, 0}, {1, 0, 1, 1}, {2, 0, 1, 0}, {3, 0, 1, 0}};
    assign_minimal_waits(plan, g);
    REQUIRE(plan.waits == std::vector<PlanWait>{{1, 0}, {3, 1}});

    SimBackendOptions options;
    options.mode = LaunchMode::graph;
    SimBackend backend(find_device("h100"), options);
    std::vector<SimExecutor::Body> bodies{
        [](SimLane& l, const OpContext&) { l.launch(kernel("a.k0", 132, 1000)); },
        [](SimLane& l, const OpContext&) {
            l.launch(kernel("b.k0", 64, 2000));
            l.launch(kernel("b.k1", 8, 500));
        },
        [](SimLane& l, const OpContext&) { l.launch(kernel("c.k0", 300, 4000)); },
        [](SimLane& l, const OpContext&) { l.launch(kernel("d.k0", 1, 100)); },
    };
    SimExecutor ex(g, plan, backend, bodies);
    ex.run();
    const sim::Program& p = backend.last_program();
    CHECK(p.mode == sim::LaunchMode::graph);
    CHECK(p.stream_priorities == std::vector<int>{0, -1});
    CHECK(p.event_count == 2);
    REQUIRE(p.actions.size() == 9);
    using K = sim::ActionKind;
    CHECK(same_action(p.actions[0], K::launch, 0, 0));  // a
    CHECK(same_action(p.actions[1], K::record, 0, 0));  // a's event: b waits for it
    CHECK(same_action(p.actions[2], K::wait, 1, 0));
    CHECK(same_action(p.actions[3], K::launch, 1, 1));  // b
    CHECK(same_action(p.actions[4], K::launch, 1, 2));
    CHECK(same_action(p.actions[5], K::record, 1, 1));  // b's event: d waits for it
    CHECK(same_action(p.actions[6], K::launch, 0, 3));  // c
    CHECK(same_action(p.actions[7], K::wait, 0, 1));
    CHECK(same_action(p.actions[8], K::launch, 0, 4));  // d
    REQUIRE(p.kernels.size() == 5);
    const std::vector<std::uint32_t> ops{0, 1, 1, 2, 3};
    const std::vector<std::string> labels{"a", "b", "b", "c", "d"};
    for (std::size_t k = 0; k < 5; ++k) {
        CHECK(p.kernels[k].op == ops[k]);
        CHECK(p.kernels[k].label == labels[k]);
    }
    CHECK(p.kernels[2].cost.shape.name == "b.k1");
    CHECK(p.kernels[2].cost.duration_ns == 500);

    REQUIRE(backend.has_result());
    const sim::Result& r = backend.last_result();
    CHECK(r.kernels.size() == 5);
    CHECK(r.makespan_ns > 0);
    // d starts after b's last kernel and c end.
    CHECK(r.kernels[4].start_ns >= r.kernels[2].end_ns);
    CHECK(r.kernels[4].start_ns >= r.kernels[3].end_ns);
}

TEST_CASE("sim backend with sim_bodies builds the same Program as to_sim_program; results are deterministic") {
    const DeviceSpec& dev = find_device("h100");
    for (std::uint64_t seed = 1; seed <= 40; ++seed) {
        const testing::RandomCase c = testing::make_random_case(seed, {.min_ops = 3, .max_ops = 25});
        std::mt19937_64 rng(seed);
        const OpCosts costs = random_costs(c.graph, rng);
        const Plan plan = testing::random_plan(c.graph, rng, static_cast<std::uint32_t>(seed % 6) + 1);
        for (LaunchMode mode : {LaunchMode::eager, LaunchMode::graph}) {
            INFO("seed " << seed << " mode " << to_string(mode));
            SimBackend backend(dev, SimBackendOptions{.mode = mode});
            SimExecutor ex(c.graph, plan, backend, sim_bodies(c.graph, dev, costs));
            ex.run();
            const sim::Program expected = to_sim_program(ex.compiled(), c.graph, dev, costs,
                                                         mode == LaunchMode::graph ? sim::LaunchMode::graph
                                                                                   : sim::LaunchMode::eager);
            const sim::Program& got = backend.last_program();
            CHECK(got.mode == expected.mode);
            CHECK(got.stream_priorities == expected.stream_priorities);
            CHECK(got.event_count == expected.event_count);
            REQUIRE(got.actions.size() == expected.actions.size());
            for (std::size_t i = 0; i < got.actions.size(); ++i)
                CHECK(same_action(got.actions[i], expected.actions[i].kind, expected.actions[i].stream,
                                  expected.actions[i].index));
            REQUIRE(got.kernels.size() == expected.kernels.size());
            for (std::size_t k = 0; k < got.kernels.size(); ++k) {
                CHECK(got.kernels[k].op == expected.kernels[k].op);
                CHECK(got.kernels[k].label == expected.kernels[k].label);
                CHECK(got.kernels[k].cost.shape == expected.kernels[k].cost.shape);
                CHECK(got.kernels[k].cost.duration_ns == expected.kernels[k].cost.duration_ns);
                CHECK(got.kernels[k].host_ns == expected.kernels[k].host_ns);
            }
            REQUIRE(backend.has_result());
            const sim::Result first = backend.last_result();
            ex.run();
            const sim::Result& second = backend.last_result();
            CHECK(first.makespan_ns == second.makespan_ns);
            REQUIRE(first.kernels.size() == second.kernels.size());
            for (std::size_t k = 0; k < first.kernels.size(); ++k) {
                CHECK(first.kernels[k].start_ns == second.kernels[k].start_ns);
                CHECK(first.kernels[k].end_ns == second.kernels[k].end_ns);
                CHECK(first.kernels[k].stream == second.kernels[k].stream);
            }
            CHECK(first.block_events == second.block_events);
        }
    }
}

TEST_CASE("sim backend: a throwing body is an ExecutionError, no Program is kept, and the next run works") {
    OpGraphBuilder gb;
    const BufferId x = gb.add_buffer("x", 64);
    gb.add_op({.name = "first", .writes = {x}});
    gb.add_op({.name = "second", .reads = {x}});
    const OpGraph g = gb.finalize();
    Plan plan;
    plan.strategy = "hand";
    plan.graph_fingerprint = g.fingerprint();
    plan.stream_priorities = {0};
    plan.steps = {{0, 0, 1, 0}, {1, 0, 1, 0}};
    bool fail = true;
    SimBackend backend(find_device("a100"));
    SimExecutor ex(g, plan, backend,
                   {[](SimLane& l, const OpContext&) { l.launch(kernel("k", 10, 100)); },
                    [&](SimLane& l, const OpContext&) {
                        if (fail) throw std::runtime_error("no costs for this op");
                        l.launch(kernel("k2", 10, 100));
                    }});
    CHECK_THROWS_WITH_AS(ex.run(), "op 'second': no costs for this op (step 1, lane 0)", ExecutionError);
    CHECK_FALSE(backend.has_result());
    CHECK(backend.last_program().actions.empty());
    fail = false;
    ex.run();
    CHECK(backend.last_program().kernels.size() == 2);
    CHECK(backend.has_result());

    SimLane stray;
    CHECK_THROWS_AS(stray.launch(kernel("k", 1, 1)), Error);
    CHECK_THROWS_AS(backend.lane(0).launch(kernel("k", 1, 1)), Error);  // outside a body
}
