#include "nn/lrn.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "nn/launch.hpp"

namespace braid::samples {

Lrn::Lrn(Shape4 input, LrnConfig cfg) : PerImageUnaryLayer{input}, config(cfg) {
    if (in.elements() == 0) throw ShapeError("lrn: empty input " + to_string(in));
    if (cfg.size == 0 || cfg.size % 2 == 0) throw ShapeError("lrn: size must be odd, got " + std::to_string(cfg.size));
    // k + alpha/size * sum(x^2) is raised to -beta: the base must stay
    // positive and every constant finite, or training turns to NaN.
    if (!(cfg.k > 0.0f) || !std::isfinite(cfg.k)) throw ShapeError("lrn: k must be a finite number > 0, got " + fmt::format("{}", cfg.k));
    if (!(cfg.alpha >= 0.0f) || !std::isfinite(cfg.alpha))
        throw ShapeError("lrn: alpha must be a finite number >= 0, got " + fmt::format("{}", cfg.alpha));
    if (!std::isfinite(cfg.beta)) throw ShapeError("lrn: beta must be a finite number, got " + fmt::format("{}", cfg.beta));
}

PassWork Lrn::work(Pass p) const {
    const double e = static_cast<double>(in.elements()), t = float_bytes(in.elements());
    if (p == Pass::forward) return {e * (2.0 * config.size + 4.0), 2 * t};
    if (p == Pass::backward_data) return {e * (5.0 * config.size + 8.0), 4 * t};
    return {};
}

std::vector<braid::KernelEstimate> Lrn::kernels(Pass p, const EstimateOptions&) const {
    if (!has_pass(p)) return {};
    const PassWork w = work(p);
    return {elementwise_kernel(p == Pass::forward ? "lrn_cross_channel_forward" : "lrn_cross_channel_backward",
                               in.elements(), w.flops, w.dram_bytes, braid::KernelClass::normalization, 1)};
}

namespace {

// scale of every element of image n (C*H*W values, channel-major).
template <class T>
void compute_scales(const Lrn& layer, const T* xi, std::vector<T>& scale) {
    const std::int64_t C = layer.in.c, plane = static_cast<std::int64_t>(layer.in.plane_elements());
    const std::int64_t half = layer.config.size / 2;
    const T alpha_over_size = static_cast<T>(layer.config.alpha) / static_cast<T>(layer.config.size);
    scale.assign(static_cast<std::size_t>(C * plane), T(0));
    for (std::int64_t c = 0; c < C; ++c) {
        T* sp = scale.data() + c * plane;
        for (std::int64_t j = std::max<std::int64_t>(0, c - half); j <= std::min(C - 1, c + half); ++j) {
            const T* xp = xi + j * plane;
            for (std::int64_t i = 0; i < plane; ++i) sp[i] += xp[i] * xp[i];
        }
        for (std::int64_t i = 0; i < plane; ++i) sp[i] = static_cast<T>(layer.config.k) + alpha_over_size * sp[i];
    }
}

}  // namespace

template <class T>
void lrn_forward(const Lrn& layer, TensorView<const T> x, TensorView<T> y, ImageRange images) {
    check_range(images, layer.in, "lrn_forward");
    const std::uint64_t e = layer.in.image_elements();
    const T beta = static_cast<T>(layer.config.beta);
    std::vector<T> scale;
    for (std::uint32_t n = images.begin; n < images.end; ++n) {
        const T* xi = x.image(n);
        T* yi = y.image(n);
        compute_scales(layer, xi, scale);
        for (std::uint64_t i = 0; i < e; ++i) yi[i] = xi[i] * std::pow(scale[i], -beta);
    }
}

template <class T>
void lrn_backward_data(const Lrn& layer, TensorView<const T> x, TensorView<const T> y, TensorView<const T> dy,
                       TensorView<T> dx, ImageRange images) {
    check_range(images, layer.in, "lrn_backward_data");
    const std::int64_t C = layer.in.c, plane = static_cast<std::int64_t>(layer.in.plane_elements());
    const std::int64_t half = layer.config.size / 2;
    const T beta = static_cast<T>(layer.config.beta);
    const T factor = T(2) * static_cast<T>(layer.config.alpha) * beta / static_cast<T>(layer.config.size);
    std::vector<T> scale, ratio(static_cast<std::size_t>(C * plane));
    for (std::uint32_t n = images.begin; n < images.end; ++n) {
        const T* xi = x.image(n);
        const T* yi = y.image(n);
        const T* dyi = dy.image(n);
        T* dxi = dx.image(n);
        compute_scales(layer, xi, scale);
        for (std::int64_t i = 0; i < C * plane; ++i) ratio[static_cast<std::size_t>(i)] = dyi[i] * yi[i] / scale[static_cast<std::size_t>(i)];
        for (std::int64_t c = 0; c < C; ++c) {
            T* dxp = dxi + c * plane;
            const T* xp = xi + c * plane;
            const T* dyp = dyi + c * plane;
            const T* sp = scale.data() + c * plane;
            for (std::int64_t i = 0; i < plane; ++i) dxp[i] = dyp[i] * std::pow(sp[i], -beta);
            // Symmetric windows: c is in j's window exactly when j is in c's.
            for (std::int64_t j = std::max<std::int64_t>(0, c - half); j <= std::min(C - 1, c + half); ++j) {
                const T* rp = ratio.data() + j * plane;
                for (std::int64_t i = 0; i < plane; ++i) dxp[i] -= factor * xp[i] * rp[i];
            }
        }
    }
}

#define BRAID_SAMPLES_LRN(T)                                                                                       \
    template void lrn_forward<T>(const Lrn&, TensorView<const T>, TensorView<T>, ImageRange);                        \
    template void lrn_backward_data<T>(const Lrn&, TensorView<const T>, TensorView<const T>, TensorView<const T>,    \
                                       TensorView<T>, ImageRange);
BRAID_SAMPLES_LRN(float)
BRAID_SAMPLES_LRN(double)
#undef BRAID_SAMPLES_LRN

}  // namespace braid::samples
