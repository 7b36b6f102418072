#include "nn/dropout.hpp"

#include <cmath>

#include "nn/counter_hash.hpp"
#include "nn/launch.hpp"

namespace braid::samples {

Dropout::Dropout(Shape4 input, DropoutConfig cfg) : PerImageUnaryLayer{input}, config(cfg) {
    if (!(cfg.ratio >= 0.0f && cfg.ratio < 1.0f))
        throw ShapeError("dropout: ratio must be in [0, 1), got " + std::to_string(cfg.ratio));
    if (in.elements() == 0) throw ShapeError("dropout: empty input " + to_string(in));
}

std::uint32_t Dropout::threshold() const noexcept {
    return static_cast<std::uint32_t>(std::floor(static_cast<double>(config.ratio) * 16777216.0));
}

float Dropout::scale() const noexcept { return 1.0f / (1.0f - config.ratio); }

PassWork Dropout::work(Pass p) const {
    const double e = static_cast<double>(in.elements()), t = float_bytes(in.elements());
    // The hash is ~20 integer operations per element; counted as FLOPs.
    if (p == Pass::forward || p == Pass::backward_data) return {21.0 * e, 2 * t};
    return {};
}

std::vector<braid::KernelEstimate> Dropout::kernels(Pass p, const EstimateOptions&) const {
    if (!has_pass(p)) return {};
    const PassWork w = work(p);
    return {elementwise_kernel(p == Pass::forward ? "dropout_forward" : "dropout_backward", in.elements(), w.flops,
                               w.dram_bytes)};
}

bool dropout_keeps(const Dropout& layer, const DropoutKey& key, std::uint64_t element) {
    return bits24(counter_hash(key.seed, stream_tag(RandomStream::dropout, key.layer), key.iteration, element)) >=
           layer.threshold();
}

namespace {

template <class T>
void apply_mask(const Dropout& layer, const DropoutKey& key, TensorView<const T> in, TensorView<T> out,
                ImageRange images, const char* who) {
    check_range(images, layer.in, who);
    const std::uint64_t e = layer.in.image_elements();
    const T scale = static_cast<T>(layer.scale());
    for (std::uint32_t n = images.begin; n < images.end; ++n) {
        const T* src = in.image(n);
        T* dst = out.image(n);
        for (std::uint64_t i = 0; i < e; ++i) dst[i] = dropout_keeps(layer, key, n * e + i) ? src[i] * scale : T(0);
    }
}

}  // namespace

template <class T>
void dropout_forward(const Dropout& layer, const DropoutKey& key, TensorView<const T> x, TensorView<T> y,
                     ImageRange images) {
    apply_mask(layer, key, x, y, images, "dropout_forward");
}

template <class T>
void dropout_backward_data(const Dropout& layer, const DropoutKey& key, TensorView<const T> dy, TensorView<T> dx,
                           ImageRange images) {
    apply_mask(layer, key, dy, dx, images, "dropout_backward_data");
}

template void dropout_forward<float>(const Dropout&, const DropoutKey&, TensorView<const float>, TensorView<float>,
                                     ImageRange);
template void dropout_forward<double>(const Dropout&, const DropoutKey&, TensorView<const double>, TensorView<double>,
                                      ImageRange);
template void dropout_backward_data<float>(const Dropout&, const DropoutKey&, TensorView<const float>,
                                           TensorView<float>, ImageRange);
template void dropout_backward_data<double>(const Dropout&, const DropoutKey&, TensorView<const double>,
                                            TensorView<double>, ImageRange);

}  // namespace braid::samples
