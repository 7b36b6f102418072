#include "nn/relu.hpp"

#include "nn/launch.hpp"

namespace braid::samples {

Relu::Relu(Shape4 input) : PerImageUnaryLayer{input} {
    if (in.elements() == 0) throw ShapeError("relu: empty input " + to_string(in));
}

PassWork Relu::work(Pass p) const {
    const double e = static_cast<double>(in.elements()), t = float_bytes(in.elements());
    if (p == Pass::forward) return {e, 2 * t};
    if (p == Pass::backward_data) return {e, 3 * t};
    return {};
}

std::vector<braid::KernelEstimate> Relu::kernels(Pass p, const EstimateOptions&) const {
    if (!has_pass(p)) return {};
    const PassWork w = work(p);
    return {elementwise_kernel(p == Pass::forward ? "relu_forward" : "relu_backward", in.elements(), w.flops,
                               w.dram_bytes)};
}

template <class T>
void relu_forward(const Relu& layer, TensorView<const T> x, TensorView<T> y, ImageRange images) {
    check_range(images, layer.in, "relu_forward");
    const std::uint64_t e = layer.in.image_elements();
    for (std::uint32_t n = images.begin; n < images.end; ++n) {
        const T* xi = x.image(n);
        T* yi = y.image(n);
        for (std::uint64_t i = 0; i < e; ++i) yi[i] = relu_of(xi[i]);
    }
}

template <class T>
void relu_backward_data(const Relu& layer, TensorView<const T> y, TensorView<const T> dy, TensorView<T> dx,
                        ImageRange images) {
    check_range(images, layer.in, "relu_backward_data");
    const std::uint64_t e = layer.in.image_elements();
    for (std::uint32_t n = images.begin; n < images.end; ++n) {
        const T* yi = y.image(n);
        const T* dyi = dy.image(n);
        T* dxi = dx.image(n);
        for (std::uint64_t i = 0; i < e; ++i) dxi[i] = relu_gradient(yi[i], dyi[i]);
    }
}

#define BRAID_SAMPLES_RELU(T)                                                                      \
    template void relu_forward<T>(const Relu&, TensorView<const T>, TensorView<T>, ImageRange); \
    template void relu_backward_data<T>(const Relu&, TensorView<const T>, TensorView<const T>, TensorView<T>, ImageRange);
BRAID_SAMPLES_RELU(float)
BRAID_SAMPLES_RELU(double)
#undef BRAID_SAMPLES_RELU

}  // namespace braid::samples
