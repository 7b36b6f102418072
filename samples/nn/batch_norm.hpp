// Batch normalization in training mode (Ioffe & Szegedy 2015): normalizes
// each channel with the batch's mean and biased variance, keeps them for
// backward, and updates running statistics with the unbiased variance (as
// PyTorch and cuDNN do). Needs the whole batch: no pass is splittable.
// With `relu` the layer also applies the ReLU that follows it (y = max(bn(x),
// 0)) and its backward counts dy only where y > 0: a separate ReLU layer's
// pass over the activations and two of its buffers go, with the bits of the
// two layers (NetworkBuilder::fuse_relu folds them).
// With `share_sums` one backward pass computes the two per-channel sums
// once for both gradients: backward_data also writes dgamma = sum dy * xhat
// and dbeta = sum dy, and the layer has no backward_weight op. One pass
// over x and dy fewer per layer, with the bits of the two passes.
#pragma once

#include <cstdint>
#include <vector>

#include "nn/layer.hpp"

namespace braid::samples {

struct BatchNormConfig {
    float epsilon = 1e-5f;
    float momentum = 0.1f;  // running = (1 - momentum) * running + momentum * batch
    bool relu = false;      // a fused ReLU on the output
    bool share_sums = false;  // backward_data writes dgamma, dbeta too (one backward op)
};

struct BatchNorm2d {
    BatchNormConfig config;
    Shape4 in;

    BatchNorm2d(Shape4 input, BatchNormConfig cfg);

    // Order of aux_buffers().
    enum AuxSlot : std::uint32_t { running_mean = 0, running_var = 1, saved_mean = 2, saved_inv_std = 3 };

    LayerKind kind() const noexcept { return LayerKind::batch_norm; }
    std::vector<Shape4> inputs() const { return {in}; }
    Shape4 output() const noexcept { return in; }
    std::vector<ParamSpec> parameters() const;  // gamma (ones), beta (zeros); neither is decayed
    std::vector<AuxBufferSpec> aux_buffers() const;
    bool has_pass(Pass) const noexcept { return true; }
    bool splittable(Pass) const noexcept { return false; }
    PassWork work(Pass p) const;
    std::vector<braid::KernelEstimate> kernels(Pass p, const EstimateOptions& options) const;
};

// y = gamma * (x - mean) / sqrt(var + eps) + beta with batch statistics
// (then max(y, 0) with config.relu); writes saved_mean, saved_inv_std and
// updates running_mean, running_var.
template <class T>
void batch_norm_forward_training(const BatchNorm2d& layer, TensorView<const T> x, const T* gamma, const T* beta,
                                 TensorView<T> y, T* saved_mean, T* saved_inv_std, T* running_mean, T* running_var);
// dx from dy. It computes the two per-channel sums the weight gradient also
// needs: without config.share_sums only for dx (so that dx does not wait
// for backward_weight, which computes them again); with it, it also writes
// them as `dgamma` and `dbeta` (required then, untouched otherwise), the
// bits batch_norm_backward_weight writes. With config.relu, `y` is the
// layer's output and dy counts where y > 0 (as ReLU's backward has it);
// without, y is not read.
template <class T>
void batch_norm_backward_data(const BatchNorm2d& layer, TensorView<const T> x, TensorView<const T> dy, const T* gamma,
                              const T* saved_mean, const T* saved_inv_std, TensorView<T> dx,
                              TensorView<const T> y = {}, T* dgamma = nullptr, T* dbeta = nullptr);
// Refuses backward_data of a layer with shared sums without dgamma and
// dbeta (both backends call it, so both say the same).
void check_shared_sums(const BatchNorm2d& layer, const void* dgamma, const void* dbeta);
// dgamma = sum(dy * xhat), dbeta = sum(dy) per channel (dy masked as above).
template <class T>
void batch_norm_backward_weight(const BatchNorm2d& layer, TensorView<const T> x, TensorView<const T> dy,
                                const T* saved_mean, const T* saved_inv_std, T* dgamma, T* dbeta,
                                TensorView<const T> y = {});

}  // namespace braid::samples
