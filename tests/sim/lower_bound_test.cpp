// The lower bound: each term on cases small enough to work out by hand from
// the occupancy model, and its behaviour for split and per-image ops.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "braid/graph/op_graph.hpp"
#include "braid/model/lower_bound.hpp"
#include "braid/model/occupancy.hpp"
#include "braid/sim/simulator.hpp"
#include "sim_fixtures.hpp"

using namespace braid;
using namespace braid::sim;
using namespace braid::sim::test;

namespace {

// `n` ops; op i reads what op i-1 wrote when `chain`, else all independent.
OpGraph ops_graph(std::size_t n, bool chain, std::uint32_t split_batch = 0) {
    OpGraphBuilder b;
    std::vector<BufferId> bufs;
    for (std::size_t i = 0; i < n; ++i) {
        bufs.push_back(b.add_buffer("b" + std::to_string(i), 64));
        OpSpec s;
        s.name = "op" + std::to_string(i);
        if (chain && i > 0) s.reads.push_back(bufs[i - 1]);
        s.writes.push_back(bufs[i]);
        s.split_batch = split_batch;
        b.add_op(s);
    }
    return b.finalize();
}

OpCost op_of(std::vector<KernelCost> kernels, std::uint32_t per_image = 0) {
    OpCost c;
    c.kernels = std::move(kernels);
    c.launches_per_image = per_image;
    return c;
}

}  // namespace

TEST_CASE("kernel_work: block time from waves, shares of each SM resource, clamped DRAM demand") {
    const DeviceSpec& dev = h200();
    KernelCost k = kernel_cost("k", 1, 256, 32, 0);
    const Occupancy o = occupancy(dev, k.shape);
    k.shape.grid.x = static_cast<std::uint32_t>(2 * slots(dev, k) + 5);
    k.duration_ns = 3 * 1000.0;
    const KernelWork w = kernel_work(dev, k);
    CHECK(w.waves == 3);
    CHECK(w.block_ns == doctest::Approx(1000.0));
    CHECK(w.blocks_per_wave == slots(dev, k));
    CHECK(w.sm_share[0] == doctest::Approx(static_cast<double>(o.warps_per_block) / dev.max_warps_per_sm()));
    CHECK(w.sm_share[3] == doctest::Approx(1.0 / dev.max_blocks_per_sm));
    // The limiter's share times blocks per SM never exceeds one SM.
    for (double share : w.sm_share) CHECK(share * o.blocks_per_sm <= 1.0 + 1e-12);
    CHECK_FALSE(w.memory_bound());

    k.dram_bytes = 1e6;
    const KernelWork m = kernel_work(dev, k);
    CHECK(m.dram_bytes_per_block_ns == doctest::Approx(1e6 / (static_cast<double>(m.blocks) * m.block_ns)));
    CHECK(m.dram_bytes() == doctest::Approx(1e6));
    k.dram_bytes = 1e12;  // far beyond what the device moves in 3 us
    const KernelWork clamped = kernel_work(dev, k);
    CHECK(clamped.dram_bytes_per_block_ns * static_cast<double>(clamped.blocks_per_wave) ==
          doctest::Approx(dev.dram_bytes_per_ns()));
}

TEST_CASE("a lone full-wave kernel: both terms equal its time") {
    const DeviceSpec& dev = h200();
    KernelCost k = kernel_cost("k", 1, 256, 32, 0);
    k.shape.grid.x = static_cast<std::uint32_t>(3 * slots(dev, k));
    k.duration_ns = 30000;
    const OpCost costs[] = {op_of({k})};
    const LowerBound lb = lower_bound(dev, ops_graph(1, false), costs);
    CHECK(lb.critical_path_ns == doctest::Approx(30000));
    CHECK(lb.area_ns == doctest::Approx(30000));
    CHECK(lb.bound_ns == doctest::Approx(30000));
    CHECK(lb.critical_ops == std::vector<OpId>{0});
}

TEST_CASE("a chain is bound by its path, independent ops by their area") {
    const DeviceSpec& dev = h200();
    const auto sms = static_cast<std::uint32_t>(dev.sm_count);
    std::vector<OpCost> costs;
    for (int i = 0; i < 10; ++i) costs.push_back(op_of({one_per_sm("k", sms / 4, 1000.0 * (i + 1))}));

    const LowerBound chain = lower_bound(dev, ops_graph(10, true), costs);
    CHECK(chain.critical_path_ns == doctest::Approx(55000));
    CHECK(chain.critical_ops.size() == 10);
    // A one-per-SM block holds all registers: a quarter of the SMs for each op's time.
    CHECK(chain.area_ns == doctest::Approx(55000 / 4.0));
    CHECK(chain.bound_ns == doctest::Approx(55000));

    const LowerBound wide = lower_bound(dev, ops_graph(10, false), costs);
    CHECK(wide.critical_path_ns == doctest::Approx(10000));
    CHECK(wide.area_ns == doctest::Approx(55000 / 4.0));
    CHECK(wide.bound_ns == doctest::Approx(55000 / 4.0));

    // Ten streams get within the first kernel's time of the area bound.
    ProgramBuilder b(std::vector<int>(10, 0));
    for (std::uint32_t i = 0; i < 10; ++i) b.launch(i, costs[i].kernels[0]);
    const Result r = simulate(dev, b.p, no_latency());
    CHECK(r.makespan_ns >= wide.bound_ns);
    CHECK(r.makespan_ns <= wide.bound_ns + 10000);
}

