// The simulator's timing model, case by case: each expected time is derived
// from the model's rules and the kernel's occupancy, never copied from a run.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <set>
#include <string>

#include "braid/model/occupancy.hpp"
#include "braid/sim/hardware_queues.hpp"
#include "braid/sim/simulator.hpp"
#include "sim_fixtures.hpp"

using namespace braid;
using namespace braid::sim;
using namespace braid::sim::test;

TEST_CASE("a lone kernel reproduces its isolated time") {
    const DeviceSpec& dev = h200();
    const Params params;  // default latencies: start = launch + dispatch
    struct Shape {
        const char* what;
        KernelCost k;
        std::uint64_t grid_factor_num, grid_factor_den;  // grid = slots * num / den (+ extra)
        std::uint64_t extra;
    };
    const KernelCost full = kernel_cost("k256", 1, 256, 32, 0.0);             // 8 blocks per SM (warps)
    const KernelCost regs = kernel_cost("k1024", 1, 1024, 64, 0.0);           // 1 block per SM (registers)
    const KernelCost smem = kernel_cost("ksmem", 1, 128, 32, 0.0, 0.0, 100 * 1024);  // 2 blocks per SM (smem)
    const Shape shapes[] = {
        {"one block", full, 0, 1, 1},
        {"less than one SM each", full, 1, 16, 0},
        {"exactly one wave", full, 1, 1, 0},
        {"three full waves", full, 3, 1, 0},
        {"partial last wave", full, 2, 1, 17},
        {"register-limited, multi-wave", regs, 5, 1, 3},
        {"shared-memory-limited, partial", smem, 1, 2, 1},
        {"shared-memory-limited, many waves", smem, 40, 1, 7},
    };
    for (const Shape& s : shapes) {
        CAPTURE(s.what);
        KernelCost k = s.k;
        const std::uint64_t grid = slots(dev, k) * s.grid_factor_num / s.grid_factor_den + s.extra;
        k.shape.grid = {static_cast<std::uint32_t>(grid), 1, 1};
        k.duration_ns = 12345.0 * static_cast<double>(waves(dev, occupancy(dev, k.shape), grid));
        ProgramBuilder b({0});
        b.launch(0, k);
        const Result r = simulate(dev, b.p, params);
        const KernelRecord& kr = r.kernels[0];
        CHECK(kr.issue_ns == doctest::Approx(params.launch_latency_ns));
        CHECK(kr.start_ns == doctest::Approx(params.launch_latency_ns + params.dispatch_latency_ns));
        CHECK(kr.end_ns - kr.start_ns == doctest::Approx(k.duration_ns).epsilon(1e-12));
        CHECK(r.makespan_ns == doctest::Approx(kr.end_ns));
        CHECK(kr.sms_used == std::min<std::uint64_t>(grid, static_cast<std::uint64_t>(dev.sm_count)));
        CHECK(r.block_events == 2 * grid);
        REQUIRE(r.ops.empty());
    }
}

TEST_CASE("kernels on one stream run back to back, separated by the dispatch latency") {
    const DeviceSpec& dev = h200();
    Params params;
    params.dispatch_latency_ns = 700;
    ProgramBuilder b({0});
    b.launch(0, one_per_sm("a", 10, 5000));
    b.launch(0, one_per_sm("b", 10, 3000));
    const Result r = simulate(dev, b.p, params);
    CHECK(r.kernels[1].issue_ns == doctest::Approx(2 * params.launch_latency_ns));
    CHECK(r.kernels[1].runnable_ns == doctest::Approx(r.kernels[0].end_ns));
    CHECK(r.kernels[1].start_ns == doctest::Approx(r.kernels[0].end_ns + params.dispatch_latency_ns));
    CHECK(r.makespan_ns == doctest::Approx(params.launch_latency_ns + 2 * params.dispatch_latency_ns + 8000));
}

