// How fast one iteration could possibly run on a device, whatever the plan:
// the longest dependency chain of op times, the SM-time every block needs
// spread over all SMs, and the DRAM bytes at full bandwidth. Reports divide
// a measured or simulated time by bound_ns.
//
// KernelWork, the per-block view of a kernel (block time, SM resource shares,
// DRAM demand), lives here because the bound and the simulator must derive
// these numbers the same way for the bound to hold in the simulator.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "braid/error.hpp"
#include "braid/graph/op_graph.hpp"
#include "braid/model/batch_split.hpp"
#include "braid/model/cost.hpp"
#include "braid/model/device_spec.hpp"
#include "braid/model/occupancy.hpp"
#include "braid/model/sm_resources.hpp"

namespace braid {

// The SM resources a block holds while it runs, in the order SmState counts them.
enum class SmResource : std::uint8_t { warps, registers, shared_memory, block_slots };
inline constexpr std::size_t sm_resource_count = 4;

// The simulator places blocks wave by wave; a grid of more waves than this
// is simulated with `merged` launched blocks per simulated block (each
// holding its SM slot that many block times), so any launchable grid costs
// at most about this many placement passes. Alone on the GPU such a kernel
// still takes exactly its duration; beside others its tail is coarser by at
// most 1/max_simulated_waves of its duration.
inline constexpr std::uint64_t max_simulated_waves = 1024;

// A kernel as a bag of equal thread blocks.
struct KernelWork {
    Occupancy occupancy;
    BlockDemand demand;
    std::uint64_t merged = 1;           // launched blocks per simulated block (max_simulated_waves)
    std::uint64_t blocks = 0;           // simulated blocks: the grid's blocks / merged, rounded up
    std::uint64_t waves = 0;            // alone on the GPU
    std::uint64_t blocks_per_wave = 0;  // min(blocks, blocks_per_sm x SMs): most blocks it ever runs at once
    double block_ns = 0.0;              // isolated duration / waves: alone it reproduces its duration exactly
    // DRAM bytes per ns one running block pulls: its 1/blocks share of the
    // bytes over block_ns, clamped so a full wave never exceeds the device's
    // bandwidth (its measured time already includes whatever bandwidth it got).
    double dram_bytes_per_block_ns = 0.0;
    // Fraction of one SM's capacity of each resource a block holds. On every
    // SM, at every instant, the running blocks' shares of one resource sum to
    // at most 1: that is what makes the area term a bound.
    std::array<double, sm_resource_count> sm_share{};

