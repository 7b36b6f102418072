// How a kernel fills one SM: blocks per SM and the resource that limits
// them, computed by the CUDA toolkit's own host-only calculator
// (cuda_occupancy.h), plus waves and footprint of a whole grid.
#pragma once

#include "braid/config.hpp"

#if !BRAID_HAS_OCCUPANCY_HEADER
#error "braid/model/occupancy.hpp needs the CUDA toolkit's cuda_occupancy.h on the include path: \
add -I<cuda>/include (meson option toolkit_root) or install the CUDA toolkit"
#endif

#include <algorithm>
#include <climits>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <cuda_occupancy.h>

#include "braid/error.hpp"
#include "braid/model/device_spec.hpp"
#include "braid/model/kernel.hpp"

namespace braid {

enum class OccupancyLimiter : std::uint8_t { warps, registers, shared_memory, blocks, barriers, virtual_resources };

constexpr std::string_view to_string(OccupancyLimiter l) noexcept {
    switch (l) {
        case OccupancyLimiter::warps: return "warps";
        case OccupancyLimiter::registers: return "registers";
        case OccupancyLimiter::shared_memory: return "shared_memory";
        case OccupancyLimiter::blocks: return "blocks";
        case OccupancyLimiter::barriers: return "barriers";
        case OccupancyLimiter::virtual_resources: return "virtual_resources";
    }
    return "warps";
}

struct Occupancy {
    int blocks_per_sm = 0;
    OccupancyLimiter limiter = OccupancyLimiter::warps;  // the first of the binding limits
    int block_limit_warps = 0;
    int block_limit_registers = 0;       // INT_MAX when the kernel uses no registers
    int block_limit_shared_memory = 0;   // INT_MAX when the kernel uses no shared memory
    int block_limit_blocks = 0;
    int warps_per_block = 0;
    int warps_per_sm = 0;
    double fraction = 0.0;               // warps_per_sm / max warps per SM
    int regs_per_warp = 0;               // allocated, after granularity
    int regs_per_block = 0;              // allocated
    std::uint64_t smem_per_block_bytes = 0;  // allocated, incl. the driver's reserve
};

// The registers a launch gives each thread of a kernel compiled to use
// `compiled` (cudaFuncGetAttributes' numRegs): never fewer than 16.
// cuda_occupancy.h warns that "when the function is launched on device, the
// register count may change"; CUPTI's registersPerThread, the launch's count,
// is 16 for kernels compiled to 8 or 14 registers and the compiled count from
// 16 up (every kernel of the samples on the H200, tests/data/h200; Nsight
// Compute shows 16 for a 10-register kernel on sm_86). The occupancy model
// counts the launch's registers, so a compiled count and CUPTI's give the
// same answer. 0 stays 0: a pseudo-kernel that holds no registers.
inline constexpr std::uint32_t min_launch_registers_per_thread = 16;
constexpr std::uint32_t launch_registers_per_thread(std::uint32_t compiled) noexcept {
    return compiled == 0 ? 0 : std::max(compiled, min_launch_registers_per_thread);
}

namespace detail {

inline cudaOccDeviceProp occ_device(const DeviceSpec& d) {
    cudaOccDeviceProp p;
    p.computeMajor = d.cc_major;
    p.computeMinor = d.cc_minor;
    p.maxThreadsPerBlock = d.max_threads_per_block;
    p.maxThreadsPerMultiprocessor = d.max_threads_per_sm;
    p.regsPerBlock = d.regs_per_block;
    p.regsPerMultiprocessor = d.regs_per_sm;
    p.warpSize = d.warp_size;
    p.sharedMemPerBlock = d.shared_mem_per_block_bytes;
    p.sharedMemPerMultiprocessor = d.shared_mem_per_sm_bytes;
    p.numSms = d.sm_count;
    p.sharedMemPerBlockOptin = d.shared_mem_per_block_optin_bytes;
    p.reservedSharedMemPerBlock = d.reserved_shared_mem_per_block_bytes;
    return p;
}

// A kernel that opted in to the device's largest dynamic shared memory, as
// kernels launched with more than 48 KiB must.
inline cudaOccFuncAttributes occ_function(const DeviceSpec& d, const KernelShape& k) {
    cudaOccFuncAttributes a;
    a.maxThreadsPerBlock = INT_MAX;
    a.numRegs = static_cast<int>(launch_registers_per_thread(k.regs_per_thread));
    a.sharedSizeBytes = k.static_smem_bytes;
    a.partitionedGCConfig = PARTITIONED_GC_OFF;
    a.shmemLimitConfig = FUNC_SHMEM_LIMIT_OPTIN;
    a.maxDynamicSharedSizeBytes =
        d.shared_mem_per_block_optin_bytes > k.static_smem_bytes ? d.shared_mem_per_block_optin_bytes - k.static_smem_bytes : 0;
    a.numBlockBarriers = 1;
    return a;
}

inline std::string kernel_label(const KernelShape& k) { return k.name.empty() ? std::string("<unnamed>") : k.name; }

}  // namespace detail

// Throws ModelError when the kernel's block cannot be resident on an SM at
// all, naming the kernel and the resource it runs out of.
inline Occupancy occupancy(const DeviceSpec& dev, const KernelShape& k) {
    const std::string who = "kernel '" + detail::kernel_label(k) + "' on " + (dev.key.empty() ? dev.name : dev.key);
    const std::uint64_t threads = k.threads_per_block();
    if (threads == 0) throw ModelError(who + ": block has 0 threads");
    if (threads > static_cast<std::uint64_t>(dev.max_threads_per_block))
        throw ModelError(who + ": threads: a block of " + std::to_string(threads) + " threads exceeds the device's " +
                         std::to_string(dev.max_threads_per_block) + " threads per block");
    if (k.regs_per_thread > static_cast<std::uint32_t>(dev.max_regs_per_thread))
        throw ModelError(who + ": registers: " + std::to_string(k.regs_per_thread) +
                         " registers per thread exceed the device's " + std::to_string(dev.max_regs_per_thread));

    cudaOccDeviceProp prop = detail::occ_device(dev);
    cudaOccFuncAttributes attr = detail::occ_function(dev, k);
    cudaOccDeviceState state;
    cudaOccResult r{};
    cudaOccError status =
        cudaOccMaxActiveBlocksPerMultiprocessor(&r, &prop, &attr, &state, static_cast<int>(threads), k.dynamic_smem_bytes);
    if (status == CUDA_OCC_ERROR_UNKNOWN_DEVICE)
        throw ModelError(who + ": compute capability " + std::to_string(dev.cc_major) + "." +
                         std::to_string(dev.cc_minor) + " is unknown to cuda_occupancy.h");
    if (status != CUDA_OCC_SUCCESS) throw ModelError(who + ": cuda_occupancy.h rejected the input");

    Occupancy o;
    o.blocks_per_sm = r.activeBlocksPerMultiprocessor;
    o.block_limit_warps = r.blockLimitWarps;
    o.block_limit_registers = r.blockLimitRegs;
    o.block_limit_shared_memory = r.blockLimitSharedMem;
    o.block_limit_blocks = r.blockLimitBlocks;
    o.warps_per_block = static_cast<int>((threads + dev.warp_size - 1) / dev.warp_size);
    o.regs_per_block = r.allocatedRegistersPerBlock;
    o.regs_per_warp = o.warps_per_block ? r.allocatedRegistersPerBlock / o.warps_per_block : 0;
    o.smem_per_block_bytes = r.allocatedSharedMemPerBlock;

    if (o.blocks_per_sm <= 0) {
        if (r.blockLimitRegs == 0)
            throw ModelError(who + ": registers: " + std::to_string(k.regs_per_thread) + " registers x " +
                             std::to_string(threads) + " threads need " + std::to_string(o.regs_per_block) +
                             " registers per block; an SM offers " + std::to_string(dev.regs_per_block));
        if (r.blockLimitSharedMem == 0)
            throw ModelError(who + ": shared memory: the block needs " + std::to_string(o.smem_per_block_bytes) +
                             " bytes (static " + std::to_string(k.static_smem_bytes) + " + dynamic " +
                             std::to_string(k.dynamic_smem_bytes) + " + reserved " +
                             std::to_string(dev.reserved_shared_mem_per_block_bytes) + "); a block may use at most " +
                             std::to_string(dev.shared_mem_per_block_optin_bytes + dev.reserved_shared_mem_per_block_bytes));
        if (r.blockLimitBarriers == 0) throw ModelError(who + ": barriers: the block needs more barriers than an SM has");
        if (r.blockLimitVirtual == 0)
            throw ModelError(who + ": virtual resources: the block needs more than an SM offers");
        throw ModelError(who + ": warps: the block does not fit on an SM");
    }
    const int limits[] = {r.blockLimitWarps,  r.blockLimitRegs,     r.blockLimitSharedMem,
                          r.blockLimitBlocks, r.blockLimitBarriers, r.blockLimitVirtual};
    const OccupancyLimiter names[] = {OccupancyLimiter::warps,     OccupancyLimiter::registers,
                                      OccupancyLimiter::shared_memory, OccupancyLimiter::blocks,
                                      OccupancyLimiter::barriers,  OccupancyLimiter::virtual_resources};
    for (int i = 0; i < 6; ++i)
        if (limits[i] == o.blocks_per_sm) {
            o.limiter = names[i];
            break;
        }
    o.warps_per_sm = o.blocks_per_sm * o.warps_per_block;
    o.fraction = static_cast<double>(o.warps_per_sm) / dev.max_warps_per_sm();
    return o;
}

// Why cuda_occupancy.h cannot model `dev`'s SMs at all, as a device field
// and a message (DeviceFieldError); nothing when it can. The calculator
// knows each compute capability's shared-memory carveouts (228 KiB at most
// on 9.0), so an SM size it does not know fails every kernel; probing a
// one-warp kernel with and without the reservation, then one that uses all
// the opt-in shared memory, tells which field is at fault before any
// kernel of a network meets it.
inline std::optional<DeviceFieldError> occupancy_problem(const DeviceSpec& dev) {
    const std::string who = "device '" + (dev.key.empty() ? dev.name : dev.key) + "': ";
    // The calculator's complaint about a one-warp probe kernel, empty when it fits.
    const auto complaint = [](const DeviceSpec& d, std::uint32_t dynamic_smem) -> std::string {
        KernelShape k;
        k.name = "probe";
        k.grid = {1, 1, 1};
        k.block = {static_cast<std::uint32_t>(d.warp_size), 1, 1};
        k.regs_per_thread = 32;
        k.dynamic_smem_bytes = dynamic_smem;
        try {
            (void)occupancy(d, k);
            return {};
        } catch (const ModelError& e) {
            return e.what();
        }
    };
    const std::string cc = std::to_string(dev.cc_major) + "." + std::to_string(dev.cc_minor);
    DeviceSpec bare = dev;
    bare.reserved_shared_mem_per_block_bytes = 0;
    if (const std::string c = complaint(bare, 0); !c.empty()) {
        if (c.find("unknown to cuda_occupancy.h") != std::string::npos)
            return DeviceFieldError("compute_capability", who + "compute capability " + cc +
                                                              " is unknown to this toolkit's cuda_occupancy.h");
        return DeviceFieldError("shared_mem_per_sm_bytes",
                                who + "cuda_occupancy.h cannot model an SM of compute capability " + cc + " with " +
                                    std::to_string(dev.shared_mem_per_sm_bytes) +
                                    " bytes of shared memory: it must be a size that architecture has (233472 on "
                                    "the H100 and H200)");
    }
    if (!complaint(dev, 0).empty())
        return DeviceFieldError("reserved_shared_mem_per_block_bytes",
                                who + "reserved_shared_mem_per_block_bytes " +
                                    std::to_string(dev.reserved_shared_mem_per_block_bytes) +
                                    " leaves no room for a block on an SM (1024 on the H100 and H200)");
    const auto most = static_cast<std::uint32_t>(std::min<std::uint64_t>(dev.shared_mem_per_block_optin_bytes, UINT32_MAX));
    if (!complaint(dev, most).empty())
        return DeviceFieldError("shared_mem_per_block_optin_bytes",
                                who + "a block using all " + std::to_string(most) +
                                    " bytes of shared_mem_per_block_optin_bytes does not fit on an SM beside the "
                                    "reservation: the two together must fit shared_mem_per_sm_bytes");
    return std::nullopt;
}

// Full waves a grid of `blocks` needs: ceil(blocks / (blocks_per_sm * SMs)).
inline std::uint64_t waves(const DeviceSpec& dev, const Occupancy& o, std::uint64_t blocks) {
    const std::uint64_t per_wave = static_cast<std::uint64_t>(o.blocks_per_sm) * static_cast<std::uint64_t>(dev.sm_count);
    return (blocks + per_wave - 1) / per_wave;
}

// How much of the GPU a grid occupies while its first wave runs.
struct SmFootprint {
    int sms = 0;            // SMs holding at least one block (blocks spread breadth-first)
    double fraction = 0.0;  // of the GPU's block slots for this kernel, capped at 1
};

inline SmFootprint footprint(const DeviceSpec& dev, const Occupancy& o, std::uint64_t blocks) {
    SmFootprint f;
    f.sms = static_cast<int>(std::min<std::uint64_t>(blocks, static_cast<std::uint64_t>(dev.sm_count)));
    const double slots = static_cast<double>(o.blocks_per_sm) * dev.sm_count;
    f.fraction = std::min(1.0, static_cast<double>(blocks) / slots);
    return f;
}

}  // namespace braid
