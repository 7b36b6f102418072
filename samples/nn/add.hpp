// Elementwise sum of two tensors of one shape: the residual connection.
// Its backward is the identity for both inputs, so the training graph runs
// no op for it: each input's gradient IS the output's gradient buffer.
// With `relu` the layer also applies the ReLU that follows it (y = max(a +
// b, 0), NetworkBuilder::fuse_relu folds it): its backward is then ReLU's,
// dy where y > 0, into one buffer that both inputs' gradients are.
#pragma once

#include <vector>

#include "nn/layer.hpp"

namespace braid::samples {

struct Add {
    Shape4 in;
    bool relu = false;  // a fused ReLU on the sum

    Add(Shape4 a, Shape4 b, bool fused_relu = false);

    LayerKind kind() const noexcept { return LayerKind::add; }
    std::vector<Shape4> inputs() const { return {in, in}; }
    Shape4 output() const noexcept { return in; }
    std::vector<ParamSpec> parameters() const { return {}; }
    std::vector<AuxBufferSpec> aux_buffers() const { return {}; }
    bool has_pass(Pass p) const noexcept { return p == Pass::forward || (relu && p == Pass::backward_data); }
    bool splittable(Pass p) const noexcept { return has_pass(p); }
    PassWork work(Pass p) const;
    std::vector<braid::KernelEstimate> kernels(Pass p, const EstimateOptions& options) const;
};

// y = a + b (then max(y, 0) with layer.relu). The fused ReLU's backward is
// relu_backward_data over the layer's shape (the binder gives it Relu(in)).
template <class T>
void add_forward(const Add& layer, TensorView<const T> a, TensorView<const T> b, TensorView<T> y, ImageRange images);

}  // namespace braid::samples
