// Elementwise sum of two tensors of one shape: the residual connection.
// Its backward is the identity for both inputs, so the training graph runs
// no op for it: each input's gradient IS the output's gradient buffer.
#pragma once

#include <vector>

#include "nn/layer.hpp"

namespace braid::samples {

struct Add {
    Shape4 in;

    Add(Shape4 a, Shape4 b);

    LayerKind kind() const noexcept { return LayerKind::add; }
    std::vector<Shape4> inputs() const { return {in, in}; }
    Shape4 output() const noexcept { return in; }
    std::vector<ParamSpec> parameters() const { return {}; }
    std::vector<AuxBufferSpec> aux_buffers() const { return {}; }
    bool has_pass(Pass p) const noexcept { return p == Pass::forward; }
    bool splittable(Pass p) const noexcept { return p == Pass::forward; }
    PassWork work(Pass p) const;
    std::vector<braid::KernelEstimate> kernels(Pass p, const EstimateOptions& options) const;
};

template <class T>
void add_forward(const Add& layer, TensorView<const T> a, TensorView<const T> b, TensorView<T> y, ImageRange images);

}  // namespace braid::samples