TEST_CASE("two kernels that each fill half the SMs finish together on two streams, twice as long on one") {
    const DeviceSpec& dev = h200();
    const auto half = static_cast<std::uint32_t>(dev.sm_count / 2);
    const double d = 40000;
    ProgramBuilder two({0, 0});
    two.launch(0, one_per_sm("a", half, d));
    two.launch(1, one_per_sm("b", half, d));
    const Result r2 = simulate(dev, two.p, no_latency());
    CHECK(r2.kernels[0].end_ns == doctest::Approx(d));
    CHECK(r2.kernels[1].end_ns == doctest::Approx(d));
    CHECK(r2.makespan_ns == doctest::Approx(d));
    CHECK(r2.kernels[0].sms_used == half);
    CHECK(r2.kernels[1].sms_used == half);
    // The second kernel went to the SMs the first left free.
    REQUIRE(!r2.utilisation.empty());
    std::uint32_t most_busy = 0;
    for (const UtilisationSample& u : r2.utilisation) most_busy = std::max(most_busy, u.busy_sms);
    CHECK(most_busy == 2 * half);
    CHECK(r2.mean_busy_sm_fraction == doctest::Approx(2.0 * half / dev.sm_count));

    ProgramBuilder one({0});
    one.launch(0, one_per_sm("a", half, d));
    one.launch(0, one_per_sm("b", half, d));
    const Result r1 = simulate(dev, one.p, no_latency());
    CHECK(r1.kernels[1].start_ns == doctest::Approx(d));
    CHECK(r1.makespan_ns == doctest::Approx(2 * d));
}

TEST_CASE("streams beyond the hardware queues share them and serialise in issue order") {
    // Nine streams, eight queues (CUDA_DEVICE_MAX_CONNECTIONS' default):
    // stream 8 shares queue 0 with stream 0, so its small kernel waits behind
    // stream 0's long one although the two are independent.
    const DeviceSpec& dev = h200();
    const double d = 40000;
    ProgramBuilder b(std::vector<int>(9, 0));
    b.launch(0, one_per_sm("long", 8, d));
    for (std::uint32_t s = 1; s < 8; ++s) b.launch(s, one_per_sm("other", 8, 1000));
    b.launch(8, one_per_sm("behind", 8, 1000));
    Params shared = no_latency();
    const Result r = simulate(dev, b.p, shared);
    CHECK(r.kernels[8].start_ns == doctest::Approx(d));
    CHECK(r.kernels[1].start_ns == doctest::Approx(0.0));  // queue 1 is its own
    Params own = no_latency();
    own.eager_hardware_queues = 0;  // one queue per stream
    CHECK(simulate(dev, b.p, own).kernels[8].start_ns == doctest::Approx(0.0));
    // Graph launches use the 32 hardware queues: no sharing with nine streams.
    b.p.mode = LaunchMode::graph;
    CHECK(simulate(dev, b.p, shared).kernels[8].start_ns == doctest::Approx(0.0));
    Params bad = no_latency();
    bad.graph_hardware_queues = -1;
    CHECK(error_of([&] { (void)simulate(dev, b.p, bad); }).find("hardware queue") != std::string::npos);
}

TEST_CASE("the process's hardware queues: CUDA_DEVICE_MAX_CONNECTIONS from 1 to 32, or the model's when not set") {
    CHECK_FALSE(braid::sim::requested_hardware_queues(nullptr));
    CHECK(braid::sim::requested_hardware_queues("1") == 1);
    CHECK(braid::sim::requested_hardware_queues("32") == 32);
    for (const char* bad : {"", "0", "33", "-4", "8x", " 8", "eight", "99999999999999999999"}) {
        CAPTURE(bad);
        const std::string e = error_of([&] { (void)braid::sim::requested_hardware_queues(bad); });
        CHECK(e.find(std::string("CUDA_DEVICE_MAX_CONNECTIONS='") + bad + "'") != std::string::npos);
        CHECK(e.find("from 1 to 32") != std::string::npos);
    }
    Params p = no_latency();
    p.eager_hardware_queues = 6;  // a calibration's
    CHECK(braid::sim::with_eager_hardware_queues(p, std::nullopt) == p);
    const Params q = braid::sim::with_eager_hardware_queues(p, 2);
    CHECK(q.eager_hardware_queues == 2);
    CHECK(q.graph_hardware_queues == p.graph_hardware_queues);

    // Read from the environment as it is now.
    const char* saved = std::getenv(braid::sim::max_connections_variable);
    const std::optional<std::string> before = saved ? std::optional<std::string>(saved) : std::nullopt;
    REQUIRE(setenv(braid::sim::max_connections_variable, "12", 1) == 0);
    CHECK(braid::sim::process_hardware_queues() == 12);
    REQUIRE(unsetenv(braid::sim::max_connections_variable) == 0);
    CHECK_FALSE(braid::sim::process_hardware_queues());
    if (before) REQUIRE(setenv(braid::sim::max_connections_variable, before->c_str(), 1) == 0);

    // Two eager streams on one queue run one after the other; on two, side by side.
    const DeviceSpec& dev = h200();
    ProgramBuilder b({0, 0});
    b.launch(0, one_per_sm("a", 8, 40000));
    b.launch(1, one_per_sm("b", 8, 40000));
    CHECK(simulate(dev, b.p, braid::sim::with_eager_hardware_queues(no_latency(), 1)).kernels[1].start_ns ==
          doctest::Approx(40000));
    CHECK(simulate(dev, b.p, braid::sim::with_eager_hardware_queues(no_latency(), 2)).kernels[1].start_ns ==
          doctest::Approx(0.0));
}

