// What one thread block takes from an SM, and the SM's free resources as
// blocks of different kernels come and go. For a single kernel it agrees
// with cuda_occupancy.h exactly (tests check this); for a mix of kernels it
// applies the same per-resource rules to the sum.
#pragma once

#include <algorithm>
#include <array>
#include <cassert>
#include <cstdint>
#include <numeric>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "braid/error.hpp"
#include "braid/model/device_spec.hpp"
#include "braid/model/kernel.hpp"
#include "braid/model/occupancy.hpp"

namespace braid {

inline constexpr int sm_subpartitions = 4;  // warp schedulers per SM since Maxwell (cuda_occupancy.h)

// Per-block demand on an SM.
struct BlockDemand {
    std::uint32_t warps = 0;
    std::uint32_t regs_per_warp = 0;  // allocated, 0 for a kernel without registers
    std::uint64_t smem_bytes = 0;     // allocated incl. the driver's reserve

    static BlockDemand of(const Occupancy& o) {
        return BlockDemand{static_cast<std::uint32_t>(o.warps_per_block), static_cast<std::uint32_t>(o.regs_per_warp),
                           o.smem_per_block_bytes};
    }
};

// Where the warps of a group of blocks were put, so they can be given back.
using SubpartitionWarps = std::array<std::uint16_t, sm_subpartitions>;

// Free resources of one SM. Registers live in four sub-partitions and are
// allocated per warp, as cuda_occupancy.h counts them.
class SmState {
public:
    SmState() = default;
    explicit SmState(const DeviceSpec& dev)
        : free_warps_(static_cast<std::uint32_t>(dev.max_warps_per_sm())),
          free_blocks_(static_cast<std::uint32_t>(dev.max_blocks_per_sm)),
          free_smem_(smem_capacity(dev)) {
        free_regs_.fill(static_cast<std::uint32_t>(dev.regs_per_sm / sm_subpartitions));
    }

    // Shared memory an SM can hand out: the largest carveout, as the
    // calculator rounds it.
    static std::uint64_t smem_capacity(const DeviceSpec& dev) { return dev.shared_mem_per_sm_bytes; }

    // How many more blocks of this demand fit right now.
    std::uint32_t fits(const BlockDemand& b) const noexcept {
        // A full SM answers without a division: the simulator asks every SM
        // each time a kernel waits for room.
        if (free_blocks_ == 0 || free_warps_ < b.warps || free_smem_ < b.smem_bytes) return 0;
        std::uint32_t n = free_blocks_;
        if (b.warps) n = std::min(n, free_warps_ / b.warps);
        if (b.smem_bytes) n = static_cast<std::uint32_t>(std::min<std::uint64_t>(n, free_smem_ / b.smem_bytes));
        if (b.regs_per_warp && b.warps) {
            std::uint32_t slots = 0;
            for (std::uint32_t r : free_regs_) slots += r / b.regs_per_warp;
            n = std::min(n, slots / b.warps);
        }
        return n;
    }

    // Takes `count` blocks (which must fit); returns where their warps went.
    SubpartitionWarps place(const BlockDemand& b, std::uint32_t count) noexcept {
        assert(count <= fits(b) && "SmState::place: more blocks than fit");
        SubpartitionWarps where{};
        free_blocks_ -= count;
        free_warps_ -= b.warps * count;
        free_smem_ -= b.smem_bytes * count;
        if (!b.regs_per_warp) return where;
        // Each warp goes to the sub-partition with the most free registers.
        // Done in bulk: a leader far ahead takes warps until it is level with
        // the next; sub-partitions that are level take whole rounds at once.
        const std::uint32_t r = b.regs_per_warp;
        std::uint32_t warps = b.warps * count;
        while (warps > 0) {
            // Richest first, ties by index: an insertion sort of four, since
            // std::stable_sort allocates a buffer on every call of this hot loop.
            std::array<int, sm_subpartitions> order{0, 1, 2, 3};
            for (int i = 1; i < sm_subpartitions; ++i)
                for (int j = i; j > 0 && free_regs_[order[j - 1]] < free_regs_[order[j]]; --j)
                    std::swap(order[j - 1], order[j]);
            const std::uint32_t top = free_regs_[order[0]];
            if (top - free_regs_[order[1]] >= r) {
                const std::uint32_t take = std::min({(top - free_regs_[order[1]]) / r, warps, top / r});
                free_regs_[order[0]] -= take * r;
                where[order[0]] = static_cast<std::uint16_t>(where[order[0]] + take);
                warps -= take;
                continue;
            }
            // The level group: within one warp's registers of the richest and able to take a warp.
            int level = 0;
            while (level < sm_subpartitions && free_regs_[order[level]] + r > top && free_regs_[order[level]] >= r) ++level;
            // Whole rounds: each member takes one warp per round; stop before
            // anyone falls below the next sub-partition or runs out of room.
            std::uint32_t rounds = warps / static_cast<std::uint32_t>(level);
            for (int i = 0; i < level; ++i) {
                rounds = std::min(rounds, free_regs_[order[i]] / r);
                if (level < sm_subpartitions && free_regs_[order[i]] >= free_regs_[order[level]] + r)
                    rounds = std::min(rounds, (free_regs_[order[i]] - free_regs_[order[level]]) / r);
            }
            if (rounds == 0) rounds = 1;  // a partial round, richest first
            for (int i = 0; i < level && warps > 0; ++i) {
                const std::uint32_t take = std::min(rounds, warps);
                free_regs_[order[i]] -= take * r;
                where[order[i]] = static_cast<std::uint16_t>(where[order[i]] + take);
                warps -= take;
            }
        }
        return where;
    }

    void release(const BlockDemand& b, std::uint32_t count, const SubpartitionWarps& where) noexcept {
        free_blocks_ += count;
        free_warps_ += b.warps * count;
        free_smem_ += b.smem_bytes * count;
        for (int j = 0; j < sm_subpartitions; ++j) free_regs_[j] += where[j] * b.regs_per_warp;
    }

    std::uint32_t free_warps() const noexcept { return free_warps_; }
    std::uint32_t free_blocks() const noexcept { return free_blocks_; }
    std::uint64_t free_smem_bytes() const noexcept { return free_smem_; }
    std::uint32_t free_registers() const noexcept {
        return std::accumulate(free_regs_.begin(), free_regs_.end(), std::uint32_t{0});
    }

private:
    std::uint32_t free_warps_ = 0;
    std::uint32_t free_blocks_ = 0;
    std::uint64_t free_smem_ = 0;
    std::array<std::uint32_t, sm_subpartitions> free_regs_{};
};

// A kernel and how many of its blocks should sit on one SM.
struct Residency {
    KernelShape kernel;
    std::uint32_t blocks = 0;
};

// Can these blocks share one SM? Kernels whose block cannot fit on an SM at
// all are an error (ModelError names the kernel and resource). Register-hungry
// warps are placed first, the order that packs sub-partitions best.
inline bool co_resident(const DeviceSpec& dev, std::span<const Residency> set) {
    std::vector<std::pair<BlockDemand, std::uint32_t>> demands;
    for (const Residency& r : set) demands.emplace_back(BlockDemand::of(occupancy(dev, r.kernel)), r.blocks);
    std::stable_sort(demands.begin(), demands.end(),
                     [](const auto& a, const auto& b) { return a.first.regs_per_warp > b.first.regs_per_warp; });
    SmState sm(dev);
    for (const auto& [demand, count] : demands) {
        if (count == 0) continue;
        if (sm.fits(demand) < count) return false;
        sm.place(demand, count);
    }
    return true;
}

}  // namespace braid
