// Max and average pooling over square windows. ceil_mode rounds the output
// size up, as Caffe always does (GoogLeNet's pools); the last window must
// still start inside the image or its left padding (PyTorch's rule), and
// windows are clipped to the image. Average pooling divides by the window
// clipped to the padded image (Caffe's and PyTorch's count_include_pad).
// `global` pools each whole feature map to 1x1, whatever its size.
#pragma once

#include <cstdint>
#include <vector>

#include "nn/layer.hpp"

namespace braid::samples {

enum class PoolMode : std::uint8_t { max, average };

struct PoolConfig {
    PoolMode mode = PoolMode::max;
    std::uint32_t kernel = 2;
    std::uint32_t stride = 2;
    std::uint32_t pad = 0;
    bool ceil_mode = false;
    bool global = false;  // kernel = the input's H x W, stride 1, no padding
};

struct Pool2d {
    PoolConfig config;
    Shape4 in;
    Shape4 out;
    std::uint32_t kernel_h = 0, kernel_w = 0, stride = 1, pad = 0;  // resolved (global pools)

    Pool2d(Shape4 input, PoolConfig cfg);

    LayerKind kind() const noexcept {
        return config.mode == PoolMode::max ? LayerKind::max_pool : LayerKind::avg_pool;
    }
    std::vector<Shape4> inputs() const { return {in}; }
    Shape4 output() const noexcept { return out; }
    std::vector<ParamSpec> parameters() const { return {}; }
    std::vector<AuxBufferSpec> aux_buffers() const { return {}; }
    bool has_pass(Pass p) const noexcept { return p == Pass::forward || p == Pass::backward_data; }
    bool splittable(Pass p) const noexcept { return has_pass(p); }
    PassWork work(Pass p) const;
    std::vector<braid::KernelEstimate> kernels(Pass p, const EstimateOptions& options) const;
};

// Output size along one dimension; 0 when no window fits.
std::uint32_t pooled_size(std::uint32_t in, std::uint32_t kernel, std::uint32_t stride, std::uint32_t pad,
                          bool ceil_mode);

template <class T>
void pool_forward(const Pool2d& layer, TensorView<const T> x, TensorView<T> y, ImageRange images);
// Max pooling routes dy to the first position in each window whose x equals
// the window's y (so it reads x, y and dy); average pooling reads dy only
// (x and y may be empty views).
template <class T>
void pool_backward_data(const Pool2d& layer, TensorView<const T> x, TensorView<const T> y, TensorView<const T> dy,
                        TensorView<T> dx, ImageRange images);

}  // namespace braid::samples