TEST_CASE("a kernel that fills the GPU gains nothing from a second stream") {
    const DeviceSpec& dev = h200();
    KernelCost k = kernel_cost("fill", 1, 256, 32, 0);
    k.shape.grid.x = static_cast<std::uint32_t>(2 * slots(dev, k));
    k.duration_ns = 2 * 10000.0;
    for (int streams : {1, 2}) {
        CAPTURE(streams);
        ProgramBuilder b(std::vector<int>(static_cast<std::size_t>(streams), 0));
        b.launch(0, k, "first");
        b.launch(static_cast<std::uint32_t>(streams - 1), k, "second");
        const Result r = simulate(dev, b.p, no_latency());
        CHECK(r.makespan_ns == doctest::Approx(4 * 10000.0));
        CHECK(r.kernels[0].end_ns == doctest::Approx(2 * 10000.0));
        CHECK(r.mean_busy_sm_fraction == doctest::Approx(1.0));
    }
}

TEST_CASE("an event wait delays its stream until the recorded work is done") {
    const DeviceSpec& dev = h200();
    SUBCASE("without latencies the waiting kernel starts when the recorded kernel ends") {
        ProgramBuilder b({0, 0});
        b.launch(0, one_per_sm("producer", 4, 9000));
        b.record(0, 0);
        b.launch(0, one_per_sm("unrelated", 4, 50000));
        b.wait(1, 0);
        b.launch(1, one_per_sm("consumer", 4, 1000));
        const Result r = simulate(dev, b.p, no_latency());
        CHECK(r.kernels[2].runnable_ns == doctest::Approx(9000));
        CHECK(r.kernels[2].start_ns == doctest::Approx(9000));
        CHECK(r.kernels[2].end_ns == doctest::Approx(10000));
        CHECK(r.kernels[1].end_ns == doctest::Approx(59000));
    }
    SUBCASE("with latencies: the later of the record and the host's wait call") {
        const Params params;
        ProgramBuilder b({0, 0});
        b.launch(0, one_per_sm("producer", 4, 20000));  // issued at 1 launch
        b.record(0, 0);                                  // + record
        b.wait(1, 0);                                    // + wait
        b.launch(1, one_per_sm("consumer", 4, 1000));   // + launch
        const Result r = simulate(dev, b.p, params);
        const double producer_end = params.launch_latency_ns + params.dispatch_latency_ns + 20000;
        CHECK(r.kernels[0].end_ns == doctest::Approx(producer_end));
        CHECK(r.kernels[1].issue_ns ==
              doctest::Approx(2 * params.launch_latency_ns + params.record_latency_ns + params.wait_latency_ns));
        CHECK(r.kernels[1].runnable_ns == doctest::Approx(producer_end));
        CHECK(r.kernels[1].start_ns == doctest::Approx(producer_end + params.dispatch_latency_ns));
    }
    SUBCASE("a wait binds to the most recent record issued before it, not a later one") {
        ProgramBuilder b({0, 0});
        b.launch(0, one_per_sm("first", 4, 5000));
        b.record(0, 0);
        b.wait(1, 0);
        b.launch(1, one_per_sm("consumer", 4, 1000));
        b.launch(0, one_per_sm("second", 4, 30000));
        b.record(0, 0);  // re-recorded after the wait: does not delay it
        const Result r = simulate(dev, b.p, no_latency());
        CHECK(r.kernels[1].start_ns == doctest::Approx(5000));
        CHECK(r.kernels[2].end_ns == doctest::Approx(35000));
    }
    SUBCASE("re-recording an event moves later waits to the new record") {
        ProgramBuilder b({0, 0});
        b.launch(0, one_per_sm("first", 4, 5000));
        b.record(0, 0);
        b.launch(0, one_per_sm("second", 4, 30000));
        b.record(0, 0);
        b.wait(1, 0);
        b.launch(1, one_per_sm("consumer", 4, 1000));
        const Result r = simulate(dev, b.p, no_latency());
        CHECK(r.kernels[2].start_ns == doctest::Approx(35000));
    }
    SUBCASE("a record issued before its stream's earlier kernel ends still waits for it") {
        Params params = no_latency();
        params.record_latency_ns = 0;
        ProgramBuilder b({0, 0, 0});
        b.launch(0, one_per_sm("a", 2, 7000));
        b.launch(1, one_per_sm("b", 2, 3000));
        b.record(0, 0);
        b.record(1, 1);
        b.wait(2, 0);
        b.wait(2, 1);
        b.launch(2, one_per_sm("joined", 2, 100));
        const Result r = simulate(dev, b.p, params);
        CHECK(r.kernels[2].start_ns == doctest::Approx(7000));
    }
}

