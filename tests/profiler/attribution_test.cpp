// Attribution and aggregation over hand-made records, as CUPTI and the hook
// would produce them: no GPU, exact times.
#include <doctest/doctest.h>

#include <string>

#include "braid/profiler/aggregation.hpp"
#include "braid/profiler/attribution.hpp"
#include "braid/profiler/demangle.hpp"
#include "profiler_fixtures.hpp"

using namespace braid;
using namespace braid::profiler;
using braid::testing::TraceBuilder;

namespace {

const ProfiledOp& op_named(const Aggregate& a, const std::string& name) {
    for (const ProfiledOp& op : a.ops)
        if (op.name == name) return op;
    FAIL("no op named " << name);
    throw 0;
}

bool mentions(const std::vector<std::string>& lines, const std::string& text) {
    for (const std::string& l : lines)
        if (l.find(text) != std::string::npos) return true;
    return false;
}

}  // namespace

TEST_CASE("attribution follows correlation ids, not time windows") {
    const OpGraph g = braid::testing::branch_graph();
    TraceBuilder t;
    // Iteration 0. 'left' and 'right' run concurrently: their kernels
    // overlap in time and are launched interleaved from two lanes, which a
    // time-window attribution could not tell apart.
    t.begin(0, g.op_id("load"));
    t.kernel("load_kernel", 0, 100);
    t.end();
    t.begin(0, g.op_id("left"));
    const std::uint32_t left_a = t.kernel("left_a", 100, 400);
    t.end();
    t.begin(0, g.op_id("right"));
    t.kernel("right_a", 110, 300);
    t.end();
    t.begin(0, g.op_id("left"));  // a second part of 'left' (e.g. another launch batch)
    t.trace.markers.back().part = 1;
    t.kernel("left_b", 150, 450);
    t.end();
    t.begin(0, g.op_id("join"));
    t.kernel("join_kernel", 450, 500);
    t.transfer(TransferKind::memcpy_dtoh, 64, 500, 520);
    t.end();

    const Attribution a = attribute(t.trace, g.op_count());
    REQUIRE(a.iterations == std::vector<std::uint32_t>{0});
    CHECK(a.unattributed.empty());
    CHECK(a.ignored_other_context == 0);
    const auto& left = *a.work[g.op_id("left")][0];
    REQUIRE(left.size() == 2);
    CHECK(t.trace.kernels[left[0].index].correlation_id == left_a);
    CHECK(t.trace.kernels[left[0].index].name == "left_a");
    CHECK(t.trace.kernels[left[1].index].name == "left_b");
    CHECK(left[1].part == 1);
    const auto& right = *a.work[g.op_id("right")][0];
    REQUIRE(right.size() == 1);
    CHECK(t.trace.kernels[right[0].index].name == "right_a");
    const auto& join = *a.work[g.op_id("join")][0];
    REQUIRE(join.size() == 2);
    CHECK(join[0].kernel);
    CHECK_FALSE(join[1].kernel);
    CHECK(a.iteration_span_ns == std::vector<double>{520.0});
}

