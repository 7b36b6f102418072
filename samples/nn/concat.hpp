// Concatenation along channels. In the training graph it runs no op: each
// input IS a channel slice (a strided view) of the output buffer, written
// there by its producer, and each input's gradient IS the slice of the
// output's gradient. The copy functions here are the reference the views
// are tested against.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "nn/layer.hpp"

namespace braid::samples {

struct Concat {
    std::vector<Shape4> in;
    Shape4 out;
    std::vector<std::uint32_t> channel_offsets;  // of each input in the output

    explicit Concat(std::vector<Shape4> inputs);

    LayerKind kind() const noexcept { return LayerKind::concat; }
    std::vector<Shape4> inputs() const { return in; }
    Shape4 output() const noexcept { return out; }
    std::vector<ParamSpec> parameters() const { return {}; }
    std::vector<AuxBufferSpec> aux_buffers() const { return {}; }
    bool has_pass(Pass) const noexcept { return false; }
    bool splittable(Pass) const noexcept { return false; }
    PassWork work(Pass) const { return {}; }
    std::vector<braid::KernelEstimate> kernels(Pass, const EstimateOptions&) const { return {}; }

    // Input i as a view into the output tensor `y`.
    template <class T>
    TensorView<T> slice(TensorView<T> y, std::size_t i) const {
        return TensorView<T>{y.data + std::uint64_t{channel_offsets.at(i)} * out.plane_elements(), in.at(i),
                             y.image_stride};
    }
};

template <class T>
void concat_forward_copy(const Concat& layer, std::span<const TensorView<const T>> xs, TensorView<T> y,
                         ImageRange images);
template <class T>
void concat_backward_copy(const Concat& layer, TensorView<const T> dy, std::span<const TensorView<T>> dxs,
                          ImageRange images);

}  // namespace braid::samples
