#include "nn/gradient_sum.hpp"

#include "nn/launch.hpp"

namespace braid::samples {

template <class T>
void gradient_sum(std::span<const TensorView<const T>> partials, TensorView<T> total, ImageRange images) {
    if (partials.empty()) throw ShapeError("gradient_sum: no partial gradients");
    check_range(images, total.shape, "gradient_sum");
    const std::uint64_t e = total.shape.image_elements();
    for (const TensorView<const T>& p : partials)
        if (!(p.shape == total.shape))
            throw ShapeError("gradient_sum: a partial gradient of shape " + to_string(p.shape) +
                             " does not match the total " + to_string(total.shape));
    for (std::uint32_t n = images.begin; n < images.end; ++n) {
        T* out = total.image(n);
        const T* first = partials[0].image(n);
        for (std::uint64_t i = 0; i < e; ++i) out[i] = first[i];
        for (std::size_t k = 1; k < partials.size(); ++k) {
            const T* p = partials[k].image(n);
            for (std::uint64_t i = 0; i < e; ++i) out[i] += p[i];
        }
    }
}

PassWork gradient_sum_work(const Shape4& shape, std::size_t partials) {
    const double e = static_cast<double>(shape.elements());
    return {e * static_cast<double>(partials - 1), float_bytes(shape.elements()) * static_cast<double>(partials + 1)};
}

std::vector<braid::KernelEstimate> gradient_sum_kernels(const Shape4& shape, std::size_t partials) {
    const PassWork w = gradient_sum_work(shape, partials);
    return {elementwise_kernel("gradient_sum", shape.elements(), w.flops, w.dram_bytes)};
}

template void gradient_sum<float>(std::span<const TensorView<const float>>, TensorView<float>, ImageRange);
template void gradient_sum<double>(std::span<const TensorView<const double>>, TensorView<double>, ImageRange);

}  // namespace braid::samples
