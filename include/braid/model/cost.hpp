// What an op costs on a device: the kernels it launches, each with its launch
// shape, its time when it runs alone on the GPU, and the DRAM bytes it moves.
// Profiles (measured) and estimates (roofline) both produce OpCosts; the
// simulator, the planner and the lower bound consume them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "braid/error.hpp"
#include "braid/model/device_spec.hpp"
#include "braid/model/kernel.hpp"
#include "braid/model/occupancy.hpp"

namespace braid {

struct KernelCost {
    KernelShape shape;
    double duration_ns = 0.0;  // alone on the GPU
    double dram_bytes = 0.0;   // 0: not memory-bound, never slowed by bandwidth sharing
};

struct OpCost {
    std::vector<KernelCost> kernels;  // in launch order, all on the op's stream
    // 0: batched kernels (each covers the whole batch). n > 0: the op loops
    // over images Caffe-style, launching n kernels per image, image by image,
    // so kernels.size() == batch * n.
    std::uint32_t launches_per_image = 0;

    double duration_ns() const noexcept {
        double t = 0.0;
        for (const KernelCost& k : kernels) t += k.duration_ns;
        return t;
    }
};

// Per op, indexed by OpId.
using OpCosts = std::vector<OpCost>;

inline std::vector<double> op_durations_ns(std::span<const OpCost> costs) {
    std::vector<double> out;
    out.reserve(costs.size());
    for (const OpCost& c : costs) out.push_back(c.duration_ns());
    return out;
}

// Checks what the simulator and planner rely on; the error names the op and
// kernel: positive durations, non-empty grids and blocks, blocks that fit.
inline void validate_costs(const DeviceSpec& dev, std::span<const OpCost> costs, std::span<const std::string> op_names) {
    for (std::size_t i = 0; i < costs.size(); ++i) {
        const std::string op = i < op_names.size() ? op_names[i] : "#" + std::to_string(i);
        for (std::size_t j = 0; j < costs[i].kernels.size(); ++j) {
            const KernelCost& k = costs[i].kernels[j];
            const std::string who = "op '" + op + "' kernel " + std::to_string(j) + " ('" + k.shape.name + "')";
            if (!(k.duration_ns > 0.0) || !std::isfinite(k.duration_ns))
                throw ModelError(who + ": duration must be > 0 ns, got " + std::to_string(k.duration_ns));
            if (k.dram_bytes < 0.0 || !std::isfinite(k.dram_bytes))
                throw ModelError(who + ": dram_bytes must be >= 0");
            if (k.shape.blocks() == 0) throw ModelError(who + ": empty grid");
            (void)occupancy(dev, k.shape);  // throws naming the resource when a block cannot fit
        }
    }
}

// Images [begin, end) of part `part` when `batch` images are split `parts`
// ways: the first batch % parts parts get one image more.
struct BatchRange {
    std::uint32_t begin = 0;
    std::uint32_t end = 0;
};
inline BatchRange split_range(std::uint32_t batch, std::uint32_t parts, std::uint32_t part) {
    const std::uint32_t base = batch / parts, extra = batch % parts;
    const std::uint32_t begin = part * base + std::min(part, extra);
    return {begin, begin + base + (part < extra ? 1u : 0u)};
}

// Part `part` of `parts` of an op split over a batch of `batch` images.
// Per-image launches are dealt out by image. A batched kernel keeps its
// per-block time while its grid shrinks along the largest grid dimension (the
// one that scales with the batch in cuDNN/cuBLAS tilings), so its waves and
// time are recomputed.
inline OpCost split_part(const DeviceSpec& dev, const OpCost& whole, std::uint32_t batch, std::uint32_t parts,
                         std::uint32_t part) {
    if (parts == 0 || part >= parts || parts > batch)
        throw ModelError("cannot take part " + std::to_string(part) + " of " + std::to_string(parts) +
                         " of a batch of " + std::to_string(batch));
    if (parts == 1) return whole;
    OpCost out;
    if (whole.launches_per_image > 0) {
        const std::size_t per = whole.launches_per_image;
        if (whole.kernels.size() != std::size_t{batch} * per)
            throw ModelError("an op with " + std::to_string(per) + " launches per image over " + std::to_string(batch) +
                             " images needs " + std::to_string(std::size_t{batch} * per) + " kernels, has " +
                             std::to_string(whole.kernels.size()));
        const BatchRange r = split_range(batch, parts, part);
        out.launches_per_image = whole.launches_per_image;
        out.kernels.assign(whole.kernels.begin() + static_cast<std::ptrdiff_t>(r.begin * per),
                           whole.kernels.begin() + static_cast<std::ptrdiff_t>(r.end * per));
        return out;
    }
    for (const KernelCost& k : whole.kernels) {
        KernelCost p = k;
        std::uint32_t* dim = &p.shape.grid.x;
        if (p.shape.grid.y > *dim) dim = &p.shape.grid.y;
        if (p.shape.grid.z > *dim) dim = &p.shape.grid.z;
        const std::uint32_t total = *dim;
        // Spread the remainder over the first parts, as a batch split would.
        const std::uint32_t share = total / parts + (part < total % parts ? 1u : 0u);
        if (share == 0) continue;  // fewer grid rows than parts: this part launches nothing of it
        *dim = share;
        const Occupancy o = occupancy(dev, k.shape);
        const double whole_waves = static_cast<double>(waves(dev, o, k.shape.blocks()));
        const double part_waves = static_cast<double>(waves(dev, o, p.shape.blocks()));
        p.duration_ns = k.duration_ns * part_waves / whole_waves;
        p.dram_bytes = k.dram_bytes * static_cast<double>(share) / total;
        out.kernels.push_back(std::move(p));
    }
    return out;
}

}  // namespace braid
