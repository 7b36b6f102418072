#include "nn/add.hpp"

#include "nn/launch.hpp"
#include "nn/relu.hpp"

namespace braid::samples {

Add::Add(Shape4 a, Shape4 b, bool fused_relu) : in(a), relu(fused_relu) {
    if (!(a == b)) throw ShapeError("add: input shapes " + to_string(a) + " and " + to_string(b) + " differ");
    if (a.elements() == 0) throw ShapeError("add: empty input " + to_string(a));
}

PassWork Add::work(Pass p) const {
    if (!has_pass(p)) return {};
    // Forward reads a, b, writes y; the fused ReLU's backward reads y, dy, writes dx.
    return {static_cast<double>(in.elements()) * (p == Pass::forward && relu ? 2.0 : 1.0),
            3 * float_bytes(in.elements())};
}

std::vector<braid::KernelEstimate> Add::kernels(Pass p, const EstimateOptions&) const {
    if (!has_pass(p)) return {};
    const PassWork w = work(p);
    return {elementwise_kernel(p == Pass::forward ? "add_forward" : "add_relu_backward", in.elements(), w.flops,
                               w.dram_bytes)};
}

template <class T>
void add_forward(const Add& layer, TensorView<const T> a, TensorView<const T> b, TensorView<T> y, ImageRange images) {
    check_range(images, layer.in, "add_forward");
    const std::uint64_t e = layer.in.image_elements();
    for (std::uint32_t n = images.begin; n < images.end; ++n) {
        const T* ai = a.image(n);
        const T* bi = b.image(n);
        T* yi = y.image(n);
        if (layer.relu)
            for (std::uint64_t i = 0; i < e; ++i) yi[i] = relu_of<T>(ai[i] + bi[i]);
        else
            for (std::uint64_t i = 0; i < e; ++i) yi[i] = ai[i] + bi[i];
    }
}

template void add_forward<float>(const Add&, TensorView<const float>, TensorView<const float>, TensorView<float>,
                                 ImageRange);
template void add_forward<double>(const Add&, TensorView<const double>, TensorView<const double>, TensorView<double>,
                                  ImageRange);

}  // namespace braid::samples
