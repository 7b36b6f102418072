// 2-D convolution (cross-correlation, as cuDNN's CUDNN_CROSS_CORRELATION):
// square kernels, stride, zero padding, groups, optional bias. Weights are
// [K][C/groups][R][R], PyTorch's and cuDNN's NCHW filter layout.
#pragma once

#include <cstdint>
#include <vector>

#include "nn/layer.hpp"

namespace braid::samples {

struct ConvConfig {
    std::uint32_t out_channels = 0;
    std::uint32_t kernel = 1;
    std::uint32_t stride = 1;
    std::uint32_t pad = 0;
    std::uint32_t groups = 1;
    bool bias = true;
    float bias_init = 0.0f;  // BVLC GoogLeNet starts its biases at 0.2 to keep ReLUs alive
    InitRule weight_init = InitRule::he_uniform;
};

struct Conv2d {
    ConvConfig config;
    Shape4 in;
    Shape4 out;

    // Throws ShapeError when the kernel does not fit the padded input or the
    // channels do not divide into the groups.
    Conv2d(Shape4 input, ConvConfig cfg);

    LayerKind kind() const noexcept { return LayerKind::conv; }
    std::vector<Shape4> inputs() const { return {in}; }
    Shape4 output() const noexcept { return out; }
    std::uint64_t weight_elements() const noexcept;
    std::uint64_t macs() const noexcept;  // multiply-adds of one forward pass over the batch
    std::vector<ParamSpec> parameters() const;
    std::vector<AuxBufferSpec> aux_buffers() const { return {}; }
    bool has_pass(Pass) const noexcept { return true; }
    bool splittable(Pass p) const noexcept { return p == Pass::forward || p == Pass::backward_data; }
    PassWork work(Pass p) const;
    std::vector<braid::KernelEstimate> kernels(Pass p, const EstimateOptions& options) const;
};

// y[images] = conv(x[images], weight) + bias (bias may be null when the layer has none).
template <class T>
void conv_forward(const Conv2d& layer, TensorView<const T> x, const T* weight, const T* bias, TensorView<T> y,
                  ImageRange images);
// dx[images] = the gradient of the loss with respect to x, from dy.
template <class T>
void conv_backward_data(const Conv2d& layer, TensorView<const T> dy, const T* weight, TensorView<T> dx,
                        ImageRange images);
// dweight and dbias over the whole batch, overwritten (not accumulated).
template <class T>
void conv_backward_weight(const Conv2d& layer, TensorView<const T> x, TensorView<const T> dy, T* dweight, T* dbias);

}  // namespace braid::samples
