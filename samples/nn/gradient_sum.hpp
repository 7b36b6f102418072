// The gradient of an activation read by several layers: the sum of the
// partial gradients each consumer's backward-data op wrote, added in a fixed
// order ((p0 + p1) + p2) + ... so that every schedule gives the same bits.
#pragma once

#include <span>
#include <vector>

#include "nn/layer.hpp"

namespace braid::samples {

template <class T>
void gradient_sum(std::span<const TensorView<const T>> partials, TensorView<T> total, ImageRange images);

PassWork gradient_sum_work(const Shape4& shape, std::size_t partials);
std::vector<braid::KernelEstimate> gradient_sum_kernels(const Shape4& shape, std::size_t partials);

}  // namespace braid::samples