TEST_CASE("a splittable op's critical-path time is what its best split could reach") {
    const DeviceSpec& dev = h200();
    SUBCASE("batched: the largest part of a split into single images, or the op's area") {
        KernelCost k = kernel_cost("conv", 1, 256, 32, 0);
        k.shape.grid.x = static_cast<std::uint32_t>(slots(dev, k) + 32);  // a sliver of a second wave
        k.duration_ns = 2 * 10000.0;
        const OpCost costs[] = {op_of({k})};
        const LowerBound unsplit = lower_bound(dev, ops_graph(1, false, 0), costs);
        CHECK(unsplit.critical_path_ns == doctest::Approx(20000));
        const LowerBound split = lower_bound(dev, ops_graph(1, false, 32), costs);
        const double area = static_cast<double>(k.shape.blocks()) / static_cast<double>(slots(dev, k)) * 10000;
        CHECK(split.area_ns == doctest::Approx(area));
        CHECK(split.critical_path_ns == doctest::Approx(area));
        CHECK(split.critical_path_ns < unsplit.critical_path_ns);
        for (std::uint32_t parts : {2u, 4u, 32u}) {
            ProgramBuilder b(std::vector<int>(parts, 0));
            for (std::uint32_t part = 0; part < parts; ++part)
                for (const KernelCost& pk : split_part(dev, costs[0], 32, parts, part).kernels) b.launch(part, pk);
            CHECK(simulate(dev, b.p, no_latency()).makespan_ns >= split.bound_ns);
        }
    }
    SUBCASE("per image: the longest image's chain") {
        std::vector<KernelCost> ks;
        for (int img = 0; img < 4; ++img) {
            ks.push_back(kernel_cost("im2col", 4, 128, 32, 1000.0 + img));
            ks.push_back(kernel_cost("gemm", 8, 128, 32, 5000.0));
        }
        const OpCost costs[] = {op_of(ks, 2)};
        const LowerBound lb = lower_bound(dev, ops_graph(1, false, 4), costs);
        CHECK(lb.critical_path_ns == doctest::Approx(6003.0));
        const LowerBound whole = lower_bound(dev, ops_graph(1, false, 0), costs);
        CHECK(whole.critical_path_ns == doctest::Approx(4 * 6000.0 + 6));
        // One image per stream reaches the bound exactly.
        ProgramBuilder b({0, 0, 0, 0});
        for (std::uint32_t part = 0; part < 4; ++part)
            for (const KernelCost& pk : split_part(dev, costs[0], 4, 4, part).kernels) b.launch(part, pk);
        CHECK(simulate(dev, b.p, no_latency()).makespan_ns == doctest::Approx(lb.bound_ns));
    }
    SUBCASE("per image with the wrong kernel count names the op") {
        const OpCost costs[] = {op_of({kernel_cost("k", 4, 128, 32, 1000)}, 2)};
        const std::string e = error_of([&] { (void)lower_bound(dev, ops_graph(1, false, 4), costs); });
        CHECK(e.find("op 'op0'") != std::string::npos);
        CHECK(e.find("launches per image") != std::string::npos);
    }
}

TEST_CASE("the DRAM term counts where bandwidth is shared") {
    const DeviceSpec& dev = h200();
    const double bw = dev.dram_bytes_per_ns();
    std::vector<OpCost> costs;
    // Eight independent ops, small on SMs, each pulling 60% of the bandwidth.
    for (int i = 0; i < 8; ++i) costs.push_back(op_of({kernel_cost("copy", 16, 256, 32, 10000, 0.6 * bw * 10000)}));
    const OpGraph g = ops_graph(8, false);
    const LowerBound lb = lower_bound(dev, g, costs);
    CHECK(lb.dram_ns == doctest::Approx(8 * 0.6 * 10000));
    CHECK(lb.bound_ns == doctest::Approx(lb.dram_ns));
    const LowerBound off = lower_bound(dev, g, costs, false);
    CHECK(off.dram_ns == doctest::Approx(lb.dram_ns));
    CHECK(off.bound_ns == doctest::Approx(std::max(off.critical_path_ns, off.area_ns)));

    ProgramBuilder b(std::vector<int>(8, 0));
    for (std::uint32_t i = 0; i < 8; ++i) b.launch(i, costs[i].kernels[0]);
    const Result r = simulate(dev, b.p, no_latency());
    CHECK(r.makespan_ns == doctest::Approx(lb.dram_ns));  // bandwidth-bound, and exactly so
}

TEST_CASE("lower bound errors name the op") {
    const DeviceSpec& dev = h200();
    const OpCost bad[] = {op_of({kernel_cost("k", 4, 128, 32, -3)})};
    const std::string e = error_of([&] { (void)lower_bound(dev, ops_graph(1, false), bad); });
    CHECK(e.find("op 'op0'") != std::string::npos);
    CHECK(e.find("duration") != std::string::npos);
    const OpCost one[] = {op_of({kernel_cost("k", 4, 128, 32, 3)})};
    CHECK(error_of([&] { (void)lower_bound(dev, ops_graph(2, false), one); }).find("costs for 1 ops, the graph has 2") !=
          std::string::npos);
}