TEST_CASE("the resident-kernel limit holds kernels back in launch order") {
    const DeviceSpec& dev = h200();
    const double d = 1000;
    auto run = [&](int limit) {
        Params params = no_latency();
        params.max_resident_kernels = limit;
        ProgramBuilder b({0, 0, 0, 0});
        for (std::uint32_t s = 0; s < 4; ++s) b.launch(s, one_per_sm("k" + std::to_string(s), 1, d));
        return simulate(dev, b.p, params);
    };
    SUBCASE("limit 1: one at a time") {
        const Result r = run(1);
        for (std::size_t k = 0; k < 4; ++k) {
            CHECK(r.kernels[k].start_ns == doctest::Approx(d * static_cast<double>(k)));
            CHECK(r.kernels[k].resident_ns == doctest::Approx(d * static_cast<double>(k)));
            CHECK(r.kernels[k].runnable_ns == doctest::Approx(0));
        }
        CHECK(r.makespan_ns == doctest::Approx(4 * d));
    }
    SUBCASE("limit 2: two at a time") {
        const Result r = run(2);
        CHECK(r.kernels[1].start_ns == doctest::Approx(0));
        CHECK(r.kernels[2].start_ns == doctest::Approx(d));
        CHECK(r.kernels[3].start_ns == doctest::Approx(d));
        CHECK(r.makespan_ns == doctest::Approx(2 * d));
    }
    SUBCASE("0: the device's limit") {
        const Result r = run(0);
        CHECK(r.makespan_ns == doctest::Approx(d));
    }
    SUBCASE("the device limit applies when Params leaves it at 0") {
        DeviceSpec small = dev;
        small.max_resident_grids = 3;
        ProgramBuilder b({0, 0, 0, 0});
        for (std::uint32_t s = 0; s < 4; ++s) b.launch(s, one_per_sm("k", 1, d));
        const Result r = simulate(small, b.p, no_latency());
        CHECK(r.kernels[3].start_ns == doctest::Approx(d));
        CHECK(r.makespan_ns == doctest::Approx(2 * d));
    }
}

TEST_CASE("stream priority decides whose blocks go first") {
    const DeviceSpec& dev = h200();
    KernelCost big = kernel_cost("big", 1, 256, 32, 0);
    big.shape.grid.x = static_cast<std::uint32_t>(3 * slots(dev, big));
    const double wave = 10000;
    big.duration_ns = 3 * wave;
    KernelCost urgent = kernel_cost("urgent", 1, 256, 32, 0);
    urgent.shape.grid.x = static_cast<std::uint32_t>(slots(dev, urgent));
    urgent.duration_ns = 4000;

    // 'urgent' reaches the device one launch later, when 'big' fills every SM.
    Params params = no_latency();
    params.launch_latency_ns = 1000;
    auto run = [&](int big_priority, int urgent_priority) {
        ProgramBuilder b({big_priority, urgent_priority});
        b.launch(0, big);
        b.launch(1, urgent);
        return simulate(dev, b.p, params);
    };
    const double t0 = params.launch_latency_ns;
    SUBCASE("equal priority: the earlier launch keeps the GPU") {
        const Result r = run(0, 0);
        CHECK(r.kernels[1].resident_ns == doctest::Approx(2 * t0));
        CHECK(r.kernels[1].start_ns == doctest::Approx(t0 + 3 * wave));
        CHECK(r.kernels[1].end_ns == doctest::Approx(t0 + 3 * wave + 4000));
    }
    SUBCASE("the urgent stream (lower number) takes the SMs freed by the first wave") {
        const Result r = run(0, -1);
        CHECK(r.kernels[1].start_ns == doctest::Approx(t0 + wave));
        CHECK(r.kernels[1].end_ns == doctest::Approx(t0 + wave + 4000));
        CHECK(r.kernels[0].end_ns == doctest::Approx(t0 + 3 * wave + 4000));
    }
    SUBCASE("resident at the same instant, the urgent one goes first even if launched later") {
        params.launch_latency_ns = 0;
        const Result r = run(0, -1);
        CHECK(r.kernels[1].start_ns == doctest::Approx(0));
        CHECK(r.kernels[0].start_ns == doctest::Approx(4000));  // 'urgent' took every slot
        CHECK(r.kernels[0].end_ns == doctest::Approx(4000 + 3 * wave));
    }
    SUBCASE("a kernel that cannot fit leaves the gap to a later, smaller one") {
        // 'wide' needs a whole SM per block; 'small' fits beside 'big' blocks.
        KernelCost half_sm = kernel_cost("half", static_cast<std::uint32_t>(dev.sm_count), 1024, 32, 5000);  // 32 warps
        KernelCost wide = one_per_sm("wide", static_cast<std::uint32_t>(dev.sm_count), 5000);               // all registers
        KernelCost small = kernel_cost("small", static_cast<std::uint32_t>(dev.sm_count), 256, 32, 2000);
        ProgramBuilder b({0, 0, 0});
        b.launch(0, half_sm);
        b.launch(1, wide);
        b.launch(2, small);
        const Result r = simulate(dev, b.p, no_latency());
        CHECK(r.kernels[1].start_ns == doctest::Approx(5000));
        CHECK(r.kernels[2].start_ns == doctest::Approx(0));
    }
}

