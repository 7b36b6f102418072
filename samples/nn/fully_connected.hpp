// Fully connected (inner product) layer over each image's C*H*W values:
// y[n] = W x[n] + b, W is [out_features][in_features] (PyTorch's layout).
#pragma once

#include <cstdint>
#include <vector>

#include "nn/layer.hpp"

namespace braid::samples {

struct FullyConnectedConfig {
    std::uint32_t out_features = 0;
    bool bias = true;
};

struct FullyConnected {
    FullyConnectedConfig config;
    Shape4 in;
    Shape4 out;  // N x out_features x 1 x 1

    FullyConnected(Shape4 input, FullyConnectedConfig cfg);

    std::uint64_t in_features() const noexcept { return in.image_elements(); }

    LayerKind kind() const noexcept { return LayerKind::fully_connected; }
    std::vector<Shape4> inputs() const { return {in}; }
    Shape4 output() const noexcept { return out; }
    std::vector<ParamSpec> parameters() const;
    std::vector<AuxBufferSpec> aux_buffers() const { return {}; }
    bool has_pass(Pass) const noexcept { return true; }
    bool splittable(Pass p) const noexcept { return p == Pass::forward || p == Pass::backward_data; }
    PassWork work(Pass p) const;
    std::vector<braid::KernelEstimate> kernels(Pass p, const EstimateOptions& options) const;
};

template <class T>
void fully_connected_forward(const FullyConnected& layer, TensorView<const T> x, const T* weight, const T* bias,
                             TensorView<T> y, ImageRange images);
template <class T>
void fully_connected_backward_data(const FullyConnected& layer, TensorView<const T> dy, const T* weight,
                                   TensorView<T> dx, ImageRange images);
template <class T>
void fully_connected_backward_weight(const FullyConnected& layer, TensorView<const T> x, TensorView<const T> dy,
                                     T* dweight, T* dbias);

}  // namespace braid::samples
