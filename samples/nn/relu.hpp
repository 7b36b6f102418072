// Rectified linear unit, out of place: y = max(x, 0). Backward reads y
// (dx = dy where y > 0), so x may be freed or overwritten after forward.
#pragma once

#include <vector>

#include "nn/layer.hpp"

namespace braid::samples {

struct Relu {
    Shape4 in;

    explicit Relu(Shape4 input);

    LayerKind kind() const noexcept { return LayerKind::relu; }
    std::vector<Shape4> inputs() const { return {in}; }
    Shape4 output() const noexcept { return in; }
    std::vector<ParamSpec> parameters() const { return {}; }
    std::vector<AuxBufferSpec> aux_buffers() const { return {}; }
    bool has_pass(Pass p) const noexcept { return p == Pass::forward || p == Pass::backward_data; }
    bool splittable(Pass p) const noexcept { return has_pass(p); }
    PassWork work(Pass p) const;
    std::vector<braid::KernelEstimate> kernels(Pass p, const EstimateOptions& options) const;
};

template <class T>
void relu_forward(const Relu& layer, TensorView<const T> x, TensorView<T> y, ImageRange images);
template <class T>
void relu_backward_data(const Relu& layer, TensorView<const T> y, TensorView<const T> dy, TensorView<T> dx,
                        ImageRange images);

}  // namespace braid::samples