TEST_CASE("DRAM bandwidth sharing stretches memory-bound kernels and leaves compute-bound ones alone") {
    const DeviceSpec& dev = h200();
    const auto half = static_cast<std::uint32_t>(dev.sm_count / 2);
    const double bw = dev.dram_bytes_per_ns();
    const double d = 50000;
    // One wave of `half` blocks pulling `share` of the bandwidth.
    // One block on each of `half` SMs (8 would fit), so others fit beside them.
    auto mem_kernel = [&](std::string name, double share, double duration) {
        return kernel_cost(std::move(name), half, 256, 32, duration, share * bw * duration);
    };
    SUBCASE("alone, under the bandwidth: isolated time") {
        ProgramBuilder b({0});
        b.launch(0, mem_kernel("m", 0.75, d));
        CHECK(simulate(dev, b.p, no_latency()).makespan_ns == doctest::Approx(d));
    }
    SUBCASE("two at 0.75 each: demand 1.5x the bandwidth, both take 1.5x") {
        ProgramBuilder b({0, 0});
        b.launch(0, mem_kernel("m0", 0.75, d));
        b.launch(1, mem_kernel("m1", 0.75, d));
        const Result r = simulate(dev, b.p, no_latency());
        const double factor = (0.75 + 0.75) / 1.0;
        CHECK(r.kernels[0].end_ns == doctest::Approx(d * factor));
        CHECK(r.kernels[1].end_ns == doctest::Approx(d * factor));
    }
    SUBCASE("the survivor speeds up when the other finishes") {
        ProgramBuilder b({0, 0});
        b.launch(0, mem_kernel("short", 0.75, d));
        b.launch(1, mem_kernel("long", 0.75, 2 * d));
        const Result r = simulate(dev, b.p, no_latency());
        // Both at rate 1/1.5 until 'short' has made d of progress (at 1.5d);
        // 'long' then has d left at full rate.
        CHECK(r.kernels[0].end_ns == doctest::Approx(1.5 * d));
        CHECK(r.kernels[1].end_ns == doctest::Approx(2.5 * d));
    }
    SUBCASE("a compute-bound kernel beside them is not slowed") {
        ProgramBuilder b({0, 0});
        b.launch(0, mem_kernel("m0", 1.0, d));
        b.launch(1, one_per_sm("compute", half, d));
        const Result r = simulate(dev, b.p, no_latency());
        CHECK(r.kernels[0].end_ns == doctest::Approx(d));
        CHECK(r.kernels[1].end_ns == doctest::Approx(d));
        ProgramBuilder c({0, 0, 0});
        c.launch(0, mem_kernel("m0", 0.75, d));
        c.launch(1, mem_kernel("m1", 0.75, d));
        const KernelCost compute = kernel_cost("compute", half, 32, 16, d);
        c.launch(2, compute);
        const Result rc = simulate(dev, c.p, no_latency());
        CHECK(rc.kernels[0].end_ns == doctest::Approx(1.5 * d));
        CHECK(rc.kernels[2].end_ns == doctest::Approx(d));
    }
    SUBCASE("share_bandwidth = false turns the model off") {
        Params params = no_latency();
        params.share_bandwidth = false;
        ProgramBuilder b({0, 0});
        b.launch(0, mem_kernel("m0", 0.75, d));
        b.launch(1, mem_kernel("m1", 0.75, d));
        CHECK(simulate(dev, b.p, params).makespan_ns == doctest::Approx(d));
    }
    SUBCASE("a kernel demanding more than the device has alone is clamped to its isolated time") {
        ProgramBuilder b({0});
        b.launch(0, mem_kernel("greedy", 3.0, d));
        CHECK(simulate(dev, b.p, no_latency()).makespan_ns == doctest::Approx(d));
        // ... and it then demands exactly the bandwidth: a second such kernel halves both.
        ProgramBuilder c({0, 0});
        c.launch(0, mem_kernel("greedy0", 3.0, d));
        c.launch(1, mem_kernel("greedy1", 3.0, d));
        CHECK(simulate(dev, c.p, no_latency()).makespan_ns == doctest::Approx(2 * d));
    }
    SUBCASE("a multi-wave kernel's demand is its bytes over its blocks, wave by wave") {
        // Two waves of one block per SM on every SM; 0.6 of the bandwidth on
        // average: each wave pulls half the bytes in half the time.
        KernelCost m = one_per_sm("waves", static_cast<std::uint32_t>(2 * dev.sm_count), d, 0.6 * bw * d);
        ProgramBuilder b({0});
        b.launch(0, m);
        CHECK(simulate(dev, b.p, no_latency()).makespan_ns == doctest::Approx(d));
    }
}

