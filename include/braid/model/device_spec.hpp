// DeviceSpec: what braid needs to know about one GPU model — the per-SM
// limits the occupancy calculator uses, plus SM count, clock, DRAM bandwidth,
// peak throughputs and the limit on concurrently resident kernels.
#pragma once

#include <cstdint>
#include <string>

#include "braid/error.hpp"

namespace braid {

struct DeviceSpec {
    std::string key;   // short table key: "h200"
    std::string name;  // marketing name: "NVIDIA H200 SXM 141GB"
    int cc_major = 0;  // compute capability
    int cc_minor = 0;

    int sm_count = 0;
    int warp_size = 32;
    int max_threads_per_sm = 0;
    int max_threads_per_block = 0;
    int max_blocks_per_sm = 0;
    int regs_per_sm = 0;
    int regs_per_block = 0;
    int max_regs_per_thread = 255;
    std::uint64_t shared_mem_per_sm_bytes = 0;           // largest carveout
    std::uint64_t shared_mem_per_block_bytes = 0;        // without opt-in (48 KiB)
    std::uint64_t shared_mem_per_block_optin_bytes = 0;  // with cudaFuncSetAttribute
    std::uint64_t reserved_shared_mem_per_block_bytes = 0;
    int max_resident_grids = 0;  // concurrent kernels the device keeps resident

    double boost_clock_mhz = 0.0;
    double dram_bandwidth_gbps = 0.0;  // GB/s, 1e9 bytes per second
    std::uint64_t dram_bytes = 0;
    std::uint64_t l2_bytes = 0;
    // Dense peak throughput in TFLOP/s (tensor cores with FP32 accumulate for
    // TF32/FP16/BF16).
    double peak_fp32_tflops = 0.0;
    double peak_tf32_tflops = 0.0;
    double peak_fp16_tflops = 0.0;
    double peak_bf16_tflops = 0.0;

    int max_warps_per_sm() const noexcept { return max_threads_per_sm / warp_size; }
    // Bytes per nanosecond, the unit the simulator works in.
    double dram_bytes_per_ns() const noexcept { return dram_bandwidth_gbps; }

    friend bool operator==(const DeviceSpec&, const DeviceSpec&) = default;
};

// Throws ModelError naming the first field that is missing or impossible.
inline void validate(const DeviceSpec& d) {
    auto need = [&](bool ok, const char* field, const std::string& why) {
        if (!ok) throw ModelError("device '" + (d.key.empty() ? d.name : d.key) + "': " + field + " " + why);
    };
    need(!d.key.empty() || !d.name.empty(), "key", "or name must be set");
    need(d.cc_major >= 7, "cc_major", "must be 7 or newer (Volta+), got " + std::to_string(d.cc_major));
    need(d.cc_minor >= 0, "cc_minor", "must be >= 0");
    need(d.sm_count > 0, "sm_count", "must be > 0");
    need(d.warp_size == 32, "warp_size", "must be 32");
    need(d.max_threads_per_sm >= d.warp_size, "max_threads_per_sm", "must hold at least one warp");
    need(d.max_threads_per_block >= d.warp_size && d.max_threads_per_block <= d.max_threads_per_sm,
         "max_threads_per_block", "must be between a warp and max_threads_per_sm");
    need(d.max_blocks_per_sm > 0, "max_blocks_per_sm", "must be > 0");
    need(d.regs_per_sm > 0, "regs_per_sm", "must be > 0");
    need(d.regs_per_block > 0 && d.regs_per_block <= d.regs_per_sm, "regs_per_block",
         "must be > 0 and <= regs_per_sm");
    need(d.max_regs_per_thread > 0, "max_regs_per_thread", "must be > 0");
    need(d.shared_mem_per_sm_bytes > 0, "shared_mem_per_sm_bytes", "must be > 0");
    need(d.shared_mem_per_block_bytes > 0 && d.shared_mem_per_block_bytes <= d.shared_mem_per_block_optin_bytes,
         "shared_mem_per_block_bytes", "must be > 0 and <= shared_mem_per_block_optin_bytes");
    need(d.shared_mem_per_block_optin_bytes <= d.shared_mem_per_sm_bytes, "shared_mem_per_block_optin_bytes",
         "must be <= shared_mem_per_sm_bytes");
    need(d.max_resident_grids > 0, "max_resident_grids", "must be > 0");
    need(d.boost_clock_mhz > 0, "boost_clock_mhz", "must be > 0");
    need(d.dram_bandwidth_gbps > 0, "dram_bandwidth_gbps", "must be > 0");
    need(d.peak_fp32_tflops > 0, "peak_fp32_tflops", "must be > 0");
    need(d.peak_tf32_tflops >= 0 && d.peak_fp16_tflops >= 0 && d.peak_bf16_tflops >= 0, "peak_*_tflops",
         "must be >= 0");
}

}  // namespace braid
