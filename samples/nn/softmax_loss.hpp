// Softmax cross-entropy against integer labels, mean over the batch, times
// a weight (GoogLeNet's auxiliary heads use 0.3). Three ops in a training
// step: forward (per image: probabilities and the image's loss; splittable),
// loss_sum (the weighted mean, summed over images in order; whole batch) and
// backward_data (dlogits = weight / N * (p - onehot); splittable, needs no
// loss value, so it does not wait for loss_sum).
#pragma once

#include <cstdint>
#include <vector>

#include "nn/layer.hpp"

namespace braid::samples {

struct SoftmaxLossConfig {
    float weight = 1.0f;
};

struct SoftmaxCrossEntropy {
    SoftmaxLossConfig config;
    Shape4 in;   // logits: N x classes (x 1 x 1, or any C x H x W flattened)
    Shape4 out;  // probabilities, same shape

    SoftmaxCrossEntropy(Shape4 logits, SoftmaxLossConfig cfg);

    std::uint32_t classes() const noexcept { return static_cast<std::uint32_t>(in.image_elements()); }

    // Order of aux_buffers().
    enum AuxSlot : std::uint32_t { per_image_loss = 0, loss = 1 };

    LayerKind kind() const noexcept { return LayerKind::softmax_loss; }
    std::vector<Shape4> inputs() const { return {in}; }
    Shape4 output() const noexcept { return out; }
    std::vector<ParamSpec> parameters() const { return {}; }
    std::vector<AuxBufferSpec> aux_buffers() const;
    bool has_pass(Pass p) const noexcept { return p == Pass::forward || p == Pass::backward_data; }
    bool splittable(Pass p) const noexcept { return has_pass(p); }
    PassWork work(Pass p) const;
    std::vector<braid::KernelEstimate> kernels(Pass p, const EstimateOptions& options) const;
    PassWork loss_sum_work() const;
    std::vector<braid::KernelEstimate> loss_sum_kernels() const;
};

// Labels outside [0, classes) throw ShapeError naming the image.
template <class T>
void softmax_loss_forward(const SoftmaxCrossEntropy& layer, TensorView<const T> logits, const std::int32_t* labels,
                          TensorView<T> probabilities, T* per_image_loss, ImageRange images);
// loss = weight * mean(per_image_loss), summed in image order.
template <class T>
void softmax_loss_sum(const SoftmaxCrossEntropy& layer, const T* per_image_loss, T* loss);
template <class T>
void softmax_loss_backward_data(const SoftmaxCrossEntropy& layer, TensorView<const T> probabilities,
                                const std::int32_t* labels, TensorView<T> dlogits, ImageRange images);

}  // namespace braid::samples