TEST_CASE("records of other contexts are ignored and counted; unowned work is reported") {
    const OpGraph g = braid::testing::branch_graph();
    TraceBuilder t;
    t.begin(0, g.op_id("load"));
    t.kernel("load_kernel", 0, 100);
    t.kernel("foreign", 0, 50, {1, 1, 1}, {32, 1, 1}, 16, TraceBuilder::context + 1);  // another context
    t.end();
    t.kernel("stray_kernel", 200, 260);  // launched outside every op body
    t.transfer(TransferKind::memset, 4096, 300, 310);
    for (const char* name : {"left", "right", "join"}) {
        t.begin(0, g.op_id(name));
        t.kernel(std::string(name) + "_kernel", 400, 500);
        t.end();
    }
    // A correlation to an external id this trace never pushed.
    const std::uint32_t corr = t.kernel("orphan", 600, 610);
    t.trace.correlations.push_back({braid_external_kind, 999, corr});
    // Another tool's correlation kind does not count as braid's.
    const std::uint32_t kineto = t.kernel("kineto_kernel", 700, 710);
    t.trace.correlations.push_back({3, 1, kineto});

    const Attribution a = attribute(t.trace, g.op_count());
    CHECK(a.ignored_other_context == 1);
    REQUIRE(a.unattributed.size() == 4);
    CHECK(a.unattributed[0].name == "stray_kernel");
    CHECK(a.unattributed[0].reason.find("outside every op") != std::string::npos);
    CHECK(a.unattributed[1].name == "orphan");
    CHECK(a.unattributed[1].reason.find("999") != std::string::npos);
    CHECK(a.unattributed[2].name == "kineto_kernel");
    CHECK(a.unattributed[3].what == "memset");
    CHECK(a.work[g.op_id("load")][0]->size() == 1);

    const Aggregate agg = aggregate(t.trace, a, g);
    REQUIRE(agg.unattributed.size() == 4);
    CHECK(mentions(agg.warnings, "belong to no op"));
    for (const UnattributedWork& u : agg.unattributed) CHECK(u.count == 1);

    SUBCASE("without a context filter every context counts") {
        t.trace.context_id.reset();
        const Attribution all = attribute(t.trace, g.op_count());
        CHECK(all.ignored_other_context == 0);
        CHECK(all.work[g.op_id("load")][0]->size() == 2);
    }
}

TEST_CASE("aggregation: median, min, max and count per kernel position, exactly") {
    const OpGraph g = braid::testing::branch_graph();
    TraceBuilder t;
    // Five iterations; op 'left' launches gemm then bias, and a memset.
    const std::uint64_t gemm_ns[] = {500, 300, 400, 1000, 200};
    const std::uint64_t bias_ns[] = {40, 10, 30, 20, 50};
    const std::uint64_t api_ns[] = {7, 3, 5, 9, 1};
    for (std::uint32_t it = 0; it < 5; ++it) {
        const std::uint64_t base = 100000 * it;
        t.begin(it, g.op_id("load"));
        t.kernel("load", base, base + 10);
        t.end();
        t.begin(it, g.op_id("left"));
        t.kernel("gemm", base + 10, base + 10 + gemm_ns[it], {16, 8, 1}, {256, 1, 1}, 128, TraceBuilder::context,
                 api_ns[it]);
        t.kernel("bias", base + 2000, base + 2000 + bias_ns[it]);
        t.transfer(TransferKind::memset, 256, base + 3000, base + 3000 + 6 + it);
        t.end();
        t.begin(it, g.op_id("right"));
        t.kernel("right", base + 10, base + 20);
        t.end();
        t.begin(it, g.op_id("join"));
        t.kernel("join", base + 4000, base + 4100);
        t.end();
    }
    const Attribution a = attribute(t.trace, g.op_count());
    REQUIRE(a.iterations.size() == 5);
    const Aggregate agg = aggregate(t.trace, a, g);
    CHECK(agg.warnings.empty());
    REQUIRE(agg.ops.size() == 4);
    const ProfiledOp& left = op_named(agg, "left");
    CHECK(left.layer == "branch");
    REQUIRE(left.kernels.size() == 2);
    REQUIRE(left.transfers.size() == 1);
    const ProfiledKernel& gemm = left.kernels[0];
    CHECK(gemm.shape.name == "gemm");
    CHECK(gemm.shape.grid == Dim3{16, 8, 1});
    CHECK(gemm.shape.block == Dim3{256, 1, 1});
    CHECK(gemm.shape.regs_per_thread == 128);
    CHECK(gemm.shape.static_smem_bytes == 1024);
    CHECK(gemm.order == 0);
    CHECK(gemm.duration == DurationStats{400.0, 200.0, 1000.0, 5});
    CHECK(left.kernels[1].order == 1);
    CHECK(left.kernels[1].duration == DurationStats{30.0, 10.0, 50.0, 5});
    CHECK(left.transfers[0].order == 2);
    CHECK(left.transfers[0].kind == TransferKind::memset);
    CHECK(left.transfers[0].bytes == 256);
    CHECK(left.transfers[0].duration == DurationStats{8.0, 6.0, 10.0, 5});
    // Op time per iteration: 546, 317, 438, 1029, 260.
    CHECK(left.duration == DurationStats{438.0, 260.0, 1029.0, 5});
    // Launch API time of the kernels that had an API record.
    REQUIRE(agg.launch_api);
    CHECK(*agg.launch_api == DurationStats{5.0, 1.0, 9.0, 5});
    // Iteration span: first start to last end = 4100 every time.
    REQUIRE(agg.iteration);
    CHECK(*agg.iteration == DurationStats{4100.0, 4100.0, 4100.0, 5});
}

