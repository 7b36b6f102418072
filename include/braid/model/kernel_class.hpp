// What kind of work a kernel does, coarse enough to fit one efficiency per
// class from profiles and specific enough that the classes behave alike
// across networks. Estimates carry it (KernelEstimate::kind); calibration
// files store a fit per class (planner/calibration.hpp).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace braid {

enum class KernelClass : std::uint8_t {
    other,
    conv_forward,          // implicit-GEMM (or Winograd, FFT) convolution, forward
    conv_backward_data,    // its input gradient
    conv_backward_weight,  // its weight gradient (split-k reductions included)
    gemm,                  // dense matrix products (fully connected layers)
    elementwise,           // one pass over a tensor: activations, adds, bias, copies
    normalization,         // batch norm and LRN, statistics and normalisation
    pooling_forward,
    pooling_backward,
    reduction,             // softmax, losses, bias gradients, sums over the batch
    optimizer,             // parameter updates
    data,                  // producing the iteration's inputs
};

inline constexpr std::size_t kernel_class_count = 12;

inline constexpr std::array<KernelClass, kernel_class_count> all_kernel_classes{
    KernelClass::other,         KernelClass::conv_forward,    KernelClass::conv_backward_data,
    KernelClass::conv_backward_weight, KernelClass::gemm,     KernelClass::elementwise,
    KernelClass::normalization, KernelClass::pooling_forward, KernelClass::pooling_backward,
    KernelClass::reduction,     KernelClass::optimizer,       KernelClass::data};

constexpr std::string_view to_string(KernelClass c) noexcept {
    switch (c) {
        case KernelClass::other: return "other";
        case KernelClass::conv_forward: return "conv_forward";
        case KernelClass::conv_backward_data: return "conv_backward_data";
        case KernelClass::conv_backward_weight: return "conv_backward_weight";
        case KernelClass::gemm: return "gemm";
        case KernelClass::elementwise: return "elementwise";
        case KernelClass::normalization: return "normalization";
        case KernelClass::pooling_forward: return "pooling_forward";
        case KernelClass::pooling_backward: return "pooling_backward";
        case KernelClass::reduction: return "reduction";
        case KernelClass::optimizer: return "optimizer";
        case KernelClass::data: return "data";
    }
    return "other";
}

inline std::optional<KernelClass> kernel_class_from_string(std::string_view text) noexcept {
    for (KernelClass c : all_kernel_classes)
        if (to_string(c) == text) return c;
    return std::nullopt;
}

constexpr std::size_t index_of(KernelClass c) noexcept { return static_cast<std::size_t>(c); }

// Whether kernels of `c` come from a library call (cuDNN's convolutions,
// cuBLAS's GEMMs), which may launch helpers of its own beside them (layout
// transforms, split-K reductions) that no estimate lists; the other classes
// are kernels a trainer launches itself, one launch each.
constexpr bool library_launched(KernelClass c) noexcept {
    return c == KernelClass::conv_forward || c == KernelClass::conv_backward_data ||
           c == KernelClass::conv_backward_weight || c == KernelClass::gemm;
}

// The class whose fit stands in when a calibration saw no kernel of `c`
// (a net without batch norm fitted, say): GEMM-like work falls back on
// GEMM-like work, memory-bound work on elementwise; nullopt at the root.
constexpr std::optional<KernelClass> fallback_of(KernelClass c) noexcept {
    switch (c) {
        case KernelClass::conv_backward_data:
        case KernelClass::conv_backward_weight:
        case KernelClass::gemm: return KernelClass::conv_forward;
        case KernelClass::normalization:
        case KernelClass::pooling_forward:
        case KernelClass::reduction:
        case KernelClass::optimizer:
        case KernelClass::data: return KernelClass::elementwise;
        case KernelClass::pooling_backward: return KernelClass::pooling_forward;
        case KernelClass::conv_forward:
        case KernelClass::elementwise:
        case KernelClass::other: return std::nullopt;
    }
    return std::nullopt;
}

}  // namespace braid
