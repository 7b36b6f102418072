#include "nn/concat.hpp"

#include <algorithm>

namespace braid::samples {

Concat::Concat(std::vector<Shape4> inputs) : in(std::move(inputs)) {
    if (in.empty()) throw ShapeError("concat: no inputs");
    out = in.front();
    out.c = 0;
    for (const Shape4& s : in) {
        if (s.n != out.n || s.h != out.h || s.w != out.w)
            throw ShapeError("concat: input " + to_string(s) + " does not match " + to_string(in.front()) +
                             " in batch, height or width");
        channel_offsets.push_back(out.c);
        out.c += s.c;
    }
}

template <class T>
void concat_forward_copy(const Concat& layer, std::span<const TensorView<const T>> xs, TensorView<T> y,
                         ImageRange images) {
    check_range(images, layer.out, "concat_forward_copy");
    for (std::size_t i = 0; i < xs.size(); ++i) {
        TensorView<T> dst = layer.slice(y, i);
        const std::uint64_t e = layer.in[i].image_elements();
        for (std::uint32_t n = images.begin; n < images.end; ++n) std::copy_n(xs[i].image(n), e, dst.image(n));
    }
}

template <class T>
void concat_backward_copy(const Concat& layer, TensorView<const T> dy, std::span<const TensorView<T>> dxs,
                          ImageRange images) {
    check_range(images, layer.out, "concat_backward_copy");
    for (std::size_t i = 0; i < dxs.size(); ++i) {
        TensorView<const T> src = layer.slice(dy, i);
        const std::uint64_t e = layer.in[i].image_elements();
        for (std::uint32_t n = images.begin; n < images.end; ++n) std::copy_n(src.image(n), e, dxs[i].image(n));
    }
}

#define BRAID_SAMPLES_CONCAT(T)                                                                              \
    template void concat_forward_copy<T>(const Concat&, std::span<const TensorView<const T>>, TensorView<T>, \
                                         ImageRange);                                                        \
    template void concat_backward_copy<T>(const Concat&, TensorView<const T>, std::span<const TensorView<T>>, ImageRange);
BRAID_SAMPLES_CONCAT(float)
BRAID_SAMPLES_CONCAT(double)
#undef BRAID_SAMPLES_CONCAT

}  // namespace braid::samples
