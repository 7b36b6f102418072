// The published systems braid is compared with, as strategies: ooo
// (out-of-order backprop), opara and ios. Each plan is valid with minimal
// waits, and does what its paper says on graphs small enough to check by hand.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <string>
#include <vector>

#include "braid/plan/validate.hpp"
#include "braid/planner/make_plan.hpp"
#include "braid/planner/predict.hpp"
#include "braid/planner/strategies/ios.hpp"
#include "braid/planner/strategies/ooo.hpp"
#include "braid/planner/strategies/opara.hpp"
#include "braid/planner/strategies/serial.hpp"
#include "test_graphs.hpp"

#include "error_of.hpp"

using namespace braid;
using braid::testing::error_of;
using braid::testing::TestGraph;

namespace {

// The ops of `plan` in issue order, by name.
std::vector<std::string> issue_order(const Plan& plan, const OpGraph& g) {
    std::vector<std::string> out;
    for (const PlanStep& s : plan.steps) out.push_back(g.op(s.op).name);
    return out;
}

std::uint32_t stream_of(const Plan& plan, const OpGraph& g, const std::string& op) {
    for (const PlanStep& s : plan.steps)
        if (g.op(s.op).name == op) return s.stream;
    FAIL("no step of op " << op);
    return 0;
}

KernelCost kernel(const std::string& name, std::uint32_t blocks, std::uint32_t smem_bytes, double ns) {
    return KernelCost{KernelShape{name, {blocks, 1, 1}, {128, 1, 1}, 32, smem_bytes, 0}, ns, 0.0};
}

// src -> a, b, c (each reads src's output) -> join (reads all three).
TestGraph fan_and_join(std::uint32_t smem_a, std::uint32_t smem_b, std::uint32_t smem_c, std::uint32_t blocks = 8) {
    OpGraphBuilder b;
    const BufferId x = b.add_buffer("x", 1024);
    std::vector<BufferId> outs;
    b.add_op({"src", OpKind::forward, "", {}, {x}, 0});
    for (const char* n : {"a", "b", "c"}) {
        outs.push_back(b.add_buffer(std::string(n) + ".out", 1024));
        b.add_op({n, OpKind::forward, "", {x}, {outs.back()}, 0});
    }
    b.add_op({"join", OpKind::forward, "", outs, {b.add_buffer("y", 1024)}, 0});
    OpCosts c;
    c.push_back({{kernel("src", blocks, 0, 20'000.0)}});
    c.push_back({{kernel("a", blocks, smem_a, 20'000.0)}});
    c.push_back({{kernel("b", blocks, smem_b, 20'000.0)}});
    c.push_back({{kernel("c", blocks, smem_c, 20'000.0)}});
    c.push_back({{kernel("join", blocks, 0, 20'000.0)}});
    return TestGraph{"fan_and_join", b.finalize(), std::move(c)};
}

}  // namespace

TEST_CASE("ooo, opara and ios plans are valid with minimal waits on every test graph") {
    const DeviceSpec& dev = find_device("h200");
    for (const TestGraph& t : braid::testing::planner_test_graphs()) {
        CAPTURE(t.name);
        for (const char* name : {"ooo", "opara", "ios"}) {
            CAPTURE(name);
            PlanOptions o;
            o.strategy = name;
            o.max_streams = 4;
            o.mode = sim::LaunchMode::graph;
            const Plan p = make_plan(t.graph, dev, t.costs, o);
            CHECK(p.strategy == name);
            CHECK(p.graph_fingerprint == t.graph.fingerprint());
            CHECK(p.steps.size() == t.graph.op_count());  // none of them splits ops
            CHECK(first_violation(p, t.graph) == "");
        }
    }
}

TEST_CASE("ooo: weight gradients and updates on a low-priority sub stream, the rest in framework order") {
    const TestGraph t = braid::testing::training_dag(6, 12, 3, "training12");
    const Plan p = strategy::ooo(t.graph, "h200");
    REQUIRE(p.stream_count() == 2u);
    CHECK(p.stream_priorities == std::vector<int>{-1, 0});  // the main stream is the urgent one
    std::size_t sub = 0;
    for (const PlanStep& s : p.steps) {
        const OpKind k = t.graph.op(s.op).kind;
        const bool off = k == OpKind::backward_weight || k == OpKind::update;
        CAPTURE(t.graph.op(s.op).name);
        CHECK(s.stream == (off ? 1u : 0u));
        sub += off ? 1 : 0;
    }
    CHECK(sub == 24u);  // 12 layers, a weight gradient and an update each
    // Issued in the topological order, like the serial plan.
    CHECK(issue_order(p, t.graph) == issue_order(strategy::serial(t.graph), t.graph));
    // The main stream never waits for the sub stream: only the sub stream waits.
    CHECK(!p.waits.empty());
    for (const PlanWait& w : p.waits) CHECK(p.steps[w.step].stream == 1u);

    // No weight gradients (inference, say): the serial plan.
    const TestGraph fwd = braid::testing::residual_chain(3);
    const Plan one = strategy::ooo(fwd.graph);
    CHECK(one.stream_count() == 1u);
    CHECK(one.steps == strategy::serial(fwd.graph).steps);
}

TEST_CASE("opara: a stream follows each producer's first consumer; light kernels are launched first") {
    // b asks for no shared memory, c for 16 KiB, a for 48 KiB.
    const TestGraph t = fan_and_join(48 * 1024, 0, 16 * 1024);
    const strategy::OparaStreams s = strategy::opara_streams(t.graph);
    CHECK(s.streams == 3u);
    const Plan p = strategy::opara(t.graph, t.costs);
    CHECK(p.stream_count() == 3u);
    // a is src's first consumer and continues its stream; b and c open their own.
    CHECK(stream_of(p, t.graph, "src") == 0u);
    CHECK(stream_of(p, t.graph, "a") == 0u);
    CHECK(stream_of(p, t.graph, "b") == 1u);
    CHECK(stream_of(p, t.graph, "c") == 2u);
    // join is the first consumer of a, b and c: it continues the earliest's (a's) stream.
    CHECK(stream_of(p, t.graph, "join") == 0u);
    CHECK(issue_order(p, t.graph) == std::vector<std::string>{"src", "b", "c", "a", "join"});
    CHECK(first_violation(p, t.graph) == "");
    // Equal demands: the order the ops became ready.
    const TestGraph even = fan_and_join(0, 0, 0);
    CHECK(issue_order(strategy::opara(even.graph, even.costs), even.graph) ==
          std::vector<std::string>{"src", "a", "b", "c", "join"});
    CHECK(error_of([&] { (void)strategy::opara(t.graph, OpCosts(2)); }) == "opara: got costs for 2 ops, the graph has 5");
}

TEST_CASE("ios: stages of concurrent groups where they pay, within the group and stream limits") {
    const DeviceSpec& dev = find_device("h200");
    strategy::IosOptions o;
    o.mode = sim::LaunchMode::graph;
    // Three branches of 8 blocks each leave the GPU nearly idle: one stage runs them side by side.
    const TestGraph small = fan_and_join(0, 0, 0, 8);
    const Plan side_by_side = strategy::ios(small.graph, dev, small.costs, o);
    CHECK(side_by_side.stream_count() == 3u);
    CHECK(first_violation(side_by_side, small.graph) == "");
    std::vector<std::uint32_t> branch_streams;
    for (const char* n : {"a", "b", "c"}) branch_streams.push_back(stream_of(side_by_side, small.graph, n));
    std::sort(branch_streams.begin(), branch_streams.end());
    CHECK(branch_streams == std::vector<std::uint32_t>{0, 1, 2});
    // The stage is cheaper than running the branches one after another.
    const double staged = predict(small.graph, side_by_side, dev, small.costs, o.mode).predicted_ns;
    const double serial = predict(small.graph, strategy::serial(small.graph), dev, small.costs, o.mode).predicted_ns;
    CHECK(staged < serial);

    // At most two groups a stage, or two streams: never a third stream.
    strategy::IosOptions two = o;
    two.max_groups = 2;
    CHECK(strategy::ios(small.graph, dev, small.costs, two).stream_count() == 2u);
    CHECK(strategy::ios(small.graph, dev, small.costs, o, 2).stream_count() == 2u);
    CHECK(strategy::ios(small.graph, dev, small.costs, o, 1).stream_count() == 1u);

    // Windows of one op: every op a stage of its own, one stream (here the
    // level order is the serial plan's order too).
    strategy::IosOptions single = o;
    single.window_ops = 1;
    const Plan one = strategy::ios(small.graph, dev, small.costs, single);
    CHECK(one.stream_count() == 1u);
    CHECK(one.steps == strategy::serial(small.graph).steps);

    // Bad settings name themselves.
    strategy::IosOptions bad = o;
    bad.window_ops = 17;
    CHECK(error_of([&] { (void)strategy::ios(small.graph, dev, small.costs, bad); }) ==
          "ios: window_ops must be within 1..16, got 17");
    bad = o;
    bad.max_groups = 0;
    CHECK(error_of([&] { (void)strategy::ios(small.graph, dev, small.costs, bad); }) == "ios: max_groups must be at least 1");
    bad = o;
    bad.max_group_ops = 0;
    CHECK(error_of([&] { (void)strategy::ios(small.graph, dev, small.costs, bad); }) ==
          "ios: max_group_ops must be at least 1");
    CHECK(error_of([&] { (void)strategy::ios(small.graph, dev, OpCosts(1), o); }) == "ios: got costs for 1 ops, the graph has 5");
}

TEST_CASE("ios: windows follow the level order; groups keep to max_group_ops") {
    const DeviceSpec& dev = find_device("h200");
    // Two independent chains of four small ops, built chain by chain: in
    // framework order a window of two holds two ops of one chain, in level
    // order one op of each, which a stage runs side by side.
    OpGraphBuilder b;
    OpCosts costs;
    for (const char* chain : {"a", "b"}) {
        BufferId in = b.add_buffer(std::string(chain) + "0", 1024);
        b.add_op({std::string(chain) + "0", OpKind::forward, "", {}, {in}, 0});
        costs.push_back({{kernel(chain, 8, 0, 20'000.0)}});
        for (int i = 1; i < 4; ++i) {
            const std::string name = std::string(chain) + std::to_string(i);
            const BufferId out = b.add_buffer(name, 1024);
            b.add_op({name, OpKind::forward, "", {in}, {out}, 0});
            costs.push_back({{kernel(name, 8, 0, 20'000.0)}});
            in = out;
        }
    }
    const OpGraph g = b.finalize();
    strategy::IosOptions o;
    o.mode = sim::LaunchMode::graph;
    o.window_ops = 2;
    const Plan p = strategy::ios(g, dev, costs, o);
    CHECK(p.stream_count() == 2u);
    CHECK(issue_order(p, g) == std::vector<std::string>{"a0", "b0", "a1", "b1", "a2", "b2", "a3", "b3"});
    for (int i = 0; i < 4; ++i) CHECK(stream_of(p, g, "a" + std::to_string(i)) != stream_of(p, g, "b" + std::to_string(i)));
    CHECK(first_violation(p, g) == "");

    // One op a group: a stage never holds two ops that depend on each other.
    const TestGraph t = braid::testing::residual_chain(2);
    o.window_ops = 9;
    o.max_group_ops = 1;
    const strategy::detail_ios::Window w =
        strategy::detail_ios::window_of(t.graph, t.graph.topological_order().subspan(0, 9));
    strategy::detail_ios::StageTimer timer(w, dev, t.costs, o, o.max_groups);
    for (auto stage : strategy::detail_ios::best_stages(w, timer))
        for (auto group : strategy::detail_ios::groups_of(w, stage)) CHECK(std::popcount(group) == 1);
    // Allowed two, some stage takes a pair (the stem with a residual branch's first op, say).
    o.max_group_ops = 2;
    strategy::detail_ios::StageTimer pairs(w, dev, t.costs, o, o.max_groups);
    int most = 0;
    for (auto stage : strategy::detail_ios::best_stages(w, pairs))
        for (auto group : strategy::detail_ios::groups_of(w, stage)) most = std::max(most, std::popcount(group));
    CHECK(most == 2);
}

TEST_CASE("ios: the stage sequence it picks is the cheapest one (brute force over a window)") {
    // On one window, every way to cut the ops into stages of connected
    // groups, timed the way ios times them, is no cheaper than its choice.
    const DeviceSpec& dev = find_device("h200");
    strategy::IosOptions o;
    o.mode = sim::LaunchMode::graph;
    o.max_groups = 16;
    o.max_group_ops = 16;
    for (const TestGraph& t : {braid::testing::diamond(), braid::testing::inception_like(1), braid::testing::residual_chain(2)}) {
        CAPTURE(t.name);
        REQUIRE(t.graph.op_count() <= 12);
        const strategy::detail_ios::Window w = strategy::detail_ios::window_of(t.graph, t.graph.topological_order());
        strategy::detail_ios::StageTimer timer(w, dev, t.costs, o, o.max_groups);
        const auto chosen = strategy::detail_ios::best_stages(w, timer);
        double chosen_ns = 0.0;
        for (auto s : chosen) chosen_ns += timer(s);
        // Exhaustive: the cheapest cost of finishing from each set of done ops.
        const std::size_t m = w.ops.size();
        const std::uint32_t full = (1u << m) - 1;
        std::vector<double> rest(full + 1, 0.0);
        for (std::uint32_t done = full; done-- > 0;) {
            double best = 1e300;
            for (std::uint32_t stage = 1; stage <= full; ++stage) {
                if (stage & done) continue;
                bool closed = true;
                for (std::size_t i = 0; i < m; ++i)
                    if ((stage >> i) & 1u) closed = closed && (w.preds[i] & ~(done | stage)) == 0;
                if (closed) best = std::min(best, timer(stage) + rest[done | stage]);
            }
            rest[done] = best;
        }
        CHECK(chosen_ns == doctest::Approx(rest[0]).epsilon(1e-12));
        // And the stages cover every op exactly once.
        std::uint32_t covered = 0;
        for (auto s : chosen) {
            CHECK((covered & s) == 0u);
            covered |= s;
        }
        CHECK(covered == full);
    }
}
