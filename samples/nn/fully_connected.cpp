#include "nn/fully_connected.hpp"

#include <algorithm>

#include "nn/launch.hpp"
#include "nn/sgd.hpp"

namespace braid::samples {

FullyConnected::FullyConnected(Shape4 input, FullyConnectedConfig cfg) : config(cfg), in(input) {
    if (cfg.out_features == 0) throw ShapeError("fully connected: needs at least one output feature");
    if (in.elements() == 0) throw ShapeError("fully connected: empty input " + to_string(in));
    out = Shape4{in.n, cfg.out_features, 1, 1};
}

std::vector<ParamSpec> FullyConnected::parameters() const {
    std::vector<ParamSpec> p{{"weight", Shape4{config.out_features, static_cast<std::uint32_t>(in_features()), 1, 1},
                              in_features(), InitRule::fan_in_uniform, true}};
    if (config.bias) p.push_back({"bias", vector_shape(config.out_features), 0, InitRule::zeros, false});
    return p;
}

PassWork FullyConnected::work(Pass p) const {
    const double macs = static_cast<double>(in.n) * static_cast<double>(in_features()) * config.out_features;
    const double w = float_bytes(std::uint64_t{config.out_features} * in_features());
    const double x = float_bytes(in.elements()), y = float_bytes(out.elements());
    const double b = config.bias ? float_bytes(config.out_features) : 0.0;
    const double bias_flops = config.bias ? static_cast<double>(out.elements()) : 0.0;
    switch (p) {
        case Pass::forward: return {2 * macs + bias_flops, x + w + b + y};
        case Pass::backward_data: return {2 * macs, y + w + x};
        case Pass::backward_weight: return {2 * macs + bias_flops, x + y + w + b};
        case Pass::update:
            return sgd_work(std::uint64_t{config.out_features} * in_features() + (config.bias ? config.out_features : 0));
    }
    return {};
}

std::vector<braid::KernelEstimate> FullyConnected::kernels(Pass p, const EstimateOptions& options) const {
    const std::uint64_t n = in.n, k_in = in_features(), k_out = config.out_features;
    const double w = float_bytes(k_out * k_in), x = float_bytes(in.elements()), y = float_bytes(out.elements());
    std::vector<braid::KernelEstimate> ks;
    auto append = [&](std::vector<braid::KernelEstimate> more) { ks.insert(ks.end(), more.begin(), more.end()); };
    // cuBLAS GEMMs with the batch as the GEMM's m (grid x).
    switch (p) {
        case Pass::forward:
            append(gemm_kernels("gemm_fc_forward", {n, k_out, k_in, 1}, x + w + y, options.gemm_math, false, braid::KernelClass::gemm));
            if (config.bias)
                ks.push_back(elementwise_kernel("add_bias", out.elements(), static_cast<double>(out.elements()),
                                                2 * y + float_bytes(k_out)));
            break;
        case Pass::backward_data:
            append(gemm_kernels("gemm_fc_backward_data", {n, k_in, k_out, 1}, x + w + y, options.gemm_math, false, braid::KernelClass::gemm));
            break;
        case Pass::backward_weight:
            append(gemm_kernels("gemm_fc_backward_weight", {k_out, k_in, n, 1}, x + w + y, options.gemm_math, true, braid::KernelClass::gemm));
            if (config.bias)
                ks.push_back(elementwise_kernel("bias_grad", k_out, static_cast<double>(out.elements()),
                                                y + float_bytes(k_out), braid::KernelClass::reduction, 1));
            break;
        case Pass::update: return sgd_kernels(k_out * k_in + (config.bias ? k_out : 0));
    }
    return ks;
}

template <class T>
void fully_connected_forward(const FullyConnected& layer, TensorView<const T> x, const T* weight, const T* bias,
                             TensorView<T> y, ImageRange images) {
    check_range(images, layer.in, "fully_connected_forward");
    const std::uint64_t in_f = layer.in_features();
    for (std::uint32_t n = images.begin; n < images.end; ++n) {
        const T* xi = x.image(n);
        T* yi = y.image(n);
        for (std::uint32_t o = 0; o < layer.config.out_features; ++o) {
            const T* wo = weight + o * in_f;
            T sum = bias ? bias[o] : T(0);
            for (std::uint64_t i = 0; i < in_f; ++i) sum += wo[i] * xi[i];
            yi[o] = sum;
        }
    }
}

template <class T>
void fully_connected_backward_data(const FullyConnected& layer, TensorView<const T> dy, const T* weight,
                                   TensorView<T> dx, ImageRange images) {
    check_range(images, layer.in, "fully_connected_backward_data");
    const std::uint64_t in_f = layer.in_features();
    for (std::uint32_t n = images.begin; n < images.end; ++n) {
        const T* dyi = dy.image(n);
        T* dxi = dx.image(n);
        std::fill(dxi, dxi + in_f, T(0));
        for (std::uint32_t o = 0; o < layer.config.out_features; ++o) {
            const T* wo = weight + o * in_f;
            const T g = dyi[o];
            for (std::uint64_t i = 0; i < in_f; ++i) dxi[i] += wo[i] * g;
        }
    }
}

template <class T>
void fully_connected_backward_weight(const FullyConnected& layer, TensorView<const T> x, TensorView<const T> dy,
                                     T* dweight, T* dbias) {
    const std::uint64_t in_f = layer.in_features();
    const std::uint32_t out_f = layer.config.out_features;
    std::fill(dweight, dweight + out_f * in_f, T(0));
    if (dbias) std::fill(dbias, dbias + out_f, T(0));
    for (std::uint32_t n = 0; n < layer.in.n; ++n) {
        const T* xi = x.image(n);
        const T* dyi = dy.image(n);
        for (std::uint32_t o = 0; o < out_f; ++o) {
            const T g = dyi[o];
            T* dwo = dweight + o * in_f;
            for (std::uint64_t i = 0; i < in_f; ++i) dwo[i] += g * xi[i];
            if (dbias) dbias[o] += g;
        }
    }
}

#define BRAID_SAMPLES_FC(T)                                                                                         \
    template void fully_connected_forward<T>(const FullyConnected&, TensorView<const T>, const T*, const T*,         \
                                             TensorView<T>, ImageRange);                                             \
    template void fully_connected_backward_data<T>(const FullyConnected&, TensorView<const T>, const T*,             \
                                                   TensorView<T>, ImageRange);                                       \
    template void fully_connected_backward_weight<T>(const FullyConnected&, TensorView<const T>, TensorView<const T>, \
                                                     T*, T*);
BRAID_SAMPLES_FC(float)
BRAID_SAMPLES_FC(double)
#undef BRAID_SAMPLES_FC

}  // namespace braid::samples
