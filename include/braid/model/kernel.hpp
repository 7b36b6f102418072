// A kernel launch as the resource model sees it: launch shape and the
// per-thread and per-block resources the compiled kernel uses.
#pragma once

#include <cstdint>
#include <limits>
#include <string>

namespace braid {

struct Dim3 {
    std::uint32_t x = 1;
    std::uint32_t y = 1;
    std::uint32_t z = 1;

    // Saturates at the largest uint64 instead of wrapping; a shape within
    // LaunchLimits has at most (2^31 - 1) x 65535 x 65535 < 2^63 blocks.
    std::uint64_t count() const noexcept {
        std::uint64_t out = 0;
        if (__builtin_mul_overflow(std::uint64_t{x} * y, std::uint64_t{z}, &out))
            return std::numeric_limits<std::uint64_t>::max();
        return out;
    }
    friend bool operator==(const Dim3&, const Dim3&) = default;
};

struct KernelShape {
    std::string name;
    Dim3 grid;
    Dim3 block;
    std::uint32_t regs_per_thread = 0;
    std::uint32_t static_smem_bytes = 0;
    std::uint32_t dynamic_smem_bytes = 0;

    std::uint64_t blocks() const noexcept { return grid.count(); }
    std::uint64_t threads_per_block() const noexcept { return block.count(); }
    friend bool operator==(const KernelShape&, const KernelShape&) = default;
};

// CUDA's launch limits, the same for every compute capability from 3.0 to
// 12.x (CUDA C++ Programming Guide, "Technical Specifications per Compute
// Capability"; docs/devices.md). A device may allow fewer threads per block
// (DeviceSpec::max_threads_per_block, checked by the occupancy model).
struct LaunchLimits {
    static constexpr std::uint32_t max_grid_x = 2147483647;  // 2^31 - 1
    static constexpr std::uint32_t max_grid_yz = 65535;
    static constexpr std::uint32_t max_block_xy = 1024;
    static constexpr std::uint32_t max_block_z = 64;
    static constexpr std::uint32_t max_threads_per_block = 1024;
};

// Why no GPU launches `grid` (empty string: it is fine). Each dimension >= 1.
inline std::string grid_problem(const Dim3& grid) {
    const std::uint32_t dims[] = {grid.x, grid.y, grid.z};
    for (int i = 0; i < 3; ++i) {
        const std::uint32_t most = i == 0 ? LaunchLimits::max_grid_x : LaunchLimits::max_grid_yz;
        if (dims[i] == 0) return "grid dimension " + std::to_string(i) + " is 0 (an empty grid)";
        if (dims[i] > most)
            return "grid dimension " + std::to_string(i) + " is " + std::to_string(dims[i]) + ", CUDA allows at most " +
                   std::to_string(most);
    }
    return {};
}

inline std::string block_problem(const Dim3& block) {
    const std::uint32_t dims[] = {block.x, block.y, block.z};
    for (int i = 0; i < 3; ++i) {
        const std::uint32_t most = i == 2 ? LaunchLimits::max_block_z : LaunchLimits::max_block_xy;
        if (dims[i] == 0) return "block dimension " + std::to_string(i) + " is 0 (an empty block)";
        if (dims[i] > most)
            return "block dimension " + std::to_string(i) + " has " + std::to_string(dims[i]) +
                   " threads, CUDA allows at most " + std::to_string(most);
    }
    if (block.count() > LaunchLimits::max_threads_per_block)
        return "a block of " + std::to_string(block.x) + "x" + std::to_string(block.y) + "x" + std::to_string(block.z) +
               " = " + std::to_string(block.count()) + " threads, CUDA allows at most " +
               std::to_string(LaunchLimits::max_threads_per_block);
    return {};
}

// Why `k` cannot be launched on any GPU, or "" when its shape is launchable.
inline std::string launch_problem(const KernelShape& k) {
    if (std::string g = grid_problem(k.grid); !g.empty()) return g;
    return block_problem(k.block);
}

}  // namespace braid
