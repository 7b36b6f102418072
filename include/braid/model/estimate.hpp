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
#include "braid/model/conv_engine.hpp"
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
    // The arithmetic the kernel's tiles do, padding included (a 16-channel
    // output in 64-wide tiles does four times its useful work); 0: `flops`.
    double tile_flops = 0.0;
    // Launched by the library call beside its main kernels (a split-K
    // reduction), not by the trainer: part of that call's run, whatever its
    // class (calibrate.hpp, detail::attribute_kernels), and timed by the
    // roofline alone, since calibrations fit the run's time to its main
    // kernels.
    bool library_helper = false;
    // The family of engine the library runs this kernel on, where it is
    // known: the algorithm a backend chose, or the kernels a profile of it
    // named (engine_families_from_profile). `other`: unknown; the class's
    // fit applies, whatever engine runs it.
    ConvEngineFamily engine = ConvEngineFamily::other;
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
//   t = floor_ns + scale x reference_ns x (roofline / reference_ns)^size_exponent
// where `roofline` is the kernel's time at the device's peak compute (on its
// tiles, padding included) or DRAM rate, whichever binds, without
// efficiency or wave quantisation. An exponent
// below 1 says what profiles show: small kernels run further from the peak
// than large ones (latency, tails, small tiles); the floor is what a nearly
// empty kernel of the class still takes.
//
// The share of the GPU's block slots (min(1, blocks / (blocks per SM x
// SMs))) a class's profiled kernels hold grows with the problem: libraries
// pick tiles and split-K so that even mid-sized problems spread over most
// SMs. It is fitted as a logistic curve in log2 of the roofline time,
// 1 / (1 + 2^((log2 fill_mid_ns - log2 roofline) / fill_width)). An
// estimated kernel that holds less than its curve says gets its grid
// widened to that share (the time model still sets its duration), so the
// simulator does not find room beside it that the real kernel leaves none of.
struct KernelClassFit {
    double scale = 0.0;  // 0: not fitted
    double floor_ns = 0.0;
    double size_exponent = 1.0;
    double fill_mid_ns = 0.0;  // 0: keep the estimated grid
    double fill_width = 1.0;   // log2 units
    // Eager: how long the body of an op filed under this class (by its first
    // kernel) keeps the host in a plain run, the mean of the profiles that
    // timed bodies; < 0: not fitted, the simulator's per-launch costs apply.
    double host_ns = -1.0;

    bool fitted() const noexcept { return scale > 0.0; }
    double time_ns(double roofline, double reference_ns) const {
        return floor_ns + scale * reference_ns * std::pow(std::max(roofline, 0.0) / reference_ns, size_exponent);
    }
    // The slot share a kernel with this roofline time holds; 0: no fit.
    double fill(double roofline) const noexcept {
        if (!(fill_mid_ns > 0.0)) return 0.0;
        return 1.0 / (1.0 + std::exp2((std::log2(fill_mid_ns) - std::log2(std::max(roofline, 1e-3))) / fill_width));
    }

    friend bool operator==(const KernelClassFit&, const KernelClassFit&) = default;
};

// A class's fit covers every kernel filed under it; where the calibration
// also has a fit for the class's kernels on one engine family (a
// convolution's legacy FP32 engines take five times the time per roofline
// nanosecond its tensor-core engines take), kernels whose estimate names
// that family take that fit's time instead, and an op body whose first
// kernel names it costs the host that fit's host time where it has one
// (engines differ in the host work of a call: layout transforms, plans).
// An engine fit's slot share is not used: that stays the class's.
struct EstimateCalibration {
    double reference_ns = 10000.0;
    std::array<KernelClassFit, kernel_class_count> classes{};
    std::array<std::array<KernelClassFit, engine_family_count>, kernel_class_count> engines{};

    KernelClassFit& operator[](KernelClass c) noexcept { return classes[index_of(c)]; }
    const KernelClassFit& operator[](KernelClass c) const noexcept { return classes[index_of(c)]; }
    KernelClassFit& engine_fit(KernelClass c, ConvEngineFamily e) noexcept { return engines[index_of(c)][index_of(e)]; }
    const KernelClassFit& engine_fit(KernelClass c, ConvEngineFamily e) const noexcept {
        return engines[index_of(c)][index_of(e)];
    }

    // The time fit that applies to a kernel of class `c` on engine family
    // `e`: the class's fit for that family where there is one, else the
    // class's, following fallbacks (kernel_class.hpp); nullptr when none of
    // them was fitted.
    const KernelClassFit* time_fit(KernelClass c, ConvEngineFamily e = ConvEngineFamily::other) const noexcept {
        if (e != ConvEngineFamily::other && engine_fit(c, e).fitted()) return &engine_fit(c, e);
        for (std::optional<KernelClass> k = c; k; k = fallback_of(*k))
            if ((*this)[*k].fitted()) return &(*this)[*k];
        return nullptr;
    }
    bool fitted() const noexcept {
        for (const KernelClassFit& f : classes)
            if (f.fitted()) return true;
        return false;
    }
    // The host time of an op body filed under `c` on engine family `e`: the
    // engine fit's where it has one, else the class's, following fallbacks;
    // < 0 when none of them has one.
    double host_ns(KernelClass c, ConvEngineFamily e = ConvEngineFamily::other) const noexcept {
        if (e != ConvEngineFamily::other && engine_fit(c, e).host_ns >= 0.0) return engine_fit(c, e).host_ns;
        for (std::optional<KernelClass> k = c; k; k = fallback_of(*k))
            if ((*this)[*k].host_ns >= 0.0) return (*this)[*k].host_ns;
        return -1.0;
    }

    friend bool operator==(const EstimateCalibration&, const EstimateCalibration&) = default;
};

// The kernel's time at the device's peak compute or DRAM rate, whichever binds.
inline double roofline_ns(const DeviceSpec& dev, const KernelEstimate& k) {
    const double flops = std::max(k.flops, k.tile_flops);
    return std::max(flops / peak_flops_per_ns(dev, k.math), k.dram_bytes / dev.dram_bytes_per_ns());
}

// The share of the GPU's block slots a kernel holds: min(1, blocks / slots).
inline double slot_fill(const DeviceSpec& dev, const KernelShape& shape) {
    const Occupancy o = occupancy(dev, shape);
    const double slots = static_cast<double>(o.blocks_per_sm) * dev.sm_count;
    return std::min(1.0, static_cast<double>(shape.blocks()) / slots);
}

inline KernelCost estimate_kernel(const DeviceSpec& dev, const KernelEstimate& k, const EstimateCalibration& c) {
    KernelCost cost = estimate_kernel(dev, k);  // checks the estimate; the memory-bound call
    if (k.library_helper) return cost;         // no class's fit speaks for a library's helper
    const double roofline = roofline_ns(dev, k);
    if (const KernelClassFit* fit = c.time_fit(k.kind, k.engine)) cost.duration_ns = std::max(1.0, fit->time_ns(roofline, c.reference_ns));
    const double fill = c[k.kind].fill(roofline);
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
        if (!op.kernels.empty()) cost.host_ns = c.host_ns(op.kernels.front().kind, op.kernels.front().engine);
        out.push_back(std::move(cost));
    }
    return out;
}

}  // namespace braid
