#include "nn/softmax_loss.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "nn/launch.hpp"

namespace braid::samples {

SoftmaxCrossEntropy::SoftmaxCrossEntropy(Shape4 logits, SoftmaxLossConfig cfg) : config(cfg), in(logits), out(logits) {
    if (in.elements() == 0) throw ShapeError("softmax loss: empty input " + to_string(in));
    if (in.image_elements() < 2) throw ShapeError("softmax loss: needs at least 2 classes");
    if (!(cfg.weight > 0.0f) || !std::isfinite(cfg.weight))
        throw ShapeError("softmax loss: the weight must be a finite number > 0, got " + fmt::format("{}", cfg.weight));
}

std::vector<AuxBufferSpec> SoftmaxCrossEntropy::aux_buffers() const {
    return {{"per_image_loss", vector_shape(in.n), BufferRole::activation, InitRule::zeros},
            {"loss", vector_shape(1), BufferRole::activation, InitRule::zeros}};
}

PassWork SoftmaxCrossEntropy::work(Pass p) const {
    const double e = static_cast<double>(in.elements()), t = float_bytes(in.elements());
    if (p == Pass::forward) return {4.0 * e, 2 * t + float_bytes(in.n) * 2};
    if (p == Pass::backward_data) return {2.0 * e, 2 * t + float_bytes(in.n)};
    return {};
}

std::vector<braid::KernelEstimate> SoftmaxCrossEntropy::kernels(Pass p, const EstimateOptions&) const {
    if (!has_pass(p)) return {};
    const PassWork w = work(p);
    // One block per image reduces over the classes (max, then sum of exps).
    if (p == Pass::forward) return {row_reduction_kernel("softmax_cross_entropy_forward", in.n, w.flops, w.dram_bytes)};
    return {elementwise_kernel("softmax_cross_entropy_backward", in.elements(), w.flops, w.dram_bytes)};
}

PassWork SoftmaxCrossEntropy::loss_sum_work() const {
    return {static_cast<double>(in.n), float_bytes(in.n) + 4.0};
}

std::vector<braid::KernelEstimate> SoftmaxCrossEntropy::loss_sum_kernels() const {
    const PassWork w = loss_sum_work();
    return {row_reduction_kernel("loss_sum", 1, w.flops, w.dram_bytes, braid::KernelClass::reduction, 1)};
}

template <class T>
void softmax_loss_forward(const SoftmaxCrossEntropy& layer, TensorView<const T> logits, const std::int32_t* labels,
                          TensorView<T> probabilities, T* per_image_loss, ImageRange images) {
    check_range(images, layer.in, "softmax_loss_forward");
    const std::uint32_t classes = layer.classes();
    for (std::uint32_t n = images.begin; n < images.end; ++n) {
        const std::int32_t label = labels[n];
        if (label < 0 || static_cast<std::uint32_t>(label) >= classes)
            throw ShapeError("softmax loss: image " + std::to_string(n) + " has label " + std::to_string(label) +
                             " outside [0, " + std::to_string(classes) + ")");
        const T* z = logits.image(n);
        T* p = probabilities.image(n);
        const double zmax = static_cast<double>(*std::max_element(z, z + classes));
        double sum = 0.0;
        for (std::uint32_t c = 0; c < classes; ++c) sum += std::exp(static_cast<double>(z[c]) - zmax);
        for (std::uint32_t c = 0; c < classes; ++c)
            p[c] = static_cast<T>(std::exp(static_cast<double>(z[c]) - zmax) / sum);
        per_image_loss[n] = static_cast<T>(std::log(sum) + zmax - static_cast<double>(z[label]));
    }
}

template <class T>
void softmax_loss_sum(const SoftmaxCrossEntropy& layer, const T* per_image_loss, T* loss) {
    double sum = 0.0;
    for (std::uint32_t n = 0; n < layer.in.n; ++n) sum += static_cast<double>(per_image_loss[n]);
    *loss = static_cast<T>(static_cast<double>(layer.config.weight) * sum / layer.in.n);
}

template <class T>
void softmax_loss_backward_data(const SoftmaxCrossEntropy& layer, TensorView<const T> probabilities,
                                const std::int32_t* labels, TensorView<T> dlogits, ImageRange images) {
    check_range(images, layer.in, "softmax_loss_backward_data");
    const std::uint32_t classes = layer.classes();
    const T scale = static_cast<T>(static_cast<double>(layer.config.weight) / layer.in.n);
    for (std::uint32_t n = images.begin; n < images.end; ++n) {
        const T* p = probabilities.image(n);
        T* g = dlogits.image(n);
        for (std::uint32_t c = 0; c < classes; ++c)
            g[c] = scale * (p[c] - (static_cast<std::int32_t>(c) == labels[n] ? T(1) : T(0)));
    }
}

#define BRAID_SAMPLES_LOSS(T)                                                                                    \
    template void softmax_loss_forward<T>(const SoftmaxCrossEntropy&, TensorView<const T>, const std::int32_t*,   \
                                          TensorView<T>, T*, ImageRange);                                         \
    template void softmax_loss_sum<T>(const SoftmaxCrossEntropy&, const T*, T*);                                  \
    template void softmax_loss_backward_data<T>(const SoftmaxCrossEntropy&, TensorView<const T>,                  \
                                                const std::int32_t*, TensorView<T>, ImageRange);
BRAID_SAMPLES_LOSS(float)
BRAID_SAMPLES_LOSS(double)
#undef BRAID_SAMPLES_LOSS

}  // namespace braid::samples
