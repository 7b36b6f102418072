// Costs without a GPU: a roofline estimate of each kernel's isolated time
// from its FLOPs, DRAM bytes and launch shape on a DeviceSpec. Networks
// describe their kernels as KernelEstimates; the planner and simulator then
// work on any device in the table. A profile from a real run replaces these.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "braid/error.hpp"
#include "braid/model/cost.hpp"
#include "braid/model/device_spec.hpp"
#include "braid/model/kernel.hpp"
#include "braid/model/kernel_class.hpp"
#include "braid/model/occupancy.hpp"

namespace braid {

// Which peak a kernel's arithmetic runs at.
enum class MathMode : std::uint8_t { fp32, tf32, fp16, bf16 };

struct KernelEstimate {
    KernelShape shape;
    double flops = 0.0;       // floating-point operations (multiply-add = 2)
    double dram_bytes = 0.0;  // bytes read plus written in DRAM
    MathMode math = MathMode::fp32;
    KernelClass kind = KernelClass::other;  // which calibrated efficiency applies
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

// Estimated kernel times fitted to a GPU's profiles, per kernel class
// (planner/calibrate.hpp fits them, calibration files carry them):
//   t = floor_ns + scale[class] x reference_ns x (roofline / reference_ns)^size_exponent
// where `roofline` is the kernel's time at the device's peak compute or DRAM
// rate, whichever binds, without efficiency or quantisation. An exponent
// below 1 says what profiles show: small kernels run further from the peak
// than large ones (latency, tails, small tiles). A class without a fit uses
// its fallback's (kernel_class.hpp); with none, the uncalibrated roofline.
//
// The share of the GPU's block slots (min(1, blocks / (blocks per SM x
// SMs))) a class's profiled kernels hold grows with the problem: libraries
// pick tiles and split-K so that even mid-sized problems spread over most
// SMs. Per class it is fitted as a logistic curve in log2 of the roofline
// time, 1 / (1 + 2^((log2 fill_mid_ns - log2 roofline) / fill_width)). An
// estimated kernel that holds less than its curve says gets its grid
// widened to that share (the time model above still sets its duration), so
// the simulator does not find room beside it that the real kernel leaves
// none of.
struct EstimateCalibration {
    double floor_ns = 0.0;
    double size_exponent = 1.0;
    double reference_ns = 10000.0;
    std::array<double, kernel_class_count> scale{};  // 0: not fitted
    std::array<double, kernel_class_count> fill_mid_ns{};  // 0: keep the estimated grid
    std::array<double, kernel_class_count> fill_width{};   // log2 units

    // The slot share a kernel of class `c` with this roofline time holds; 0: no fit.
    double fill_for(KernelClass c, double roofline) const noexcept {
        const double mid = fill_mid_ns[index_of(c)];
        if (!(mid > 0.0)) return 0.0;
        return 1.0 / (1.0 + std::exp2((std::log2(mid) - std::log2(std::max(roofline, 1e-3))) / fill_width[index_of(c)]));
    }

    // The fitted scale that applies to `c`, following fallbacks; 0 when none.
    double scale_for(KernelClass c) const noexcept {
        for (std::optional<KernelClass> k = c; k; k = fallback_of(*k))
            if (scale[index_of(*k)] > 0.0) return scale[index_of(*k)];
        return 0.0;
    }
    bool fitted() const noexcept {
        for (double s : scale)
            if (s > 0.0) return true;
        return false;
    }

    friend bool operator==(const EstimateCalibration&, const EstimateCalibration&) = default;
};

// The kernel's time at the device's peak compute or DRAM rate, whichever binds.
inline double roofline_ns(const DeviceSpec& dev, const KernelEstimate& k) {
    return std::max(k.flops / peak_flops_per_ns(dev, k.math), k.dram_bytes / dev.dram_bytes_per_ns());
}

inline double calibrated_ns(const EstimateCalibration& c, double scale, double roofline) {
    return c.floor_ns + scale * c.reference_ns * std::pow(roofline / c.reference_ns, c.size_exponent);
}

// The share of the GPU's block slots a kernel holds: min(1, blocks / slots).
inline double slot_fill(const DeviceSpec& dev, const KernelShape& shape) {
    const Occupancy o = occupancy(dev, shape);
    const double slots = static_cast<double>(o.blocks_per_sm) * dev.sm_count;
    return std::min(1.0, static_cast<double>(shape.blocks()) / slots);
}

inline KernelCost estimate_kernel(const DeviceSpec& dev, const KernelEstimate& k, const EstimateCalibration& c) {
    KernelCost cost = estimate_kernel(dev, k);  // checks the estimate; the memory-bound call
    const double scale = c.scale_for(k.kind);
    if (scale > 0.0) cost.duration_ns = std::max(1.0, calibrated_ns(c, scale, roofline_ns(dev, k)));
    const double fill = c.fill_for(k.kind, roofline_ns(dev, k));
    if (fill > 0.0) {
        const Occupancy o = occupancy(dev, k.shape);
        const double slots = static_cast<double>(o.blocks_per_sm) * dev.sm_count;
        const double want = std::ceil(fill * slots);
        const double blocks = static_cast<double>(k.shape.blocks());
        if (blocks < want) {
            const double per_x = blocks / k.shape.grid.x;  // blocks per grid column
            cost.shape.grid.x = static_cast<std::uint32_t>(std::min(2147483647.0, std::ceil(want / per_x)));
        }
    }
    return cost;
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

inline OpCosts estimate_costs(const DeviceSpec& dev, std::span<const OpEstimate> ops, const EstimateCalibration& c) {
    OpCosts out;
    out.reserve(ops.size());
    for (const OpEstimate& op : ops) {
        OpCost cost;
        cost.launches_per_image = op.launches_per_image;
        for (const KernelEstimate& k : op.kernels) cost.kernels.push_back(estimate_kernel(dev, k, c));
        out.push_back(std::move(cost));
    }
    return out;
}

}  // namespace braid