TEST_CASE("an even number of samples has the mean of the middle two as median") {
    CHECK(duration_stats({4.0, 1.0, 3.0, 2.0}) == DurationStats{2.5, 1.0, 4.0, 4});
    CHECK(duration_stats({7.0}) == DurationStats{7.0, 7.0, 7.0, 1});
    CHECK(duration_stats({}).count == 0);
}

TEST_CASE("a kernel that changes between iterations is warned about and its sample left out") {
    const OpGraph g = braid::testing::branch_graph();
    TraceBuilder t;
    for (std::uint32_t it = 0; it < 3; ++it) {
        for (const char* name : {"load", "right", "join"}) {
            t.begin(it, g.op_id(name));
            t.kernel(name, 0, 10);
            t.end();
        }
        t.begin(it, g.op_id("left"));
        // Iteration 1 picks another algorithm (another grid); iteration 2
        // launches an extra kernel.
        t.kernel("conv", 0, 100 + it, it == 1 ? Dim3{4, 1, 1} : Dim3{8, 1, 1});
        if (it == 2) t.kernel("extra", 200, 210);
        t.end();
    }
    const Aggregate agg = aggregate(t.trace, attribute(t.trace, g.op_count()), g);
    const ProfiledOp& left = op_named(agg, "left");
    REQUIRE(left.kernels.size() == 1);
    CHECK(left.kernels[0].duration == DurationStats{101.0, 100.0, 102.0, 2});
    CHECK(mentions(agg.warnings, "op 'left' in iteration 1: position 0 is kernel 'conv' grid [4,1,1]"));
    CHECK(mentions(agg.warnings, "op 'left' in iteration 2 launched 2 kernels/transfers, 1 in iteration 0"));
}

TEST_CASE("ops that never ran are left out and warned about; ops without GPU work are kept") {
    const OpGraph g = braid::testing::branch_graph();
    TraceBuilder t;
    t.begin(0, g.op_id("load"));
    t.kernel("load", 0, 10);
    t.end();
    t.begin(0, g.op_id("left"));  // a body that launched nothing
    t.end();
    const Aggregate agg = aggregate(t.trace, attribute(t.trace, g.op_count()), g);
    REQUIRE(agg.ops.size() == 2);
    CHECK(op_named(agg, "left").kernels.empty());
    CHECK(op_named(agg, "left").duration == DurationStats{0.0, 0.0, 0.0, 1});
    CHECK(mentions(agg.warnings, "op 'left' launched no GPU work"));
    CHECK(mentions(agg.warnings, "op 'right' never ran while tracing"));
    CHECK(mentions(agg.warnings, "op 'join' never ran while tracing"));
}

TEST_CASE("contradictory markers are errors that name the external id") {
    const OpGraph g = braid::testing::branch_graph();
    profiler::Trace t;
    t.markers = {{5, 0, 1, 0}, {5, 0, 2, 0}};
    CHECK_THROWS_WITH_AS(attribute(t, g.op_count()), doctest::Contains("external id 5"), ProfileError);
    t.markers = {{5, 0, 9, 0}};
    CHECK_THROWS_WITH_AS(attribute(t, g.op_count()), doctest::Contains("op id 9"), ProfileError);
}

TEST_CASE("durations-only aggregation adds the parts of an op per iteration") {
    const OpGraph g = braid::testing::branch_graph();
    std::vector<OpTiming> timings;
    for (std::uint32_t it = 0; it < 3; ++it) {
        for (OpId op = 0; op < 4; ++op) timings.push_back({it, op, 100.0 * (op + 1) + it});
        timings.push_back({it, g.op_id("left"), 1.0});  // a second part
    }
    const double spans[] = {1000.0, 1200.0, 1100.0};
    const Aggregate agg = aggregate_durations(timings, spans, g);
    REQUIRE(agg.ops.size() == 4);
    CHECK(op_named(agg, "left").duration == DurationStats{202.0, 201.0, 203.0, 3});
    CHECK(op_named(agg, "left").kernels.empty());
    REQUIRE(agg.iteration);
    CHECK(*agg.iteration == DurationStats{1100.0, 1000.0, 1200.0, 3});
}

