// costs_from_profile: kernels and transfers in launch order, durations-only
// pseudo-kernels, missing ops, a stale fingerprint, another device.
#include <doctest/doctest.h>

#include <string>

#include "braid/graph/graph_json.hpp"
#include "braid/model/device_table.hpp"
#include "braid/planner/make_plan.hpp"
#include "braid/profiler/costs.hpp"
#include "profiler_fixtures.hpp"

using namespace braid;

namespace {

Profile measured(const OpGraph& g, const DeviceSpec& dev) {
    Profile p;
    p.device = dev;
    p.graph_fingerprint = g.fingerprint();
    p.run.network = "test";
    p.run.measured_iterations = 3;
    for (const Op& op : g.ops()) {
        ProfiledOp po;
        po.name = op.name;
        po.duration = {3000.0, 2900.0, 3100.0, 3};
        // Launch order: memset, kernel a, memcpy, kernel b.
        po.transfers.push_back(ProfiledTransfer{TransferKind::memset, 4096, {100.0, 90.0, 110.0, 3}, 0});
        po.kernels.push_back(
            ProfiledKernel{KernelShape{op.name + "_a", {132, 1, 1}, {256, 1, 1}, 64, 0, 0}, {2000.0, 1900.0, 2100.0, 3}, 1});
        po.transfers.push_back(ProfiledTransfer{TransferKind::memcpy_dtod, 1000, {0.25, 0.2, 0.3, 3}, 2});
        po.kernels.push_back(
            ProfiledKernel{KernelShape{op.name + "_b", {8, 8, 1}, {128, 1, 1}, 32, 4096, 2048}, {900.0, 800.0, 950.0, 3}, 3});
        p.ops.push_back(po);
    }
    return p;
}

}  // namespace

TEST_CASE("costs keep every kernel's shape and median time, transfers as one-warp kernels, in launch order") {
    const OpGraph g = braid::testing::branch_graph();
    const DeviceSpec& h100 = find_device("h100");
    const OpCosts costs = costs_from_profile(measured(g, h100), g, h100);
    REQUIRE(costs.size() == g.op_count());
    const OpCost& c = costs[g.op_id("left")];
    REQUIRE(c.kernels.size() == 4);
    CHECK(c.kernels[0].shape.name == "left memset 4096 B");
    CHECK(c.kernels[0].shape.grid == Dim3{1, 1, 1});
    CHECK(c.kernels[0].shape.block == Dim3{32, 1, 1});
    CHECK(c.kernels[0].duration_ns == 100.0);
    CHECK(c.kernels[0].dram_bytes == 4096.0);
    CHECK(c.kernels[1].shape == KernelShape{"left_a", {132, 1, 1}, {256, 1, 1}, 64, 0, 0});
    CHECK(c.kernels[1].duration_ns == 2000.0);
    CHECK(c.kernels[1].dram_bytes == 0.0);
    CHECK(c.kernels[2].shape.name == "left memcpy_dtod 1000 B");
    CHECK(c.kernels[2].duration_ns == 1.0);  // clamped: the cost model needs positive times
    CHECK(c.kernels[2].dram_bytes == 2000.0);
    CHECK(c.kernels[3].shape == KernelShape{"left_b", {8, 8, 1}, {128, 1, 1}, 32, 4096, 2048});
    CHECK(c.kernels[3].duration_ns == 900.0);
    CHECK(c.launches_per_image == 0);

    SUBCASE("the planner takes them") {
        const Plan plan = make_plan(g, h100, costs, PlanOptions{});
        CHECK(plan.steps.size() >= g.op_count());
    }
}

TEST_CASE("a durations-only op is one pseudo-kernel that fills the target GPU for one wave") {
    const OpGraph g = braid::testing::branch_graph();
    Profile p = measured(g, find_device("h100"));
    p.timing = ProfileTiming::cuda_events;
    p.durations_only = true;
    for (ProfiledOp& op : p.ops) {
        op.kernels.clear();
        op.transfers.clear();
    }
    for (const char* key : {"h100", "a100"}) {
        const DeviceSpec& dev = find_device(key);
        CAPTURE(key);
        const OpCosts costs = costs_from_profile(p, g, dev);
        for (const OpCost& c : costs) {
            REQUIRE(c.kernels.size() == 1);
            CHECK(c.kernels[0].duration_ns == 3000.0);
            const KernelShape& k = c.kernels[0].shape;
            CHECK(k.name.find("(durations only)") != std::string::npos);
            const Occupancy o = occupancy(dev, k);
            CHECK(o.fraction == 1.0);                   // every warp slot of an SM
            CHECK(waves(dev, o, k.blocks()) == 1);      // exactly one wave
            CHECK(footprint(dev, o, k.blocks()).fraction == 1.0);  // on every SM
        }
    }
}