    bool memory_bound() const noexcept { return dram_bytes_per_block_ns > 0.0; }
    double dram_bytes() const noexcept { return dram_bytes_per_block_ns * block_ns * static_cast<double>(blocks); }
};

// Capacity of each SmResource on one SM, as SmState hands it out.
inline std::array<double, sm_resource_count> sm_capacity(const DeviceSpec& dev) {
    return {static_cast<double>(dev.max_warps_per_sm()),
            static_cast<double>((dev.regs_per_sm / sm_subpartitions) * sm_subpartitions),
            static_cast<double>(SmState::smem_capacity(dev)), static_cast<double>(dev.max_blocks_per_sm)};
}

// Throws ModelError (from occupancy()) when a block cannot fit on an SM; the
// caller checks duration, bytes and grid first and names the kernel.
inline KernelWork kernel_work(const DeviceSpec& dev, const KernelCost& k) {
    KernelWork w;
    w.occupancy = occupancy(dev, k.shape);
    w.demand = BlockDemand::of(w.occupancy);
    w.blocks = k.shape.blocks();
    w.waves = waves(dev, w.occupancy, w.blocks);
    if (w.waves > max_simulated_waves) {
        w.merged = (w.waves + max_simulated_waves - 1) / max_simulated_waves;
        w.blocks = (w.blocks + w.merged - 1) / w.merged;
        w.waves = waves(dev, w.occupancy, w.blocks);
    }
    w.blocks_per_wave =
        std::min<std::uint64_t>(w.blocks, static_cast<std::uint64_t>(w.occupancy.blocks_per_sm) * dev.sm_count);
    w.block_ns = k.duration_ns / static_cast<double>(w.waves);
    if (k.dram_bytes > 0.0) {
        const double wanted = k.dram_bytes / (static_cast<double>(w.blocks) * w.block_ns);
        const double most = dev.dram_bytes_per_ns() / static_cast<double>(w.blocks_per_wave);
        w.dram_bytes_per_block_ns = std::min(wanted, most);
    }
    const auto cap = sm_capacity(dev);
    const double regs = static_cast<double>(w.demand.regs_per_warp) * w.demand.warps;
    const double need[sm_resource_count] = {static_cast<double>(w.demand.warps), regs,
                                            static_cast<double>(w.demand.smem_bytes), 1.0};
    for (std::size_t r = 0; r < sm_resource_count; ++r) w.sm_share[r] = need[r] / cap[r];
    return w;
}

struct LowerBound {
    double critical_path_ns = 0.0;  // longest chain of per-op minimal times
    double area_ns = 0.0;           // max over SM resources of (resource-time of all blocks) / SMs
    double dram_ns = 0.0;           // all DRAM bytes at full bandwidth
    double bound_ns = 0.0;          // max of the terms that apply
    std::vector<OpId> critical_ops;  // the ops on the longest chain, in order
};

namespace detail {

// Per-resource SM-time of `kernels`, in units of "one whole SM for 1 ns".
inline void add_area(const DeviceSpec& dev, std::span<const KernelCost> kernels,
                     std::array<double, sm_resource_count>& area, double& dram_bytes) {
    for (const KernelCost& k : kernels) {
        const KernelWork w = kernel_work(dev, k);
        const double block_time = static_cast<double>(w.blocks) * w.block_ns;
        for (std::size_t r = 0; r < sm_resource_count; ++r) area[r] += w.sm_share[r] * block_time;
        dram_bytes += w.dram_bytes();
    }
}

inline double max_area_ns(const DeviceSpec& dev, const std::array<double, sm_resource_count>& area) {
    return *std::max_element(area.begin(), area.end()) / dev.sm_count;
}

}  // namespace detail

// The least time op `op` can take in any plan. Unsplittable: its kernels in
// sequence, each at least its isolated time. Splittable (a plan may run its
// batch parts concurrently): every part runs its kernels in sequence, and part
// 0 of a split into `batch` parts is the smallest largest part (a batched
// kernel keeps its block time, split_part), so its chain — or, Caffe-style,
// one image's chain — is a floor; so is the op's own area over all SMs.
inline double op_min_time_ns(const DeviceSpec& dev, const Op& op, const OpCost& cost) {
    if (!op.splittable()) return cost.duration_ns();
    const std::uint32_t batch = op.split_batch;
    double chain_ns = 0.0;
    if (cost.launches_per_image > 0) {
        const std::size_t per = cost.launches_per_image;
        if (cost.kernels.size() != std::size_t{batch} * per)
            throw ModelError("op '" + op.name + "': " + std::to_string(per) + " launches per image over " +
                             std::to_string(batch) + " images need " + std::to_string(std::size_t{batch} * per) +
                             " kernels, it has " + std::to_string(cost.kernels.size()));
        for (std::size_t i = 0; i < batch; ++i) {
            double image_ns = 0.0;
            for (std::size_t j = 0; j < per; ++j) image_ns += cost.kernels[i * per + j].duration_ns;
            chain_ns = std::max(chain_ns, image_ns);
        }
    } else {
        chain_ns = split_part(dev, cost, batch, batch, 0).duration_ns();
    }
    std::array<double, sm_resource_count> area{};
    double bytes = 0.0;
    detail::add_area(dev, cost.kernels, area, bytes);
    return std::max(chain_ns, detail::max_area_ns(dev, area));
}

// Why each term holds in the simulator (and on hardware):
//  - critical path: an edge's ops never overlap, and an op is never faster
//    than op_min_time_ns (a kernel never runs more blocks at once than alone,
//    and each block takes at least block_ns).
//  - area: on one SM the running blocks' demand of any one resource never
//    exceeds its capacity, so per resource, sum(share x block time) over all
//    blocks <= SMs x makespan. Each resource alone gives a bound, hence the
//    max over resources (min-per-block shares would be valid but weaker).
//  - dram: the running blocks never pull more than the device bandwidth, and
//    a block's bytes are what it pulls over block_ns at full speed. It holds
//    only where bandwidth is shared (sim::Params::share_bandwidth, hardware);
//    `bandwidth_shared = false` reports it without counting it in bound_ns.
// Throws ModelError naming the op and kernel on costs the model cannot use.
inline LowerBound lower_bound(const DeviceSpec& dev, const OpGraph& graph, std::span<const OpCost> costs,
                              bool bandwidth_shared = true) {
    require_costs_for(graph.op_count(), costs.size(), "lower bound");
    std::vector<std::string> names;
    names.reserve(graph.op_count());
    for (const Op& op : graph.ops()) names.push_back(op.name);
    validate_costs(dev, costs, names);

    std::vector<double> min_ns(graph.op_count());
    std::array<double, sm_resource_count> area{};
    double bytes = 0.0;
    for (OpId i = 0; i < graph.op_count(); ++i) {
        min_ns[i] = op_min_time_ns(dev, graph.op(i), costs[i]);
        detail::add_area(dev, costs[i].kernels, area, bytes);
    }
    LowerBound b;
    CriticalPath cp = graph.critical_path(min_ns);
    b.critical_path_ns = cp.length_ns;
    b.critical_ops = std::move(cp.ops);
    b.area_ns = detail::max_area_ns(dev, area);
    b.dram_ns = bytes / dev.dram_bytes_per_ns();
    b.bound_ns = std::max(b.critical_path_ns, b.area_ns);
    if (bandwidth_shared) b.bound_ns = std::max(b.bound_ns, b.dram_ns);
    return b;
}

}  // namespace braid
