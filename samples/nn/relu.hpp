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

template <class T>
void relu_forward(const Relu& layer, TensorView<const T> x, TensorView<T> y, ImageRange images);
template <class T>
void relu_backward_data(const Relu& layer, TensorView<const T> y, TensorView<const T> dy, TensorView<T> dx,
                        ImageRange images);

}  // namespace braid::samples
