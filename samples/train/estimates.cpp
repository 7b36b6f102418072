#include <array>
#include <variant>

#include <fmt/format.h>

#include "braid/planner/calibrate.hpp"
#include "braid/sim/hardware_queues.hpp"
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
        const std::string& name = tg.graph.op(static_cast<OpId>(i)).name;
        if (e.kernels.empty()) throw braid::ModelError("op '" + name + "' has no kernel estimate");
        // A layer too large for braid's own kernels fails here, naming its op.
        for (const braid::KernelEstimate& k : e.kernels)
            if (const std::string problem = braid::launch_problem(k.shape); !problem.empty())
                throw braid::ModelError("op '" + name + "': kernel '" + k.shape.name + "': " + problem +
                                        "; the layer is too large for braid's kernels");
    }
    return out;
}

PlanningModel planning_model(const TrainingGraph& tg, const braid::DeviceSpec& device,
                             const std::optional<braid::Calibration>& calibration, braid::LaunchMode mode,
                             std::span<const braid::ConvEngineFamily> engines,
                             std::optional<int> eager_hardware_queues) {
    std::vector<braid::OpEstimate> estimates = op_estimates(tg);
    if (!engines.empty()) braid::engine_families_from_choices(estimates, engines);
    if (!calibration)
        return {braid::estimate_costs(device, estimates), braid::sim::with_eager_hardware_queues({}, eager_hardware_queues)};
    return {braid::calibrated_costs(device, estimates, *calibration, mode),
            braid::sim::with_eager_hardware_queues(calibration->sim, eager_hardware_queues)};
}

bool runs_conv_pass(const TrainingGraph& tg, std::size_t op) {
    const OpInfo& info = tg.ops.at(op);
    const bool pass =
        info.role == OpRole::forward || info.role == OpRole::backward_data || info.role == OpRole::backward_weight;
    return pass && info.layer && std::holds_alternative<Conv2d>(tg.network.layer(*info.layer).spec);
}

std::string describe_conv_engines(const TrainingGraph& tg, std::span<const braid::ConvEngineFamily> engines) {
    std::array<std::size_t, braid::engine_family_count> count{};
    std::size_t passes = 0, unknown = 0;
    for (std::size_t i = 0; i < tg.ops.size(); ++i) {
        if (!runs_conv_pass(tg, i)) continue;
        ++passes;
        const braid::ConvEngineFamily f = i < engines.size() ? engines[i] : braid::ConvEngineFamily::other;
        ++(f == braid::ConvEngineFamily::other ? unknown : count[braid::index_of(f)]);
    }
    std::string out = fmt::format("{} of {} convolution passes named", passes - unknown, passes);
    const char* sep = ": ";
    for (braid::ConvEngineFamily f : braid::all_engine_families) {
        if (count[braid::index_of(f)] == 0) continue;
        out += fmt::format("{}{} {}", sep, braid::to_string(f), count[braid::index_of(f)]);
        sep = ", ";
    }
    return out;
}

}  // namespace braid::samples
