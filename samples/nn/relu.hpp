// Rectified linear unit, out of place: y = max(x, 0). Backward reads y
// (dx = dy where y > 0), so x may be freed or overwritten after forward.
#pragma once

#include <vector>

#include "nn/layer.hpp"

namespace braid::samples {

struct Relu : PerImageUnaryLayer {
    explicit Relu(Shape4 input);

    LayerKind kind() const noexcept { return LayerKind::relu; }
    PassWork work(Pass p) const;
    std::vector<braid::KernelEstimate> kernels(Pass p, const EstimateOptions& options) const;
};

// One element of ReLU's forward and backward (batch norm's fused ReLU uses them too).
template <class T>
constexpr T relu_of(T x) noexcept {
    return x > T(0) ? x : T(0);
}
template <class T>
constexpr T relu_gradient(T y, T dy) noexcept {
    return y > T(0) ? dy : T(0);
}

template <class T>
void relu_forward(const Relu& layer, TensorView<const T> x, TensorView<T> y, ImageRange images);
template <class T>
void relu_backward_data(const Relu& layer, TensorView<const T> y, TensorView<const T> dy, TensorView<T> dx,
                        ImageRange images);

}  // namespace braid::samples
