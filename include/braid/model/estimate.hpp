// Costs without a GPU: a roofline estimate of each kernel's isolated time
// from its FLOPs, DRAM bytes and launch shape on a DeviceSpec. Networks
// describe their kernels as KernelEstimates; the planner and simulator then
// work on any device in the table. A profile from a real run replaces these.
#pragma once

#include <algorithm>
#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "braid/error.hpp"
#include "braid/model/cost.hpp"
#include "braid/model/device_spec.hpp"
#include "braid/model/kernel.hpp"
#include "braid/model/occupancy.hpp"

namespace braid {

// Which peak a kernel's arithmetic runs at.
enum class MathMode : std::uint8_t { fp32, tf32, fp16, bf16 };

struct KernelEstimate {
    KernelShape shape;
    double flops = 0.0;       // floating-point operations (multiply-add = 2)
    double dram_bytes = 0.0;  // bytes read plus written in DRAM
    MathMode math = MathMode::fp32;
};

struct OpEstimate {
    std::vector<KernelEstimate> kernels;
    std::uint32_t launches_per_image = 0;  // as OpCost::launches_per_image
};

// Calibration constants; docs/devices.md gives their sources.
struct RooflineParams {
    double tensor_efficiency = 0.80;   // achieved / peak for tensor-core GEMM-like work
    double fp32_efficiency = 0.70;     // achieved / peak on CUDA cores
    double memory_efficiency = 0.90;   // achieved / peak DRAM bandwidth for streaming kernels
    double min_kernel_ns = 2000.0;     // device time of a near-empty kernel
};

inline double peak_flops_per_ns(const DeviceSpec& dev, MathMode math) {
    double tflops = dev.peak_fp32_tflops;
    switch (math) {
        case MathMode::fp32: tflops = dev.peak_fp32_tflops; break;
        case MathMode::tf32: tflops = dev.peak_tf32_tflops; break;
        case MathMode::fp16: tflops = dev.peak_fp16_tflops; break;
        case MathMode::bf16: tflops = dev.peak_bf16_tflops; break;
    }
    if (tflops <= 0.0) tflops = dev.peak_fp32_tflops;  // no tensor cores for this type: CUDA cores
    return tflops * 1e3;                               // TFLOP/s -> FLOP/ns
}

// Isolated time: the slower of compute and memory at the achievable rate,
// stretched by wave quantisation (a grid that fills 1.2 waves takes two), and
// never below a near-empty kernel's time.
inline KernelCost estimate_kernel(const DeviceSpec& dev, const KernelEstimate& k, const RooflineParams& p = {}) {
    if (k.flops < 0.0 || k.dram_bytes < 0.0 || !std::isfinite(k.flops) || !std::isfinite(k.dram_bytes))
        throw ModelError("kernel '" + k.shape.name + "': FLOPs and bytes must be finite and >= 0");
    if (std::string problem = launch_problem(k.shape); !problem.empty())
        throw ModelError("kernel '" + k.shape.name + "': " + problem);
    const Occupancy o = occupancy(dev, k.shape);
    const double slots = static_cast<double>(o.blocks_per_sm) * dev.sm_count;
    const double blocks = static_cast<double>(k.shape.blocks());
    const double quantisation = static_cast<double>(waves(dev, o, k.shape.blocks())) * slots / blocks;  // >= 1
    const double eff = k.math == MathMode::fp32 ? p.fp32_efficiency : p.tensor_efficiency;
    const double compute_ns = k.flops / (peak_flops_per_ns(dev, k.math) * eff);
    const double memory_ns = k.dram_bytes / (dev.dram_bytes_per_ns() * p.memory_efficiency);
    KernelCost c;
    c.shape = k.shape;
    c.duration_ns = std::max(p.min_kernel_ns, std::max(compute_ns, memory_ns) * quantisation);
    // Only kernels whose time is set by DRAM compete for bandwidth.
    c.dram_bytes = memory_ns >= compute_ns ? k.dram_bytes : 0.0;
    return c;
}

inline OpCost estimate_op(const DeviceSpec& dev, const OpEstimate& op, const RooflineParams& p = {}) {
    OpCost c;
    c.launches_per_image = op.launches_per_image;
    for (const KernelEstimate& k : op.kernels) c.kernels.push_back(estimate_kernel(dev, k, p));
    return c;
}

inline OpCosts estimate_costs(const DeviceSpec& dev, std::span<const OpEstimate> ops, const RooflineParams& p = {}) {
    OpCosts out;
    out.reserve(ops.size());
    for (const OpEstimate& op : ops) out.push_back(estimate_op(dev, op, p));
    return out;
}

}  // namespace braid