TEST_CASE("graph launch versus eager launch costs") {
    const DeviceSpec& dev = h200();
    Params params;
    params.launch_latency_ns = 3000;
    params.record_latency_ns = 800;
    params.wait_latency_ns = 600;
    params.graph_launch_ns = 2500;
    params.graph_node_ns = 200;
    params.dispatch_latency_ns = 500;
    auto build = [&](LaunchMode mode) {
        ProgramBuilder b({0, 0});
        for (int i = 0; i < 10; ++i) b.launch(0, one_per_sm("tiny", 1, 1000));
        b.record(0, 0);
        b.wait(1, 0);
        b.launch(1, one_per_sm("after", 1, 1000));
        b.p.mode = mode;
        return b.p;
    };
    const Result eager = simulate(dev, build(LaunchMode::eager), params);
    const Result graph = simulate(dev, build(LaunchMode::graph), params);
    for (std::size_t k = 0; k < 10; ++k) {
        CHECK(eager.kernels[k].issue_ns == doctest::Approx(params.launch_latency_ns * static_cast<double>(k + 1)));
        CHECK(graph.kernels[k].issue_ns ==
              doctest::Approx(params.graph_launch_ns + params.graph_node_ns * static_cast<double>(k)));
    }
    CHECK(eager.kernels[10].issue_ns ==
          doctest::Approx(11 * params.launch_latency_ns + params.record_latency_ns + params.wait_latency_ns));
    CHECK(graph.kernels[10].issue_ns == doctest::Approx(params.graph_launch_ns + 10 * params.graph_node_ns));
    // Eager: the host is the bottleneck (3 us per launch > 1 us of work + 0.5 us dispatch).
    CHECK(eager.kernels[9].start_ns == doctest::Approx(10 * params.launch_latency_ns + params.dispatch_latency_ns));
    // Graph: the device is, each kernel waiting for the one before plus dispatch.
    CHECK(graph.kernels[9].end_ns ==
          doctest::Approx(params.graph_launch_ns + 10 * (params.dispatch_latency_ns + 1000)));
    CHECK(graph.makespan_ns < eager.makespan_ns);
}

