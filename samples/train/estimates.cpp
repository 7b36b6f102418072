#include <variant>

#include "nn/gradient_sum.hpp"
#include "nn/launch.hpp"
#include "train/training_graph.hpp"

namespace braid::samples {

namespace {

Pass pass_of(OpRole r) {
    switch (r) {
        case OpRole::backward_data: return Pass::backward_data;
        case OpRole::backward_weight: return Pass::backward_weight;
        case OpRole::update: return Pass::update;
        default: return Pass::forward;
    }
}

}  // namespace

std::vector<braid::OpEstimate> op_estimates(const TrainingGraph& tg, const EstimateOptions& options) {
    std::vector<braid::OpEstimate> out(tg.ops.size());
    const Shape4 images = tg.network.input_shape();
    for (std::size_t i = 0; i < tg.ops.size(); ++i) {
        const OpInfo& info = tg.ops[i];
        braid::OpEstimate& e = out[i];
        switch (info.role) {
            case OpRole::data:
                // ~25 operations per pixel for the hashes and the pattern mix.
                e.kernels = {elementwise_kernel("synthetic_data", images.elements(), 25.0 * static_cast<double>(images.elements()),
                                                float_bytes(images.elements()) + float_bytes(images.n), braid::KernelClass::data)};
                break;
            case OpRole::advance_step: e.kernels = {elementwise_kernel("advance_step", 1, 1.0, 16.0, braid::KernelClass::data)}; break;
            case OpRole::gradient_sum: {
                const GradientSum& s = tg.gradient_sums.at(*info.gradient_sum);
                e.kernels = gradient_sum_kernels(tg.network.tensor(s.tensor).shape, s.partials.size());
                break;
            }
            case OpRole::update: {
                std::vector<std::uint64_t> tensors;
                for (LayerId l : info.update_layers)
                    for (const ParamSpec& p : parameters_of(tg.network.layer(l).spec)) tensors.push_back(p.elements());
                e.kernels = sgd_kernels(tensors);
                break;
            }
            case OpRole::loss_sum:
                e.kernels = std::get<SoftmaxCrossEntropy>(tg.network.layer(*info.layer).spec).loss_sum_kernels();
                break;
            default: e.kernels = kernels_of(tg.network.layer(*info.layer).spec, pass_of(info.role), options); break;
        }
        if (e.kernels.empty())
            throw braid::ModelError("op '" + tg.graph.op(static_cast<OpId>(i)).name + "' has no kernel estimate");
    }
    return out;
}

PlanningModel planning_model(const TrainingGraph& tg, const braid::DeviceSpec& device,
                             const std::optional<braid::Calibration>& calibration, braid::LaunchMode mode) {
    const std::vector<braid::OpEstimate> estimates = op_estimates(tg);
    if (!calibration) return {braid::estimate_costs(device, estimates), {}};
    return {braid::calibrated_costs(device, estimates, *calibration, mode), calibration->sim};
}

}  // namespace braid::samples
