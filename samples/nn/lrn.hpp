// Local response normalization across channels (Krizhevsky et al. 2012), as
// GoogLeNet v1 uses it, in Caffe's and cuDNN's form:
//   scale_c = k + alpha / size * sum over c' in [c - size/2, c + size/2] of x_c'^2
//   y_c = x_c * scale_c^-beta
// The window size must be odd (symmetric windows keep backward simple).
#pragma once

#include <cstdint>
#include <vector>

#include "nn/layer.hpp"

namespace braid::samples {

struct LrnConfig {
    std::uint32_t size = 5;
    float alpha = 1e-4f;
    float beta = 0.75f;
    float k = 1.0f;
};

struct Lrn : PerImageUnaryLayer {
    LrnConfig config;

    Lrn(Shape4 input, LrnConfig cfg);

    LayerKind kind() const noexcept { return LayerKind::lrn; }
    PassWork work(Pass p) const;
    std::vector<braid::KernelEstimate> kernels(Pass p, const EstimateOptions& options) const;
};

template <class T>
void lrn_forward(const Lrn& layer, TensorView<const T> x, TensorView<T> y, ImageRange images);
// Recomputes the scales from x; reads x, y and dy as cuDNN's backward does.
template <class T>
void lrn_backward_data(const Lrn& layer, TensorView<const T> x, TensorView<const T> y, TensorView<const T> dy,
                       TensorView<T> dx, ImageRange images);

}  // namespace braid::samples
