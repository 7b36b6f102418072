// The GPU's SMs as the block scheduler sees them: free resources per SM
// (SmState, the same accounting as the occupancy model) and breadth-first
// placement of one kernel's blocks.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <span>
#include <vector>

#include "braid/model/device_spec.hpp"
#include "braid/model/sm_resources.hpp"

namespace braid::sim {

// Blocks of one kernel put on one SM at one instant: they start, run and
// finish together, so they are one unit of work for the simulator.
struct Placement {
    std::uint32_t sm = 0;
    std::uint32_t blocks = 0;
    SubpartitionWarps where{};
};

class SmArray {
public:
    explicit SmArray(const DeviceSpec& dev)
        : sms_(static_cast<std::size_t>(dev.sm_count), SmState(dev)),
          resident_blocks_(static_cast<std::size_t>(dev.sm_count), 0),
          dirty_flag_(static_cast<std::size_t>(dev.sm_count), 0),
          all_(static_cast<std::size_t>(dev.sm_count)) {
        std::iota(all_.begin(), all_.end(), 0u);
    }

    std::uint32_t sm_count() const noexcept { return static_cast<std::uint32_t>(sms_.size()); }
    std::span<const std::uint32_t> all() const noexcept { return all_; }
    // SMs that gave resources back since clear_dirty(): the only ones where a
    // kernel that filled every SM it could may now place more.
    std::span<const std::uint32_t> dirty() const noexcept { return dirty_; }
    void clear_dirty() noexcept {
        for (std::uint32_t s : dirty_) dirty_flag_[s] = 0;
        dirty_.clear();
    }
    std::uint32_t busy_sms() const noexcept { return busy_sms_; }
    std::uint64_t used_warps() const noexcept { return used_warps_; }

    // Places up to `wanted` blocks on `candidates` the way the hardware
    // spreads a grid: one block per SM per pass, SMs with the most free warps
    // first (Gilman et al. 2020: the next SM is chosen by its free resources),
    // until the grid is placed or no candidate fits another block. Appends one
    // Placement per SM used; returns the blocks placed.
    std::uint64_t place(const BlockDemand& demand, std::uint64_t wanted, std::span<const std::uint32_t> candidates,
                        std::vector<Placement>& out) {
        fits_.clear();
        std::uint64_t total = 0;
        std::uint32_t most = 0;
        for (std::uint32_t s : candidates) {
            const std::uint32_t n = sms_[s].fits(demand);
            if (n == 0) continue;
            fits_.push_back({s, n});
            total += n;
            most = std::max(most, n);
        }
        if (total == 0 || wanted == 0) return 0;
        if (total <= wanted) {
            for (const auto& [s, n] : fits_) put(demand, s, n, out);
            return total;
        }
        // Passes 1..level fill every SM up to `level` blocks (or its fit);
        // the pass after that runs out of blocks part-way along the SM order.
        level_count_.assign(most + 2, 0);  // level_count_[v]: candidates that fit >= v blocks
        for (const auto& f : fits_) ++level_count_[f.blocks];
        for (std::uint32_t v = most; v >= 1; --v) level_count_[v - 1] += level_count_[v];
        std::uint32_t level = 0;
        std::uint64_t placed = 0;
        while (level < most && placed + level_count_[level + 1] <= wanted) placed += level_count_[++level];
        std::uint64_t extra = wanted - placed;
        if (extra > 0) {
            std::sort(fits_.begin(), fits_.end(), [&](const Fit& a, const Fit& b) {
                const std::uint32_t fa = sms_[a.sm].free_warps(), fb = sms_[b.sm].free_warps();
                return fa != fb ? fa > fb : a.sm < b.sm;
            });
        }
        for (const auto& [s, n] : fits_) {
            std::uint32_t take = std::min(n, level);
            if (extra > 0 && n > level) {
                ++take;
                --extra;
            }
            if (take > 0) put(demand, s, take, out);
        }
        return wanted;
    }

    void release(const BlockDemand& demand, const Placement& p) noexcept {
        sms_[p.sm].release(demand, p.blocks, p.where);
        resident_blocks_[p.sm] -= p.blocks;
        if (resident_blocks_[p.sm] == 0) --busy_sms_;
        used_warps_ -= std::uint64_t{demand.warps} * p.blocks;
        if (!dirty_flag_[p.sm]) {
            dirty_flag_[p.sm] = 1;
            dirty_.push_back(p.sm);
        }
    }

    const SmState& sm(std::uint32_t s) const { return sms_.at(s); }

private:
    struct Fit {
        std::uint32_t sm = 0;
        std::uint32_t blocks = 0;
    };

    void put(const BlockDemand& demand, std::uint32_t s, std::uint32_t n, std::vector<Placement>& out) {
        out.push_back(Placement{s, n, sms_[s].place(demand, n)});
        if (resident_blocks_[s] == 0) ++busy_sms_;
        resident_blocks_[s] += n;
        used_warps_ += std::uint64_t{demand.warps} * n;
    }

    std::vector<SmState> sms_;
    std::vector<std::uint32_t> resident_blocks_;
    std::vector<std::uint8_t> dirty_flag_;
    std::vector<std::uint32_t> dirty_;
    std::vector<std::uint32_t> all_;
    std::vector<Fit> fits_;                    // scratch, kept to avoid reallocating
    std::vector<std::uint64_t> level_count_;   // scratch
    std::uint32_t busy_sms_ = 0;
    std::uint64_t used_warps_ = 0;
};

}  // namespace braid::sim