TEST_CASE("host time per op: the parts of a body add up per iteration; an untimed part leaves no sample") {
    const OpGraph g = braid::testing::branch_graph();
    TraceBuilder t;
    const double load_host[] = {3000.0, 1000.0, 2000.0};
    for (std::uint32_t it = 0; it < 3; ++it) {
        const std::uint64_t base = 100000 * it;
        t.begin(it, g.op_id("load"));
        t.kernel("load", base, base + 10);
        t.end(load_host[it]);
        // 'left' in two batch parts, both timed: 400 + 50 + it.
        t.begin(it, g.op_id("left"), 0);
        t.kernel("gemm", base + 10, base + 20);
        t.end(400.0);
        t.begin(it, g.op_id("left"), 1);
        t.kernel("gemm", base + 20, base + 30);
        t.end(50.0 + it);
        // 'right': its second part untimed in iteration 1 (a partial sum would pass for a whole one).
        t.begin(it, g.op_id("right"), 0);
        t.kernel("right", base + 10, base + 20);
        t.end(700.0 + it);
        t.begin(it, g.op_id("right"), 1);
        t.kernel("right", base + 20, base + 30);
        t.end(it == 1 ? -1.0 : 5.0);
        // 'join' never timed: a profile from before host times.
        t.begin(it, g.op_id("join"));
        t.kernel("join", base + 40, base + 50);
        t.end();
    }
    const Attribution a = attribute(t.trace, g.op_count());
    CHECK(a.host_ns[g.op_id("right")][1] < 0.0);
    const Aggregate agg = aggregate(t.trace, a, g);
    REQUIRE(op_named(agg, "load").host);
    CHECK(*op_named(agg, "load").host == DurationStats{2000.0, 1000.0, 3000.0, 3});
    REQUIRE(op_named(agg, "left").host);
    CHECK(*op_named(agg, "left").host == DurationStats{451.0, 450.0, 452.0, 3});
    REQUIRE(op_named(agg, "right").host);
    CHECK(*op_named(agg, "right").host == DurationStats{706.0, 705.0, 707.0, 2});
    CHECK_FALSE(op_named(agg, "join").host);

    // The CUDA-event fallback: the same rules.
    std::vector<OpTiming> timings;
    for (std::uint32_t it = 0; it < 3; ++it) {
        timings.push_back({it, g.op_id("load"), 10.0, 100.0 * (it + 1)});
        timings.push_back({it, g.op_id("left"), 10.0, 40.0});
        timings.push_back({it, g.op_id("left"), 10.0, it == 2 ? -1.0 : 2.0});
        timings.push_back({it, g.op_id("right"), 10.0});
        timings.push_back({it, g.op_id("join"), 10.0, 0.0});
    }
    const Aggregate durations = aggregate_durations(timings, {}, g);
    REQUIRE(op_named(durations, "load").host);
    CHECK(*op_named(durations, "load").host == DurationStats{200.0, 100.0, 300.0, 3});
    REQUIRE(op_named(durations, "left").host);
    CHECK(*op_named(durations, "left").host == DurationStats{42.0, 42.0, 42.0, 2});
    CHECK_FALSE(op_named(durations, "right").host);
    REQUIRE(op_named(durations, "join").host);
    CHECK(*op_named(durations, "join").host == DurationStats{0.0, 0.0, 0.0, 3});
}

TEST_CASE("kernel names are demangled") {
    CHECK(demangle("_Z10gemm_tiledPKfS0_Pfiii") == "gemm_tiled(float const*, float const*, float*, int, int, int)");
    CHECK(demangle("extern_c_kernel") == "extern_c_kernel");
    CHECK(demangle(nullptr) == "<unnamed>");
}
