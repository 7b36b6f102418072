// A DeviceSpec read off a live GPU. Per-SM limits, SM count, clocks and
// memory come from the runtime; peak throughputs come from the built-in table
// when the GPU is in it and are otherwise estimated from SM count and clock.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "braid/cuda/error.hpp"
#include "braid/model/device_spec.hpp"
#include "braid/model/device_table.hpp"

namespace braid::cuda {

inline DeviceSpec device_spec_from_cuda(int device = 0) {
    cudaDeviceProp p{};
    check(cudaGetDeviceProperties(&p, device), "cudaGetDeviceProperties");
    auto attr = [&](cudaDeviceAttr a, const char* name) {
        int v = 0;
        check(cudaDeviceGetAttribute(&v, a, device), name);
        return v;
    };
    DeviceSpec d;
    d.name = p.name;
    d.cc_major = p.major;
    d.cc_minor = p.minor;
    d.sm_count = p.multiProcessorCount;
    d.warp_size = p.warpSize;
    d.max_threads_per_sm = p.maxThreadsPerMultiProcessor;
    d.max_threads_per_block = p.maxThreadsPerBlock;
    d.max_blocks_per_sm = p.maxBlocksPerMultiProcessor;
    d.regs_per_sm = p.regsPerMultiprocessor;
    d.regs_per_block = p.regsPerBlock;
    d.max_regs_per_thread = 255;
    d.shared_mem_per_sm_bytes = p.sharedMemPerMultiprocessor;
    d.shared_mem_per_block_bytes = p.sharedMemPerBlock;
    d.shared_mem_per_block_optin_bytes = p.sharedMemPerBlockOptin;
    d.reserved_shared_mem_per_block_bytes = p.reservedSharedMemPerBlock;
    d.max_resident_grids = 128;  // compute capability 7.0 to 12.x (CUDA C++ Programming Guide)
    d.boost_clock_mhz = attr(cudaDevAttrClockRate, "cudaDeviceGetAttribute(ClockRate)") / 1000.0;
    const double mem_khz = attr(cudaDevAttrMemoryClockRate, "cudaDeviceGetAttribute(MemoryClockRate)");
    const double bus_bits = attr(cudaDevAttrGlobalMemoryBusWidth, "cudaDeviceGetAttribute(GlobalMemoryBusWidth)");
    d.dram_bandwidth_gbps = 2.0 * mem_khz * 1e3 * (bus_bits / 8.0) / 1e9;  // double data rate
    d.dram_bytes = p.totalGlobalMem;
    d.l2_bytes = static_cast<std::uint64_t>(p.l2CacheSize);

    d.key = braid::detail::lowercase_alnum(d.name);
    bool known = false;
    for (const DeviceSpec& t : builtin_devices()) {
        const std::string tn = braid::detail::lowercase_alnum(t.name);
        if (t.cc_major == d.cc_major && t.cc_minor == d.cc_minor && t.sm_count == d.sm_count &&
            (d.key.find(t.key) != std::string::npos || tn == d.key)) {
            d.key = t.key;
            d.peak_fp32_tflops = t.peak_fp32_tflops;
            d.peak_tf32_tflops = t.peak_tf32_tflops;
            d.peak_fp16_tflops = t.peak_fp16_tflops;
            d.peak_bf16_tflops = t.peak_bf16_tflops;
            known = true;
            break;
        }
    }
    if (!known) {
        // FP32 lanes per SM: 64 on sm_80, 128 on sm_86+ and sm_90.
        const int lanes = (d.cc_major == 8 && d.cc_minor == 0) ? 64 : 128;
        d.peak_fp32_tflops = 2.0 * lanes * d.sm_count * d.boost_clock_mhz * 1e6 / 1e12;
    }
    validate(d);
    return d;
}

}  // namespace braid::cuda
