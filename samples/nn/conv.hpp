// 2-D convolution (cross-correlation, as cuDNN's CUDNN_CROSS_CORRELATION):
// R x S kernels (square or not: Inception-v3's 1x7 and 7x1), stride, zero
// padding per dimension, groups, optional bias. Weights are [K][C/groups][R][S],
// PyTorch's and cuDNN's NCHW filter layout.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nn/layer.hpp"

namespace braid::samples {

// A kernel or padding size, height by width. One number is a square, so
// ConvConfig{64, 3, 1, 1} is a 3x3 kernel with padding 1 and
// ConvConfig{192, {1, 7}, 1, {0, 3}} torchvision's kernel_size=(1, 7), padding=(0, 3).
struct Size2 {
    std::uint32_t h = 0;
    std::uint32_t w = 0;

    constexpr Size2() noexcept = default;
    constexpr Size2(std::uint32_t square) noexcept : h(square), w(square) {}  // NOLINT: implicit on purpose
    constexpr Size2(std::uint32_t height, std::uint32_t width) noexcept : h(height), w(width) {}
    constexpr bool square() const noexcept { return h == w; }
    friend constexpr bool operator==(Size2, Size2) noexcept = default;
};

// "3x3", "1x7"
inline std::string to_string(Size2 s) { return std::to_string(s.h) + "x" + std::to_string(s.w); }

struct ConvConfig {
    std::uint32_t out_channels = 0;
    Size2 kernel = 1;  // R x S
    std::uint32_t stride = 1;
    Size2 pad = 0;     // zero rows above and below, zero columns left and right
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
    std::uint64_t taps() const noexcept;  // R * S kernel positions
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