TEST_CASE("per-op records and utilisation") {
    const DeviceSpec& dev = h200();
    ProgramBuilder b({0, 0});
    b.launch(0, one_per_sm("a0", 3, 1000), "op a", 7);
    b.launch(0, one_per_sm("a1", 5, 2000), "op a", 7);
    b.launch(1, one_per_sm("b", 9, 1500), "op b", 2);
    b.launch(1, one_per_sm("x", 1, 100), "no op");
    const Result r = simulate(dev, b.p, no_latency());
    REQUIRE(r.ops.size() == 2);
    CHECK(r.ops[0].op == 2);
    CHECK(r.ops[0].stream == 1);
    CHECK(r.ops[0].sms_used == 9);
    CHECK(r.ops[1].op == 7);
    CHECK(r.ops[1].start_ns == doctest::Approx(r.kernels[0].start_ns));
    CHECK(r.ops[1].end_ns == doctest::Approx(r.kernels[1].end_ns));
    CHECK(r.ops[1].sms_used == 5);
    // The step function starts at 0 and ends with nothing busy at the makespan.
    REQUIRE(r.utilisation.size() >= 2);
    CHECK(r.utilisation.front().time_ns == 0);
    CHECK(r.utilisation.back().busy_sms == 0);
    CHECK(r.utilisation.back().time_ns == doctest::Approx(r.makespan_ns));
    for (std::size_t i = 1; i < r.utilisation.size(); ++i) CHECK(r.utilisation[i].time_ns > r.utilisation[i - 1].time_ns);
    // At t=0 kernels a0 (3 SMs) and b (9 SMs) start on distinct SMs.
    CHECK(r.utilisation[0].busy_sms == 12);
    CHECK(r.utilisation[0].warp_fraction == doctest::Approx(12.0 * 32 / (dev.sm_count * dev.max_warps_per_sm())));
    // With latencies nothing is busy until the first dispatch.
    const Result late = simulate(dev, b.p);
    CHECK(late.utilisation.front().busy_sms == 0);
    CHECK(late.utilisation[1].time_ns == doctest::Approx(late.kernels[0].start_ns));
    double area = 0;
    for (const KernelRecord& k : r.kernels) area += (k.end_ns - k.start_ns) * k.sms_used;
    CHECK(r.mean_busy_sm_fraction == doctest::Approx(area / (r.makespan_ns * dev.sm_count)));
}

TEST_CASE("an empty program takes no time") {
    ProgramBuilder b({0});
    const Result r = simulate(h200(), b.p);
    CHECK(r.makespan_ns == 0);
    CHECK(r.kernels.empty());
    CHECK(r.block_events == 0);
}

TEST_CASE("simulate_within gives up only on iterations sure to end after the limit") {
    const DeviceSpec& dev = h200();
    ProgramBuilder b({0, 0});
    for (int i = 0; i < 6; ++i) b.launch(static_cast<std::uint32_t>(i % 2), one_per_sm("k" + std::to_string(i), 200, 4000));
    const Result full = simulate(dev, b.p);
    REQUIRE(full.makespan_ns > 0.0);
    std::uint64_t events = 0;
    // At or above the makespan: the same timeline as simulate().
    for (double limit : {full.makespan_ns, full.makespan_ns * 2}) {
        const std::optional<Result> r = simulate_within(dev, b.p, {}, limit, events);
        REQUIRE(r.has_value());
        CHECK(r->makespan_ns == full.makespan_ns);
        CHECK(r->block_events == full.block_events);
        CHECK(events == full.block_events);
    }
    // Below it: no answer, and only part of the work was simulated.
    for (double fraction : {0.0, 0.3, 0.9}) {
        CAPTURE(fraction);
        CHECK_FALSE(simulate_within(dev, b.p, {}, full.makespan_ns * fraction, events).has_value());
        CHECK(events < full.block_events);
    }
}

// ---------------------------------------------------------------- calibrated effects

TEST_CASE("co-running kernels slow each other once they press more than the GPU holds") {
    const DeviceSpec& dev = h200();
    const auto sms = static_cast<std::uint32_t>(dev.sm_count);
    const double d = 40000;
    // 256-thread blocks fit 8 to an SM: one block per SM is a kernel's whole
    // first wave, so each of these presses exactly 1 (a full GPU's worth).
    const KernelCost wide = kernel_cost("wide", sms, 256, 32, d);
    for (const double slowdown : {0.0, 0.5, 1.0}) {
        CAPTURE(slowdown);
        Params params = no_latency();
        params.corun_slowdown = slowdown;
        ProgramBuilder b({0, 0});
        b.launch(0, wide);
        b.launch(1, wide);
        const Result r = simulate(dev, b.p, params);
        // Both run at once, each at 1 / (1 + slowdown x (2 - 1)).
        CHECK(r.kernels[0].start_ns == doctest::Approx(0.0));
        CHECK(r.kernels[1].start_ns == doctest::Approx(0.0));
        CHECK(r.kernels[0].end_ns == doctest::Approx(d * (1.0 + slowdown)));
        CHECK(r.kernels[1].end_ns == doctest::Approx(d * (1.0 + slowdown)));
    }
    // Half the SMs each: together they press 1, nobody slows.
    Params params = no_latency();
    params.corun_slowdown = 1.0;
    ProgramBuilder half({0, 0});
    half.launch(0, one_per_sm("a", sms / 2, d));
    half.launch(1, one_per_sm("b", sms / 2, d));
    const Result r = simulate(dev, half.p, params);
    CHECK(r.makespan_ns == doctest::Approx(d));
    // A kernel alone never slows, whatever its shape.
    ProgramBuilder alone({0});
    KernelCost many = kernel_cost("many", sms * 8 * 3 + 5, 256, 32, 4 * d);
    alone.launch(0, many);
    CHECK(simulate(dev, alone.p, params).makespan_ns == doctest::Approx(4 * d).epsilon(1e-12));
}

