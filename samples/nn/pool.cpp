#include "nn/pool.hpp"

#include <algorithm>
#include <limits>

#include "nn/launch.hpp"

namespace braid::samples {

std::uint32_t pooled_size(std::uint32_t in, std::uint32_t kernel, std::uint32_t stride, std::uint32_t pad,
                          bool ceil_mode) {
    const std::int64_t span = std::int64_t{in} + 2 * std::int64_t{pad} - kernel + (ceil_mode ? stride - 1 : 0);
    if (span < 0) return 0;  // floor division of a negative number: no window
    std::int64_t out = span / stride + 1;
    // The last window must start inside the image or its left padding.
    if (ceil_mode && (out - 1) * stride >= std::int64_t{in} + pad) --out;
    return out < 1 ? 0 : static_cast<std::uint32_t>(out);
}

Pool2d::Pool2d(Shape4 input, PoolConfig cfg) : config(cfg), in(input) {
    const char* what = cfg.mode == PoolMode::max ? "max pooling" : "average pooling";
    if (in.elements() == 0) throw ShapeError(std::string(what) + ": empty input " + to_string(in));
    if (cfg.global) {
        kernel_h = in.h;
        kernel_w = in.w;
        stride = 1;
        pad = 0;
        out = Shape4{in.n, in.c, 1, 1};
        return;
    }
    if (cfg.kernel == 0 || cfg.stride == 0) throw ShapeError(std::string(what) + ": kernel and stride must be >= 1");
    if (2 * cfg.pad > cfg.kernel)
        throw ShapeError(std::string(what) + ": padding " + std::to_string(cfg.pad) + " exceeds half the kernel " +
                         std::to_string(cfg.kernel));
    kernel_h = kernel_w = cfg.kernel;
    stride = cfg.stride;
    pad = cfg.pad;
    const std::uint32_t oh = pooled_size(in.h, cfg.kernel, cfg.stride, cfg.pad, cfg.ceil_mode);
    const std::uint32_t ow = pooled_size(in.w, cfg.kernel, cfg.stride, cfg.pad, cfg.ceil_mode);
    if (oh == 0 || ow == 0)
        throw ShapeError(std::string(what) + ": a " + std::to_string(cfg.kernel) + "x" + std::to_string(cfg.kernel) +
                         " window with stride " + std::to_string(cfg.stride) + " and padding " +
                         std::to_string(cfg.pad) + " does not fit a " + std::to_string(in.h) + "x" +
                         std::to_string(in.w) + " input");
    out = Shape4{in.n, in.c, oh, ow};
}

PassWork Pool2d::work(Pass p) const {
    const double window = static_cast<double>(kernel_h) * kernel_w;
    const double outputs = static_cast<double>(out.elements());
    const double x = float_bytes(in.elements()), y = float_bytes(out.elements());
    if (p == Pass::forward) return {outputs * window, x + y};
    // Max backward: the argmax pass reads x and y and writes one int per
    // output; the gather reads those and dy and writes dx.
    if (p == Pass::backward_data)
        return {outputs * window, config.mode == PoolMode::max ? x + y + y + y + y + x : y + x};
    return {};
}

std::vector<braid::KernelEstimate> Pool2d::kernels(Pass p, const EstimateOptions&) const {
    if (!has_pass(p)) return {};
    const PassWork w = work(p);
    const std::string mode = config.mode == PoolMode::max ? "max" : "avg";
    // One thread per output (forward) or per input element (backward,
    // gathering from the windows that cover it), as cuDNN and PyTorch do;
    // max pooling's backward first finds each window's argmax, one thread
    // per output (samples/cuda/kernels.h).
    if (p == Pass::forward) return {elementwise_kernel(mode + "_pool_forward", out.elements(), w.flops, w.dram_bytes,
                                                  braid::KernelClass::pooling_forward, 1)};
    const double x = float_bytes(in.elements()), y = float_bytes(out.elements());
    if (config.mode == PoolMode::max)
        return {elementwise_kernel("max_pool_argmax", out.elements(), w.flops, x + y + y,
                                   braid::KernelClass::pooling_backward, 1),
                elementwise_kernel("max_pool_backward", in.elements(), static_cast<double>(out.elements()), y + y + x,
                                   braid::KernelClass::pooling_backward, 1)};
    return {elementwise_kernel(mode + "_pool_backward", in.elements(), w.flops, w.dram_bytes, braid::KernelClass::pooling_backward, 1)};
}

namespace {

struct Window {
    std::int64_t h0, h1, w0, w1;  // clipped to the image
    std::int64_t count;           // divisor: clipped to the padded image only
};

Window window_of(const Pool2d& l, std::int64_t oh, std::int64_t ow) {
    const std::int64_t H = l.in.h, W = l.in.w, P = l.pad, S = l.stride;
    std::int64_t h0 = oh * S - P, w0 = ow * S - P;
    std::int64_t h1 = std::min(h0 + std::int64_t{l.kernel_h}, H + P), w1 = std::min(w0 + std::int64_t{l.kernel_w}, W + P);
    const std::int64_t count = (h1 - h0) * (w1 - w0);
    h0 = std::max<std::int64_t>(h0, 0);
    w0 = std::max<std::int64_t>(w0, 0);
    h1 = std::min(h1, H);
    w1 = std::min(w1, W);
    return {h0, h1, w0, w1, count};
}

}  // namespace

template <class T>
void pool_forward(const Pool2d& layer, TensorView<const T> x, TensorView<T> y, ImageRange images) {
    check_range(images, layer.in, "pool_forward");
    const std::int64_t W = layer.in.w, OH = layer.out.h, OW = layer.out.w;
    for (std::uint32_t n = images.begin; n < images.end; ++n) {
        for (std::uint32_t c = 0; c < layer.in.c; ++c) {
            const T* xp = x.plane(n, c);
            T* yp = y.plane(n, c);
            for (std::int64_t oh = 0; oh < OH; ++oh) {
                for (std::int64_t ow = 0; ow < OW; ++ow) {
                    const Window win = window_of(layer, oh, ow);
                    if (layer.config.mode == PoolMode::max) {
                        T best = -std::numeric_limits<T>::infinity();
                        for (std::int64_t h = win.h0; h < win.h1; ++h)
                            for (std::int64_t w = win.w0; w < win.w1; ++w) best = std::max(best, xp[h * W + w]);
                        yp[oh * OW + ow] = best;
                    } else {
                        T sum = 0;
                        for (std::int64_t h = win.h0; h < win.h1; ++h)
                            for (std::int64_t w = win.w0; w < win.w1; ++w) sum += xp[h * W + w];
                        yp[oh * OW + ow] = sum / static_cast<T>(win.count);
                    }
                }
            }
        }
    }
}

template <class T>
void pool_backward_data(const Pool2d& layer, TensorView<const T> x, TensorView<const T> y, TensorView<const T> dy,
                        TensorView<T> dx, ImageRange images) {
    check_range(images, layer.in, "pool_backward_data");
    const std::int64_t H = layer.in.h, W = layer.in.w, OH = layer.out.h, OW = layer.out.w;
    for (std::uint32_t n = images.begin; n < images.end; ++n) {
        for (std::uint32_t c = 0; c < layer.in.c; ++c) {
            T* dxp = dx.plane(n, c);
            std::fill(dxp, dxp + H * W, T(0));
            const T* dyp = dy.plane(n, c);
            for (std::int64_t oh = 0; oh < OH; ++oh) {
                for (std::int64_t ow = 0; ow < OW; ++ow) {
                    const Window win = window_of(layer, oh, ow);
                    const T g = dyp[oh * OW + ow];
                    if (layer.config.mode == PoolMode::max) {
                        const T* xp = x.plane(n, c);
                        const T best = y.plane(n, c)[oh * OW + ow];
                        bool routed = false;
                        for (std::int64_t h = win.h0; h < win.h1 && !routed; ++h)
                            for (std::int64_t w = win.w0; w < win.w1; ++w)
                                if (xp[h * W + w] == best) {
                                    dxp[h * W + w] += g;
                                    routed = true;
                                    break;
                                }
                    } else {
                        const T share = g / static_cast<T>(win.count);
                        for (std::int64_t h = win.h0; h < win.h1; ++h)
                            for (std::int64_t w = win.w0; w < win.w1; ++w) dxp[h * W + w] += share;
                    }
                }
            }
        }
    }
}

#define BRAID_SAMPLES_POOL(T)                                                                                       \
    template void pool_forward<T>(const Pool2d&, TensorView<const T>, TensorView<T>, ImageRange);                     \
    template void pool_backward_data<T>(const Pool2d&, TensorView<const T>, TensorView<const T>, TensorView<const T>, \
                                        TensorView<T>, ImageRange);
BRAID_SAMPLES_POOL(float)
BRAID_SAMPLES_POOL(double)
#undef BRAID_SAMPLES_POOL

}  // namespace braid::samples
