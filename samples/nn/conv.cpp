#include "nn/conv.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "nn/channel_reduction.hpp"
#include "nn/launch.hpp"
#include "nn/sgd.hpp"

namespace braid::samples {

Conv2d::Conv2d(Shape4 input, ConvConfig cfg) : config(cfg), in(input) {
    const auto fail = [&](const std::string& why) { throw ShapeError("convolution: " + why); };
    const Size2 k = cfg.kernel, p = cfg.pad;
    if (cfg.out_channels == 0) fail("needs at least one output channel");
    if (k.h == 0 || k.w == 0 || cfg.stride == 0)
        fail("kernel and stride must be >= 1, got a " + to_string(k) + " kernel and stride " + std::to_string(cfg.stride));
    if (cfg.groups == 0 || in.c % cfg.groups != 0 || cfg.out_channels % cfg.groups != 0)
        fail(std::to_string(in.c) + " input and " + std::to_string(cfg.out_channels) +
             " output channels do not divide into " + std::to_string(cfg.groups) + " groups");
    if (in.n == 0 || in.c == 0) fail("empty input " + to_string(in));
    if (!std::isfinite(cfg.bias_init)) fail("the bias must start at a finite value, got " + fmt::format("{}", cfg.bias_init));
    if (cfg.bias && cfg.out_channels > channel_reduction_max_channels)
        fail("a bias over " + std::to_string(cfg.out_channels) + " output channels: braid's bias gradient reduces at most " +
             std::to_string(channel_reduction_max_channels) + " channels (one CUDA grid row each); leave the bias out");
    if (std::uint64_t{in.h} + 2 * std::uint64_t{p.h} < k.h || std::uint64_t{in.w} + 2 * std::uint64_t{p.w} < k.w)
        fail("a " + to_string(k) + " kernel with padding " + (p.square() ? std::to_string(p.h) : to_string(p)) +
             " does not fit a " + std::to_string(in.h) + "x" + std::to_string(in.w) + " input");
    out = Shape4{in.n, cfg.out_channels, (in.h + 2 * p.h - k.h) / cfg.stride + 1, (in.w + 2 * p.w - k.w) / cfg.stride + 1};
}

std::uint64_t Conv2d::taps() const noexcept { return std::uint64_t{config.kernel.h} * config.kernel.w; }

std::uint64_t Conv2d::weight_elements() const noexcept {
    return std::uint64_t{config.out_channels} * (in.c / config.groups) * taps();
}

std::uint64_t Conv2d::macs() const noexcept { return out.elements() * (in.c / config.groups) * taps(); }

std::vector<ParamSpec> Conv2d::parameters() const {
    std::vector<ParamSpec> p{{"weight", Shape4{config.out_channels, in.c / config.groups, config.kernel.h, config.kernel.w},
                              std::uint64_t{in.c / config.groups} * taps(), config.weight_init, true}};
    if (config.bias)
        p.push_back({"bias", vector_shape(config.out_channels), 0,
                     config.bias_init == 0.0f ? InitRule::zeros : InitRule::constant, false, config.bias_init});
    return p;
}

PassWork Conv2d::work(Pass p) const {
    const double flops = 2.0 * static_cast<double>(macs());
    const double bias_flops = config.bias ? static_cast<double>(out.elements()) : 0.0;
    const double bias_bytes = config.bias ? float_bytes(config.out_channels) : 0.0;
    const double w = float_bytes(weight_elements()), x = float_bytes(in.elements()), y = float_bytes(out.elements());
    switch (p) {
        case Pass::forward: return {flops + bias_flops, x + w + y + bias_bytes};
        case Pass::backward_data: return {flops, y + w + x};
        case Pass::backward_weight: return {flops + bias_flops, x + y + w + bias_bytes};
        case Pass::update: {
            std::uint64_t n = 0;
            for (const ParamSpec& s : parameters()) n += s.elements();
            return sgd_work(n);
        }
    }
    return {};
}

std::vector<braid::KernelEstimate> Conv2d::kernels(Pass p, const EstimateOptions& options) const {
    const std::uint32_t g = config.groups;
    const std::uint64_t taps = this->taps();
    const std::uint64_t c_group = in.c / g, k_group = config.out_channels / g;
    const PassWork work_of_pass = work(p);
    std::vector<braid::KernelEstimate> out_kernels;
    auto append = [&](std::vector<braid::KernelEstimate> ks) {
        out_kernels.insert(out_kernels.end(), ks.begin(), ks.end());
    };
    switch (p) {
        case Pass::forward: {
            const double bias_bytes = config.bias ? float_bytes(out.elements()) * 2 : 0.0;
            append(gemm_kernels("implicit_gemm_fprop", {out.n * out.plane_elements(), k_group, c_group * taps, g},
                                work_of_pass.dram_bytes - (config.bias ? float_bytes(config.out_channels) : 0.0),
                                options.gemm_math, false, braid::KernelClass::conv_forward));
            if (config.bias)
                out_kernels.push_back(elementwise_kernel("add_bias", out.elements(), static_cast<double>(out.elements()),
                                                         bias_bytes + float_bytes(config.out_channels)));
            break;
        }
        case Pass::backward_data:
            append(gemm_kernels("implicit_gemm_dgrad", {in.n * in.plane_elements(), c_group, k_group * taps, g},
                                work_of_pass.dram_bytes, options.gemm_math, false, braid::KernelClass::conv_backward_data));
            break;
        case Pass::backward_weight:
            append(gemm_kernels("implicit_gemm_wgrad", {k_group, c_group * taps, out.n * out.plane_elements(), g},
                                float_bytes(in.elements()) + float_bytes(out.elements()) +
                                    float_bytes(weight_elements()),
                                options.gemm_math, true, braid::KernelClass::conv_backward_weight));
            if (config.bias) {  // partial sums per (slice, channel), then a thread per channel adds them
                const double partials = 8.0 * config.out_channels * channel_slices(out.n, out.h, out.w);
                out_kernels.push_back(channel_grid_kernel("bias_grad_partials", out.n, config.out_channels, out.h,
                                                          out.w, static_cast<double>(out.elements()),
                                                          float_bytes(out.elements()) + partials,
                                                          braid::KernelClass::reduction));
                out_kernels.push_back(channel_finish_kernel("bias_grad", config.out_channels, partials / 8.0,
                                                            partials + float_bytes(config.out_channels),
                                                            braid::KernelClass::reduction));
            }
            break;
        case Pass::update: {
            std::uint64_t n = 0;
            for (const ParamSpec& s : parameters()) n += s.elements();
            return sgd_kernels(n);
        }
    }
    return out_kernels;
}

namespace {

// Output columns [lo, hi) whose input column ow*stride - pad + tap is inside [0, size).
struct ColumnRange {
    std::int64_t lo = 0;
    std::int64_t hi = 0;
};
ColumnRange valid_outputs(std::int64_t out_size, std::int64_t in_size, std::int64_t stride, std::int64_t pad,
                          std::int64_t tap) {
    // ow*stride >= pad - tap  and  ow*stride <= in_size - 1 + pad - tap
    const std::int64_t first = pad - tap;
    std::int64_t lo = first <= 0 ? 0 : (first + stride - 1) / stride;
    const std::int64_t last = in_size - 1 + pad - tap;
    std::int64_t hi = last < 0 ? 0 : last / stride + 1;
    lo = std::min(lo, out_size);
    hi = std::clamp(hi, lo, out_size);
    return {lo, hi};
}

}  // namespace

template <class T>
void conv_forward(const Conv2d& layer, TensorView<const T> x, const T* weight, const T* bias, TensorView<T> y,
                  ImageRange images) {
    check_range(images, layer.in, "conv_forward");
    const ConvConfig& c = layer.config;
    const std::int64_t H = layer.in.h, W = layer.in.w, OH = layer.out.h, OW = layer.out.w;
    const std::int64_t S = c.stride, PH = c.pad.h, PW = c.pad.w, KH = c.kernel.h, KW = c.kernel.w;
    const std::uint32_t cg = layer.in.c / c.groups, kg = c.out_channels / c.groups;
    for (std::uint32_t n = images.begin; n < images.end; ++n) {
        for (std::uint32_t k = 0; k < c.out_channels; ++k) {
            T* yp = y.plane(n, k);
            std::fill(yp, yp + OH * OW, bias ? bias[k] : T(0));
            const std::uint32_t g = k / kg;
            for (std::uint32_t cc = 0; cc < cg; ++cc) {
                const T* xp = x.plane(n, g * cg + cc);
                const T* wk = weight + (std::uint64_t{k} * cg + cc) * KH * KW;
                for (std::int64_t r = 0; r < KH; ++r) {
                    for (std::int64_t s = 0; s < KW; ++s) {
                        const T wv = wk[r * KW + s];
                        const ColumnRange cols = valid_outputs(OW, W, S, PW, s);
                        for (std::int64_t oh = 0; oh < OH; ++oh) {
                            const std::int64_t ih = oh * S - PH + r;
                            if (ih < 0 || ih >= H) continue;
                            const std::int64_t base = ih * W - PW + s;  // input index of output column 0
                            T* yrow = yp + oh * OW;
                            for (std::int64_t ow = cols.lo; ow < cols.hi; ++ow) yrow[ow] += wv * xp[base + ow * S];
                        }
                    }
                }
            }
        }
    }
}

template <class T>
void conv_backward_data(const Conv2d& layer, TensorView<const T> dy, const T* weight, TensorView<T> dx,
                        ImageRange images) {
    check_range(images, layer.in, "conv_backward_data");
    const ConvConfig& c = layer.config;
    const std::int64_t H = layer.in.h, W = layer.in.w, OH = layer.out.h, OW = layer.out.w;
    const std::int64_t S = c.stride, PH = c.pad.h, PW = c.pad.w, KH = c.kernel.h, KW = c.kernel.w;
    const std::uint32_t cg = layer.in.c / c.groups, kg = c.out_channels / c.groups;
    for (std::uint32_t n = images.begin; n < images.end; ++n) {
        for (std::uint32_t ch = 0; ch < layer.in.c; ++ch) std::fill(dx.plane(n, ch), dx.plane(n, ch) + H * W, T(0));
        for (std::uint32_t k = 0; k < c.out_channels; ++k) {
            const T* dyp = dy.plane(n, k);
            const std::uint32_t g = k / kg;
            for (std::uint32_t cc = 0; cc < cg; ++cc) {
                T* dxp = dx.plane(n, g * cg + cc);
                const T* wk = weight + (std::uint64_t{k} * cg + cc) * KH * KW;
                for (std::int64_t r = 0; r < KH; ++r) {
                    for (std::int64_t s = 0; s < KW; ++s) {
                        const T wv = wk[r * KW + s];
                        const ColumnRange cols = valid_outputs(OW, W, S, PW, s);
                        for (std::int64_t oh = 0; oh < OH; ++oh) {
                            const std::int64_t ih = oh * S - PH + r;
                            if (ih < 0 || ih >= H) continue;
                            const std::int64_t base = ih * W - PW + s;
                            const T* dyrow = dyp + oh * OW;
                            for (std::int64_t ow = cols.lo; ow < cols.hi; ++ow) dxp[base + ow * S] += wv * dyrow[ow];
                        }
                    }
                }
            }
        }
    }
}

template <class T>
void conv_backward_weight(const Conv2d& layer, TensorView<const T> x, TensorView<const T> dy, T* dweight, T* dbias) {
    const ConvConfig& c = layer.config;
    const std::int64_t H = layer.in.h, W = layer.in.w, OH = layer.out.h, OW = layer.out.w;
    const std::int64_t S = c.stride, PH = c.pad.h, PW = c.pad.w, KH = c.kernel.h, KW = c.kernel.w;
    const std::uint32_t cg = layer.in.c / c.groups, kg = c.out_channels / c.groups;
    std::fill(dweight, dweight + layer.weight_elements(), T(0));
    if (dbias) std::fill(dbias, dbias + c.out_channels, T(0));
    for (std::uint32_t n = 0; n < layer.in.n; ++n) {
        for (std::uint32_t k = 0; k < c.out_channels; ++k) {
            const T* dyp = dy.plane(n, k);
            const std::uint32_t g = k / kg;
            if (dbias) {
                T sum = 0;
                for (std::int64_t i = 0; i < OH * OW; ++i) sum += dyp[i];
                dbias[k] += sum;
            }
            for (std::uint32_t cc = 0; cc < cg; ++cc) {
                const T* xp = x.plane(n, g * cg + cc);
                T* dwk = dweight + (std::uint64_t{k} * cg + cc) * KH * KW;
                for (std::int64_t r = 0; r < KH; ++r) {
                    for (std::int64_t s = 0; s < KW; ++s) {
                        const ColumnRange cols = valid_outputs(OW, W, S, PW, s);
                        T sum = 0;
                        for (std::int64_t oh = 0; oh < OH; ++oh) {
                            const std::int64_t ih = oh * S - PH + r;
                            if (ih < 0 || ih >= H) continue;
                            const std::int64_t base = ih * W - PW + s;
                            const T* dyrow = dyp + oh * OW;
                            for (std::int64_t ow = cols.lo; ow < cols.hi; ++ow) sum += dyrow[ow] * xp[base + ow * S];
                        }
                        dwk[r * KW + s] += sum;
                    }
                }
            }
        }
    }
}

#define BRAID_SAMPLES_CONV(T)                                                                                        \
    template void conv_forward<T>(const Conv2d&, TensorView<const T>, const T*, const T*, TensorView<T>, ImageRange); \
    template void conv_backward_data<T>(const Conv2d&, TensorView<const T>, const T*, TensorView<T>, ImageRange);     \
    template void conv_backward_weight<T>(const Conv2d&, TensorView<const T>, TensorView<const T>, T*, T*);
BRAID_SAMPLES_CONV(float)
BRAID_SAMPLES_CONV(double)
#undef BRAID_SAMPLES_CONV

}  // namespace braid::samples