TEST_CASE("a waiting stream sees a record event_latency_ns after it completes") {
    const DeviceSpec& dev = h200();
    Params params = no_latency();
    params.event_latency_ns = 2500;
    params.dispatch_latency_ns = 300;
    ProgramBuilder b({0, 0});
    b.launch(0, one_per_sm("producer", 10, 5000));
    b.record(0, 0);
    b.wait(1, 0);
    b.launch(1, one_per_sm("consumer", 10, 1000));
    const Result r = simulate(dev, b.p, params);
    CHECK(r.kernels[1].runnable_ns == doctest::Approx(r.kernels[0].end_ns + 2500));
    CHECK(r.kernels[1].start_ns == doctest::Approx(r.kernels[0].end_ns + 2500 + 300));
    // Same stream: stream order, no event, no latency.
    ProgramBuilder one({0});
    one.launch(0, one_per_sm("producer", 10, 5000));
    one.launch(0, one_per_sm("consumer", 10, 1000));
    const Result s = simulate(dev, one.p, params);
    CHECK(s.kernels[1].start_ns == doctest::Approx(s.kernels[0].end_ns + 300));
}

TEST_CASE("eager launches pay an extra dispatch gap and a host cost per op body; graphs do not") {
    const DeviceSpec& dev = h200();
    Params params;
    params.launch_latency_ns = 1000;
    params.op_host_ns = 4000;
    params.dispatch_latency_ns = 500;
    params.eager_dispatch_extra_ns = 1500;
    ProgramBuilder b({0});
    b.launch(0, one_per_sm("a", 10, 20000), "a", 0);
    b.launch(0, one_per_sm("b", 10, 20000), "b", 0);  // same op: no second body cost
    b.launch(0, one_per_sm("c", 10, 20000), "c", 1);
    const Result eager = simulate(dev, b.p, params);
    CHECK(eager.kernels[0].issue_ns == doctest::Approx(4000 + 1000));
    CHECK(eager.kernels[1].issue_ns == doctest::Approx(4000 + 2 * 1000));
    CHECK(eager.kernels[2].issue_ns == doctest::Approx(2 * 4000 + 3 * 1000));
    CHECK(eager.kernels[1].start_ns == doctest::Approx(eager.kernels[0].end_ns + 500 + 1500));
    b.p.mode = LaunchMode::graph;
    const Result graph = simulate(dev, b.p, params);
    CHECK(graph.kernels[1].start_ns == doctest::Approx(graph.kernels[0].end_ns + 500));
}

TEST_CASE("a launch whose body the profiler timed costs the host that, scaled; the others the constants") {
    const DeviceSpec& dev = h200();
    Params params;
    params.launch_latency_ns = 1000;
    params.op_host_ns = 4000;
    params.host_time_scale = 0.5;
    ProgramBuilder b({0});
    b.launch(0, one_per_sm("a", 10, 100), "a", 0);
    b.launch(0, one_per_sm("b", 10, 100), "b", 1);
    b.launch(0, one_per_sm("c", 10, 100), "c", 2);
    b.p.kernels[0].host_ns = 30000;  // op 0: a slow library call
    b.p.kernels[2].host_ns = 0;      // op 2: measured as free
    const Result eager = simulate(dev, b.p, params);
    CHECK(eager.kernels[0].issue_ns == doctest::Approx(15000));
    CHECK(eager.kernels[1].issue_ns == doctest::Approx(15000 + 4000 + 1000));
    CHECK(eager.kernels[2].issue_ns == doctest::Approx(20000));
    // Host-bound: the step ends with the last launch's kernel.
    CHECK(eager.makespan_ns > 20000);
    // A graph replays without the host.
    b.p.mode = LaunchMode::graph;
    CHECK(simulate(dev, b.p, params).kernels[0].issue_ns == doctest::Approx(params.graph_launch_ns));
    // A measured host time must be a number.
    b.p.mode = LaunchMode::eager;
    b.p.kernels[1].host_ns = std::numeric_limits<double>::quiet_NaN();
    CHECK_THROWS_WITH_AS(simulate(dev, b.p, params), doctest::Contains("kernel 1 'b'"), ModelError);
    params.host_time_scale = -1;
    b.p.kernels[1].host_ns = -1;
    CHECK_THROWS_WITH_AS(simulate(dev, b.p, params), doctest::Contains("host_time_scale"), SimError);
}