TEST_CASE("ops missing from the profile are an error that names them") {
    const OpGraph g = braid::testing::branch_graph();
    const DeviceSpec& dev = find_device("h100");
    Profile p = measured(g, dev);
    p.ops.erase(p.ops.begin() + 1, p.ops.begin() + 3);  // 'left' and 'right'
    CHECK_THROWS_WITH_AS(costs_from_profile(p, g, dev),
                         "the profile has no measurements for 2 op(s) of the graph: 'left', 'right'", ProfileError);
}

TEST_CASE("a profile of another graph is an error that names both fingerprints") {
    const OpGraph g = braid::testing::branch_graph();
    const DeviceSpec& dev = find_device("h100");
    Profile p = measured(g, dev);
    p.graph_fingerprint = "fnv1a64:0000000000000000";
    try {
        (void)costs_from_profile(p, g, dev);
        FAIL("expected a ProfileError");
    } catch (const ProfileError& e) {
        const std::string what = e.what();
        CHECK(what.find("fnv1a64:0000000000000000") != std::string::npos);
        CHECK(what.find(g.fingerprint()) != std::string::npos);
        CHECK(what.find("'test'") != std::string::npos);
    }
}

TEST_CASE("a profile of another device is allowed, with a warning") {
    const OpGraph g = braid::testing::branch_graph();
    const DeviceSpec& h100 = find_device("h100");
    const DeviceSpec& a100 = find_device("a100");
    const Profile p = measured(g, h100);
    CHECK(profile_device_warning(p, h100).empty());
    const std::string w = profile_device_warning(p, a100);
    CHECK(w.find(h100.name) != std::string::npos);
    CHECK(w.find(a100.name) != std::string::npos);
    CHECK(w.find("132 SMs") != std::string::npos);
    CHECK(w.find("108 SMs") != std::string::npos);
    const OpCosts costs = costs_from_profile(p, g, a100);
    CHECK(costs[0].kernels[1].duration_ns == 2000.0);  // times are taken as measured
}

TEST_CASE("a recorded kernel that cannot run on the target names the op and kernel") {
    const OpGraph g = braid::testing::branch_graph();
    const DeviceSpec& h100 = find_device("h100");
    Profile p = measured(g, h100);
    p.ops[3].kernels[0].shape.dynamic_smem_bytes = 240 * 1024;  // more than a block may use
    CHECK_THROWS_WITH_AS(costs_from_profile(p, g, h100), doctest::Contains("op 'join' kernel 1 ('join_a')"),
                         ModelError);
}

TEST_CASE("a profile of the same ops at other tensor sizes, or taken on a split plan, is refused") {
    const OpGraph g = braid::testing::branch_graph();
    const DeviceSpec& dev = find_device("h100");
    Profile p = measured(g, dev);
    p.graph = g;
    CHECK_NOTHROW((void)costs_from_profile(p, g, dev));

    // Same names, kinds and edges (so the same fingerprint), bigger buffers.
    OpGraphBuilder b;
    const BufferId in = b.add_buffer("in", 8192), l = b.add_buffer("l", 8192), r = b.add_buffer("r", 8192),
                   out = b.add_buffer("out", 8192);
    b.add_op({.name = "load", .kind = OpKind::forward, .layer = "input", .reads = {}, .writes = {in}});
    b.add_op({.name = "left", .kind = OpKind::forward, .layer = "branch", .reads = {in}, .writes = {l}});
    b.add_op({.name = "right", .kind = OpKind::forward, .layer = "branch", .reads = {in}, .writes = {r}});
    b.add_op({.name = "join", .kind = OpKind::forward, .layer = "join", .reads = {l, r}, .writes = {out}});
    const OpGraph bigger = b.finalize();
    REQUIRE(bigger.fingerprint() == g.fingerprint());
    CHECK_THROWS_WITH_AS((void)costs_from_profile(p, bigger, dev),
                         "buffer 'in' has 8192 bytes here but the profiled graph's buffer 0 is 'in' with 4096 bytes "
                         "(another batch or image size?): profile the graph again",
                         ProfileError);

    p.run.plan = "braid";
    CHECK_THROWS_WITH_AS((void)costs_from_profile(p, g, dev),
                         "the profile was measured on a 'braid' plan; costs come from a serial profile: profile again "
                         "with a serial plan",
                         ProfileError);
}
