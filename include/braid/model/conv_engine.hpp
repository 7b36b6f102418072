// Which family of library engine ran a convolution, read from the profiled
// kernels' names. On the H200 data set a convolution's time per roofline
// nanosecond depends on the engine cuDNN chose far more than on its shape
// (docs/calibration.md): its legacy FP32 engines took a median 19-23x their
// roofline time in either network, its tensor-core ones 3.6-4.1x. The
// family is what a calibration fits per convolution class
// (EstimateCalibration::engine_fit); profiles name it, and a backend that
// chose the algorithms can tell estimates (KernelEstimate::engine).
#pragma once

#include <algorithm>
#include <array>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "braid/model/cost.hpp"

namespace braid {

enum class ConvEngineFamily : std::uint8_t {
    other,        // no library convolution kernel (braid's own kernels, pools, ...)
    legacy,       // cuDNN's pre-Volta FP32 engines: implicit_convolve_sgemm, dgrad_engine, wgrad_alg0/1
    tensor_core,  // TF32 tensor-core GEMMs and implicit GEMMs (xmma, cutlass tensorop)
    simt,         // FP32 GEMMs on the CUDA cores (cutlass simt, xmma ffma)
    fft,          // FFT convolutions (their complex GEMMs included)
    winograd,     // Winograd transforms and products
    helper,       // what a library launches around its engine: layout transforms, split-K reductions
};

inline constexpr std::size_t engine_family_count = 7;

inline constexpr std::array<ConvEngineFamily, engine_family_count> all_engine_families{
    ConvEngineFamily::other,    ConvEngineFamily::legacy,   ConvEngineFamily::tensor_core, ConvEngineFamily::simt,
    ConvEngineFamily::fft,      ConvEngineFamily::winograd, ConvEngineFamily::helper};

constexpr std::size_t index_of(ConvEngineFamily f) noexcept { return static_cast<std::size_t>(f); }

constexpr std::string_view to_string(ConvEngineFamily f) noexcept {
    switch (f) {
        case ConvEngineFamily::other: return "other";
        case ConvEngineFamily::legacy: return "legacy";
        case ConvEngineFamily::tensor_core: return "tensor_core";
        case ConvEngineFamily::simt: return "simt";
        case ConvEngineFamily::fft: return "fft";
        case ConvEngineFamily::winograd: return "winograd";
        case ConvEngineFamily::helper: return "helper";
    }
    return "other";
}

inline std::optional<ConvEngineFamily> engine_family_from_string(std::string_view text) noexcept {
    for (ConvEngineFamily f : all_engine_families)
        if (to_string(f) == text) return f;
    return std::nullopt;
}

// The family of one kernel, from its (demangled or mangled) name; the
// patterns are those of cuDNN 9 and cuBLAS 13 kernels on Hopper.
inline ConvEngineFamily kernel_engine_family(std::string_view name) {
    std::string lower(name);
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    auto has = [&](std::initializer_list<std::string_view> any) {
        return std::any_of(any.begin(), any.end(), [&](std::string_view p) { return lower.find(p) != std::string::npos; });
    };
    if (has({"braid::"})) return ConvEngineFamily::other;
    if (has({"nchwtonhwc", "nhwctonchw", "scalepackedtensor", "reduce_wgrad", "flip_filter", "init_device_workspace",
             "reducesplitk", "splitkreduce"}))
        return ConvEngineFamily::helper;
    if (has({"fft"})) return ConvEngineFamily::fft;
    if (has({"winograd"})) return ConvEngineFamily::winograd;
    if (has({"implicit_convolve_sgemm", "dgrad_engine", "dgrad2d", "wgrad_alg0_engine", "wgrad_alg1_engine",
             "explicit_convolve"}))
        return ConvEngineFamily::legacy;
    if (has({"tensorop", "tf32", "tfloat32", "hmma", "wgmma"})) return ConvEngineFamily::tensor_core;
    if (has({"simt", "ffma", "sgemm"})) return ConvEngineFamily::simt;
    return ConvEngineFamily::other;
}

// One profiled kernel of an op: its name and time.
struct NamedKernelTime {
    std::string_view name;
    double duration_ns = 0.0;
};

// The family of the engine that ran an op: FFT or Winograd when any of its
// kernels is (their GEMMs look like plain ones), else the family of its
// longest kernel among the engines proper (legacy, tensor-core, SIMT);
// `other` when none ran.
inline ConvEngineFamily op_engine_family(std::span<const NamedKernelTime> kernels) {
    ConvEngineFamily longest = ConvEngineFamily::other;
    double longest_ns = -1.0;
    for (const NamedKernelTime& k : kernels) {
        const ConvEngineFamily f = kernel_engine_family(k.name);
        if (f == ConvEngineFamily::fft || f == ConvEngineFamily::winograd) return f;
        if ((f == ConvEngineFamily::legacy || f == ConvEngineFamily::tensor_core || f == ConvEngineFamily::simt) &&
            k.duration_ns > longest_ns) {
            longest = f;
            longest_ns = k.duration_ns;
        }
    }
    return longest;
}

// The same for a profiled op.
inline ConvEngineFamily op_engine_family(const OpCost& op) {
    std::vector<NamedKernelTime> named;
    for (const KernelCost& k : op.kernels) named.push_back({k.shape.name, k.duration_ns});
    return op_engine_family(named);
}

}  // namespace braid
