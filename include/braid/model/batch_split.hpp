// Batch splits (DESIGN 4b): which images a part of a split op covers, and
// what that part's kernels cost.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "braid/error.hpp"
#include "braid/model/cost.hpp"
#include "braid/model/device_spec.hpp"
#include "braid/model/occupancy.hpp"

namespace braid {

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
