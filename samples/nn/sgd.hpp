// SGD with momentum and L2 weight decay, PyTorch's formulation:
//   g = grad + weight_decay * param   (decayed tensors only)
//   v = momentum * v + g
//   param = param - learning_rate * v
#pragma once

#include <cstdint>
#include <vector>

#include "nn/layer.hpp"

namespace braid::samples {

struct SgdConfig {
    float learning_rate = 0.01f;
    float momentum = 0.9f;
    float weight_decay = 5e-4f;
};

// One parameter tensor of an update, in the backend's memory (host or device).
struct SgdTensorRef {
    float* param = nullptr;
    const float* grad = nullptr;
    float* momentum = nullptr;
    std::uint64_t elements = 0;
    bool decay = false;
};

template <class T>
void sgd_momentum_update(const SgdConfig& config, T* param, const T* grad, T* velocity, std::uint64_t elements,
                         bool decay);

// One update op covers all the parameter tensors of a layer, or of a bucket
// of layers (NetConfig::update_bucket_bytes), with multi-tensor kernels as
// fused optimizers launch them: up to sgd_tensors_per_launch tensors a
// launch. Reads param, grad, velocity; writes param, velocity.
inline constexpr std::uint32_t sgd_tensors_per_launch = 64;
PassWork sgd_work(std::uint64_t parameters);
std::vector<braid::KernelEstimate> sgd_kernels(std::uint64_t parameters);
// The kernels of one update over tensors of these element counts: one per
// launch of up to sgd_tensors_per_launch of them.
std::vector<braid::KernelEstimate> sgd_kernels(const std::vector<std::uint64_t>& tensor_elements);

}  // namespace braid::samples
