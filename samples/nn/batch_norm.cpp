#include "nn/batch_norm.hpp"

#include <cmath>

#include <fmt/format.h>

#include "nn/channel_reduction.hpp"
#include "nn/launch.hpp"
#include "nn/relu.hpp"
#include "nn/sgd.hpp"

namespace braid::samples {

BatchNorm2d::BatchNorm2d(Shape4 input, BatchNormConfig cfg) : config(cfg), in(input) {
    if (in.elements() == 0) throw ShapeError("batch norm: empty input " + to_string(in));
    if (!(cfg.epsilon > 0.0f) || !std::isfinite(cfg.epsilon))
        throw ShapeError("batch norm: epsilon must be a finite number > 0, got " + fmt::format("{}", cfg.epsilon));
    if (!(cfg.momentum >= 0.0f && cfg.momentum <= 1.0f)) throw ShapeError("batch norm: momentum must be in [0, 1]");
    if (in.c > channel_reduction_max_channels)
        throw ShapeError("batch norm: " + std::to_string(in.c) + " channels, more than the " +
                         std::to_string(channel_reduction_max_channels) +
                         " braid's batch norm kernels reduce (one CUDA grid row per channel)");
}

std::vector<ParamSpec> BatchNorm2d::parameters() const {
    return {{"gamma", vector_shape(in.c), 0, InitRule::ones, false},
            {"beta", vector_shape(in.c), 0, InitRule::zeros, false}};
}

std::vector<AuxBufferSpec> BatchNorm2d::aux_buffers() const {
    return {{"running_mean", vector_shape(in.c), BufferRole::state, InitRule::zeros},
            {"running_var", vector_shape(in.c), BufferRole::state, InitRule::ones},
            {"saved_mean", vector_shape(in.c), BufferRole::saved, InitRule::zeros},
            {"saved_inv_std", vector_shape(in.c), BufferRole::saved, InitRule::zeros}};
}

PassWork BatchNorm2d::work(Pass p) const {
    const double e = static_cast<double>(in.elements()), t = float_bytes(in.elements()), c = float_bytes(in.c);
    const double mask = config.relu ? t : 0.0;  // a fused ReLU's backward passes also read y
    switch (p) {
        case Pass::forward: return {8.0 * e, 2 * t + t + 6 * c};  // statistics read x; normalize reads x, writes y
        case Pass::backward_data:  // sums read x, dy; the dx pass re-reads (and with shared sums writes dgamma, dbeta)
            return {9.0 * e, 2 * (2 * t + mask) + t + (config.share_sums ? 5 : 3) * c};
        case Pass::backward_weight: return {4.0 * e, 2 * t + mask + 4 * c};
        case Pass::update: return sgd_work(2ull * in.c);
    }
    return {};
}

std::vector<braid::KernelEstimate> BatchNorm2d::kernels(Pass p, const EstimateOptions&) const {
    const double e = static_cast<double>(in.elements()), t = float_bytes(in.elements()), c = float_bytes(in.c);
    const double mask = config.relu ? t : 0.0;
    const double partials = 2.0 * 8.0 * static_cast<double>(in.c) * channel_slices(in.n, in.h, in.w);  // two doubles
    const auto grid = [&](const char* name, double flops, double bytes) {
        return channel_grid_kernel(name, in.n, in.c, in.h, in.w, flops, bytes, braid::KernelClass::normalization);
    };
    // The CUDA layers' NCHW kernels (cuda/kernels.cu): partial sums per
    // (slice, channel), then a pass over the same grid that finishes them
    // (forward's normalize, backward's dx) or a thread per channel that does
    // (the weight gradients).
    switch (p) {
        case Pass::forward:
            return {grid("bn_forward_partials", 3.0 * e, t + partials),
                    grid("bn_forward_normalize", 5.0 * e, 2 * t + 6 * c + partials)};
        case Pass::backward_data:
            return {grid("bn_backward_partials", 4.0 * e, 2 * t + mask + partials),
                    grid("bn_backward_dx", 5.0 * e, 3 * t + mask + 3 * c + partials)};
        case Pass::backward_weight:
            return {grid("bn_backward_partials", 4.0 * e, 2 * t + mask + partials),
                    channel_finish_kernel("bn_weight_gradients", in.c, partials / 8.0, partials + 2 * c,
                                          braid::KernelClass::normalization)};
        case Pass::update: return sgd_kernels(2ull * in.c);
    }
    return {};
}

void check_shared_sums(const BatchNorm2d& layer, const void* dgamma, const void* dbeta) {
    if (layer.config.share_sums && (dgamma == nullptr || dbeta == nullptr))
        throw ShapeError("batch norm backward_data: the layer shares its sums and writes dgamma and dbeta too: give both");
}

template <class T>
void batch_norm_forward_training(const BatchNorm2d& layer, TensorView<const T> x, const T* gamma, const T* beta,
                                 TensorView<T> y, T* saved_mean, T* saved_inv_std, T* running_mean, T* running_var) {
    const Shape4 s = layer.in;
    const std::uint64_t plane = s.plane_elements();
    const double count = static_cast<double>(s.n) * static_cast<double>(plane);
    const double momentum = layer.config.momentum;
    for (std::uint32_t c = 0; c < s.c; ++c) {
        // Two passes in double: the variance does not lose digits to the mean.
        double sum = 0.0;
        for (std::uint32_t n = 0; n < s.n; ++n) {
            const T* xp = x.plane(n, c);
            for (std::uint64_t i = 0; i < plane; ++i) sum += static_cast<double>(xp[i]);
        }
        const double mean = sum / count;
        double squares = 0.0;
        for (std::uint32_t n = 0; n < s.n; ++n) {
            const T* xp = x.plane(n, c);
            for (std::uint64_t i = 0; i < plane; ++i) {
                const double d = static_cast<double>(xp[i]) - mean;
                squares += d * d;
            }
        }
        const double var = squares / count;
        const T mean_t = static_cast<T>(mean);
        const T inv_std = static_cast<T>(1.0 / std::sqrt(var + static_cast<double>(layer.config.epsilon)));
        saved_mean[c] = mean_t;
        saved_inv_std[c] = inv_std;
        const double unbiased = count > 1.0 ? var * count / (count - 1.0) : var;
        running_mean[c] = static_cast<T>((1.0 - momentum) * static_cast<double>(running_mean[c]) + momentum * mean);
        running_var[c] = static_cast<T>((1.0 - momentum) * static_cast<double>(running_var[c]) + momentum * unbiased);
        const T g = gamma[c], b = beta[c];
        for (std::uint32_t n = 0; n < s.n; ++n) {
            const T* xp = x.plane(n, c);
            T* yp = y.plane(n, c);
            for (std::uint64_t i = 0; i < plane; ++i) {
                const T v = g * ((xp[i] - mean_t) * inv_std) + b;
                yp[i] = layer.config.relu ? relu_of(v) : v;
            }
        }
    }
}

namespace {

// The gradient at the normalisation's output: dy, masked by the fused ReLU.
template <class T>
T normalized_gradient(const BatchNorm2d& layer, const T* yp, const T* dyp, std::uint64_t i) {
    return layer.config.relu ? relu_gradient(yp[i], dyp[i]) : dyp[i];
}

template <class T>
void check_relu_output(const BatchNorm2d& layer, TensorView<const T> y, const char* who) {
    if (layer.config.relu && y.data == nullptr)
        throw ShapeError(std::string(who) + ": the layer has a fused ReLU and needs its output");
}

// sum(dy) and sum(dy * xhat) of channel c, in double, images in order.
template <class T>
void channel_sums(const BatchNorm2d& layer, TensorView<const T> x, TensorView<const T> dy, TensorView<const T> y,
                  std::uint32_t c, T mean, T inv_std, double& sum_dy, double& sum_dy_xhat) {
    const Shape4& s = layer.in;
    const std::uint64_t plane = s.plane_elements();
    sum_dy = 0.0;
    sum_dy_xhat = 0.0;
    for (std::uint32_t n = 0; n < s.n; ++n) {
        const T* xp = x.plane(n, c);
        const T* dyp = dy.plane(n, c);
        const T* yp = layer.config.relu ? y.plane(n, c) : nullptr;
        for (std::uint64_t i = 0; i < plane; ++i) {
            const T xhat = (xp[i] - mean) * inv_std;
            const T g = normalized_gradient(layer, yp, dyp, i);
            sum_dy += static_cast<double>(g);
            sum_dy_xhat += static_cast<double>(g) * static_cast<double>(xhat);
        }
    }
}

}  // namespace

template <class T>
void batch_norm_backward_data(const BatchNorm2d& layer, TensorView<const T> x, TensorView<const T> dy, const T* gamma,
                              const T* saved_mean, const T* saved_inv_std, TensorView<T> dx, TensorView<const T> y,
                              T* dgamma, T* dbeta) {
    check_relu_output(layer, y, "batch norm backward_data");
    check_shared_sums(layer, dgamma, dbeta);
    const Shape4 s = layer.in;
    const std::uint64_t plane = s.plane_elements();
    const double count = static_cast<double>(s.n) * static_cast<double>(plane);
    for (std::uint32_t c = 0; c < s.c; ++c) {
        double sum_dy = 0.0, sum_dy_xhat = 0.0;
        channel_sums(layer, x, dy, y, c, saved_mean[c], saved_inv_std[c], sum_dy, sum_dy_xhat);
        if (layer.config.share_sums) {  // as batch_norm_backward_weight writes them
            dgamma[c] = static_cast<T>(sum_dy_xhat);
            dbeta[c] = static_cast<T>(sum_dy);
        }
        const T mean_dy = static_cast<T>(sum_dy / count), mean_dy_xhat = static_cast<T>(sum_dy_xhat / count);
        const T scale = gamma[c] * saved_inv_std[c];
        for (std::uint32_t n = 0; n < s.n; ++n) {
            const T* xp = x.plane(n, c);
            const T* dyp = dy.plane(n, c);
            const T* yp = layer.config.relu ? y.plane(n, c) : nullptr;
            T* dxp = dx.plane(n, c);
            for (std::uint64_t i = 0; i < plane; ++i) {
                const T xhat = (xp[i] - saved_mean[c]) * saved_inv_std[c];
                dxp[i] = scale * (normalized_gradient(layer, yp, dyp, i) - mean_dy - xhat * mean_dy_xhat);
            }
        }
    }
}

template <class T>
void batch_norm_backward_weight(const BatchNorm2d& layer, TensorView<const T> x, TensorView<const T> dy,
                                const T* saved_mean, const T* saved_inv_std, T* dgamma, T* dbeta, TensorView<const T> y) {
    check_relu_output(layer, y, "batch norm backward_weight");
    for (std::uint32_t c = 0; c < layer.in.c; ++c) {
        double sum_dy = 0.0, sum_dy_xhat = 0.0;
        channel_sums(layer, x, dy, y, c, saved_mean[c], saved_inv_std[c], sum_dy, sum_dy_xhat);
        dgamma[c] = static_cast<T>(sum_dy_xhat);
        dbeta[c] = static_cast<T>(sum_dy);
    }
}

#define BRAID_SAMPLES_BN(T)                                                                                         \
    template void batch_norm_forward_training<T>(const BatchNorm2d&, TensorView<const T>, const T*, const T*,        \
                                                 TensorView<T>, T*, T*, T*, T*);                                     \
    template void batch_norm_backward_data<T>(const BatchNorm2d&, TensorView<const T>, TensorView<const T>, const T*, \
                                              const T*, const T*, TensorView<T>, TensorView<const T>, T*, T*);       \
    template void batch_norm_backward_weight<T>(const BatchNorm2d&, TensorView<const T>, TensorView<const T>,         \
                                                const T*, const T*, T*, T*, TensorView<const T>);
BRAID_SAMPLES_BN(float)
BRAID_SAMPLES_BN(double)
#undef BRAID_SAMPLES_BN

}  // namespace braid::samples
