// Shapes and non-owning views of NCHW float tensors, the currency of every
// layer. A view may be a channel slice of a larger tensor (a branch's part of
// a concat output): its images are then `image_stride` elements apart instead
// of C*H*W, so a branch writes straight into the concat buffer.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "braid/error.hpp"

namespace braid::samples {

// A shape or configuration a layer cannot accept; the message names the layer.
class ShapeError : public braid::Error {
public:
    using braid::Error::Error;
};

struct Shape4 {
    std::uint32_t n = 0;  // images
    std::uint32_t c = 0;  // channels
    std::uint32_t h = 0;
    std::uint32_t w = 0;

    std::uint64_t image_elements() const noexcept { return std::uint64_t{c} * h * w; }
    std::uint64_t plane_elements() const noexcept { return std::uint64_t{h} * w; }
    std::uint64_t elements() const noexcept { return std::uint64_t{n} * image_elements(); }
    std::uint64_t bytes() const noexcept { return elements() * sizeof(float); }
    friend bool operator==(const Shape4&, const Shape4&) = default;
};

// "32x64x56x56"
inline std::string to_string(const Shape4& s) {
    return std::to_string(s.n) + "x" + std::to_string(s.c) + "x" + std::to_string(s.h) + "x" + std::to_string(s.w);
}
// A dense tensor of `s` from NCHW to NHWC (to_nhwc), or back. A KCRS
// filter is K images of C x R x S, so this also gives its KRSC form.
template <class T>
std::vector<T> transposed(std::span<const T> v, Shape4 s, bool to_nhwc) {
    if (v.size() != s.elements())
        throw ShapeError("transposed: " + std::to_string(v.size()) + " values for a tensor of " +
                         std::to_string(s.elements()));
    std::vector<T> out(v.size());
    const std::uint64_t plane = s.plane_elements();
    for (std::uint64_t n = 0; n < s.n; ++n)
        for (std::uint64_t c = 0; c < s.c; ++c)
            for (std::uint64_t i = 0; i < plane; ++i) {
                const std::uint64_t nchw = (n * s.c + c) * plane + i, nhwc = (n * plane + i) * s.c + c;
                if (to_nhwc) out[nhwc] = v[nchw];
                else out[nchw] = v[nhwc];
            }
    return out;
}

// One image: "64x56x56"
inline std::string image_shape_string(const Shape4& s) {
    return std::to_string(s.c) + "x" + std::to_string(s.h) + "x" + std::to_string(s.w);
}

// Images [begin, end) of a batch: the part of a split op a body works on.
struct ImageRange {
    std::uint32_t begin = 0;
    std::uint32_t end = 0;
    std::uint32_t size() const noexcept { return end - begin; }
};

template <class T>
struct TensorView {
    T* data = nullptr;
    Shape4 shape;                   // the logical shape of this view (n = the whole batch)
    std::uint64_t image_stride = 0;  // elements from one image's start to the next
    // Set only for an NHWC channel slice of a concat's buffer (the GPU
    // backend's channels-last views): elements from one pixel's first
    // channel to the next's, the whole buffer's channel count. 0: an
    // image's elements are adjacent (NCHW planes, or whole NHWC images).
    std::uint64_t pixel_stride = 0;

    T* image(std::uint32_t n) const noexcept { return data + n * image_stride; }
    T* plane(std::uint32_t n, std::uint32_t c) const noexcept { return image(n) + c * shape.plane_elements(); }
    bool contiguous() const noexcept { return image_stride == shape.image_elements(); }

    static TensorView dense(T* data, Shape4 shape) { return TensorView{data, shape, shape.image_elements()}; }

    // A view of mutable data is also a view of const data.
    template <class U = T>
        requires(!std::is_const_v<U>)
    operator TensorView<const U>() const noexcept {
        return TensorView<const U>{data, shape, image_stride, pixel_stride};
    }
};

inline ImageRange whole_batch(const Shape4& s) noexcept { return ImageRange{0, s.n}; }

// Throws ShapeError naming `who` when `r` is not a sub-range of the batch.
inline void check_range(const ImageRange& r, const Shape4& s, const char* who) {
    if (r.begin > r.end || r.end > s.n)
        throw ShapeError(std::string(who) + ": image range [" + std::to_string(r.begin) + ", " +
                         std::to_string(r.end) + ") is not inside a batch of " + std::to_string(s.n));
}

}  // namespace braid::samples
