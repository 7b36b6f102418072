#include "nn/sgd.hpp"

#include <algorithm>

#include "nn/launch.hpp"

namespace braid::samples {

template <class T>
void sgd_momentum_update(const SgdConfig& config, T* param, const T* grad, T* velocity, std::uint64_t elements,
                         bool decay) {
    const T lr = static_cast<T>(config.learning_rate), mu = static_cast<T>(config.momentum),
            wd = static_cast<T>(config.weight_decay);
    for (std::uint64_t i = 0; i < elements; ++i) {
        T g = grad[i];
        if (decay) g = g + wd * param[i];
        velocity[i] = mu * velocity[i] + g;
        param[i] = param[i] - lr * velocity[i];
    }
}

PassWork sgd_work(std::uint64_t parameters) {
    return PassWork{5.0 * static_cast<double>(parameters), float_bytes(parameters) * 5.0};
}

std::vector<braid::KernelEstimate> sgd_kernels(std::uint64_t parameters) {
    const PassWork w = sgd_work(parameters);
    return {elementwise_kernel("sgd_momentum_update", parameters, w.flops, w.dram_bytes, braid::KernelClass::optimizer)};
}

std::vector<braid::KernelEstimate> sgd_kernels(const std::vector<std::uint64_t>& tensor_elements) {
    std::vector<braid::KernelEstimate> out;
    for (std::size_t first = 0; first < tensor_elements.size(); first += sgd_tensors_per_launch) {
        std::uint64_t parameters = 0;
        for (std::size_t k = first; k < std::min(tensor_elements.size(), first + sgd_tensors_per_launch); ++k)
            parameters += tensor_elements[k];
        out.push_back(sgd_kernels(parameters).front());
    }
    return out;
}

template void sgd_momentum_update<float>(const SgdConfig&, float*, const float*, float*, std::uint64_t, bool);
template void sgd_momentum_update<double>(const SgdConfig&, double*, const double*, double*, std::uint64_t, bool);

}  // namespace braid::samples
