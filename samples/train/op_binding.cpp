#include "train/op_binding.hpp"

#include <string>

namespace braid::samples {

namespace {

class Binder {
public:
    Binder(const TrainingGraph& graph, const RootMemory& root, bool channels_last)
        : graph_(graph), root_(root), channels_last_(channels_last) {}

    std::byte* bytes(BufferId b) const {
        const braid::Buffer& buf = graph_.graph.buffer(b);
        return root_(buf.root) + buf.root_offset_bytes;
    }
    template <class T>
    T* data(BufferId b) const {
        return reinterpret_cast<T*>(bytes(b));
    }
    float* ptr(BufferId b) const { return data<float>(b); }
    bound::Out view(BufferId b) const {
        return buffer_view(graph_, b, root_(graph_.graph.buffer(b).root), channels_last_);
    }
    bound::In cview(BufferId b) const { return view(b); }
    // Parameter i of a layer that may have fewer (a bias), or null.
    float* optional(std::size_t i, const std::vector<BufferId>& v) const { return i < v.size() ? ptr(v[i]) : nullptr; }

    bound::Args op(OpId id) const {
        const OpInfo& info = graph_.ops[id];
        switch (info.role) {
            case OpRole::data:
                return bound::Data{view(graph_.images),  data<std::int32_t>(graph_.labels),
                                   data<std::uint64_t>(graph_.step), graph_.seed, graph_.data_batches,
                                   graph_.network.classes()};
            case OpRole::advance_step: return bound::AdvanceStep{data<std::uint64_t>(graph_.step)};
            case OpRole::gradient_sum: {
                const GradientSum& s = graph_.gradient_sums.at(*info.gradient_sum);
                bound::GradientSum out{{}, view(s.total)};
                for (BufferId p : s.partials) out.partials.push_back(cview(p));
                return out;
            }
            case OpRole::update: {  // every tensor of the op's layers, in their order
                bound::Update u{graph_.optimizer, {}};
                for (LayerId l : info.update_layers) {
                    const LayerBuffers& b = graph_.layers[l];
                    const std::vector<ParamSpec> specs = parameters_of(graph_.network.layer(l).spec);
                    for (std::size_t i = 0; i < specs.size(); ++i)
                        u.tensors.push_back({ptr(b.params[i]), ptr(b.param_gradients[i]), ptr(b.momentum[i]),
                                             specs[i].elements(), specs[i].weight_decay});
                }
                return u;
            }
            default: return layer(*info.layer, info.role);
        }
    }

private:
    bound::Args layer(LayerId l, OpRole role) const {
        const LayerSpec& spec = graph_.network.layer(l).spec;
        const LayerBuffers& b = graph_.layers[l];
        // dx of input 0 (the only input whose gradient a backward op writes).
        const auto dx = [&] { return view(b.input_gradients.at(0).value()); };
        const auto dy = [&] { return cview(b.output_gradient.value()); };

        if (const auto* c = std::get_if<Conv2d>(&spec)) {
            if (role == OpRole::forward)
                return bound::ConvForward{*c, cview(b.inputs[0]), ptr(b.params[0]), optional(1, b.params), view(b.output)};
            if (role == OpRole::backward_data) return bound::ConvBackwardData{*c, dy(), ptr(b.params[0]), dx()};
            if (role == OpRole::backward_weight)
                return bound::ConvBackwardWeight{*c, cview(b.inputs[0]), dy(), ptr(b.param_gradients[0]),
                                                 optional(1, b.param_gradients)};
        }
        if (const auto* f = std::get_if<FullyConnected>(&spec)) {
            if (role == OpRole::forward)
                return bound::FcForward{*f, cview(b.inputs[0]), ptr(b.params[0]), optional(1, b.params), view(b.output)};
            if (role == OpRole::backward_data) return bound::FcBackwardData{*f, dy(), ptr(b.params[0]), dx()};
            if (role == OpRole::backward_weight)
                return bound::FcBackwardWeight{*f, cview(b.inputs[0]), dy(), ptr(b.param_gradients[0]),
                                               optional(1, b.param_gradients)};
        }
        if (const auto* n = std::get_if<BatchNorm2d>(&spec)) {
            float* saved_mean = ptr(b.aux[BatchNorm2d::saved_mean]);
            float* saved_inv_std = ptr(b.aux[BatchNorm2d::saved_inv_std]);
            if (role == OpRole::forward)
                return bound::BnForward{*n,
                                        cview(b.inputs[0]),
                                        ptr(b.params[0]),
                                        ptr(b.params[1]),
                                        view(b.output),
                                        saved_mean,
                                        saved_inv_std,
                                        ptr(b.aux[BatchNorm2d::running_mean]),
                                        ptr(b.aux[BatchNorm2d::running_var])};
            const bound::In mask = n->config.relu ? cview(b.output) : bound::In{};
            if (role == OpRole::backward_data) {
                const bool shared = n->config.share_sums;
                return bound::BnBackwardData{*n,           cview(b.inputs[0]),
                                             dy(),         ptr(b.params[0]),
                                             saved_mean,   saved_inv_std,
                                             dx(),         mask,
                                             shared ? ptr(b.param_gradients[0]) : nullptr,
                                             shared ? ptr(b.param_gradients[1]) : nullptr};
            }
            if (role == OpRole::backward_weight)
                return bound::BnBackwardWeight{*n, cview(b.inputs[0]), dy(), saved_mean, saved_inv_std,
                                               ptr(b.param_gradients[0]), ptr(b.param_gradients[1]), mask};
        }
        if (const auto* r = std::get_if<Relu>(&spec)) {
            if (role == OpRole::forward) return bound::ReluForward{*r, cview(b.inputs[0]), view(b.output)};
            if (role == OpRole::backward_data) return bound::ReluBackward{*r, cview(b.output), dy(), dx()};
        }
        if (const auto* p = std::get_if<Pool2d>(&spec)) {
            if (role == OpRole::forward) return bound::PoolForward{*p, cview(b.inputs[0]), view(b.output)};
            if (role == OpRole::backward_data) {
                const bool max = p->config.mode == PoolMode::max;
                return bound::PoolBackward{*p, max ? cview(b.inputs[0]) : bound::In{},
                                           max ? cview(b.output) : bound::In{}, dy(), dx()};
            }
        }
        if (const auto* n = std::get_if<Lrn>(&spec)) {
            if (role == OpRole::forward) return bound::LrnForward{*n, cview(b.inputs[0]), view(b.output)};
            if (role == OpRole::backward_data)
                return bound::LrnBackward{*n, cview(b.inputs[0]), cview(b.output), dy(), dx()};
        }
        if (const auto* d = std::get_if<Dropout>(&spec)) {
            const std::uint64_t* step = data<std::uint64_t>(graph_.step);
            // The masks' stream: the layer's place among the net's dropout
            // layers, which layers without randomness (a ReLU fused away)
            // do not move.
            LayerId stream = 0;
            for (LayerId k = 0; k < l; ++k) stream += std::holds_alternative<Dropout>(graph_.network.layer(k).spec) ? 1 : 0;
            if (role == OpRole::forward)
                return bound::DropoutForward{*d, graph_.seed, stream, step, cview(b.inputs[0]), view(b.output)};
            if (role == OpRole::backward_data)
                return bound::DropoutBackward{*d, graph_.seed, stream, step, dy(), dx()};
        }
        if (const auto* a = std::get_if<Add>(&spec)) {
            if (role == OpRole::forward)
                return bound::AddForward{*a, cview(b.inputs[0]), cview(b.inputs[1]), view(b.output)};
            if (role == OpRole::backward_data) {  // a fused ReLU's: both inputs' gradient is the masked dy
                const auto& g = b.input_gradients;
                const BufferId masked = (g[0] ? g[0] : g.at(1)).value();
                return bound::ReluBackward{Relu(a->in), cview(b.output), dy(), view(masked)};
            }
        }
        if (const auto* s = std::get_if<SoftmaxCrossEntropy>(&spec)) {
            const std::int32_t* labels = data<std::int32_t>(graph_.labels);
            float* per_image = ptr(b.aux[SoftmaxCrossEntropy::per_image_loss]);
            if (role == OpRole::forward)
                return bound::LossForward{*s, cview(b.inputs[0]), labels, view(b.output), per_image};
            if (role == OpRole::loss_sum) return bound::LossSum{*s, per_image, ptr(b.aux[SoftmaxCrossEntropy::loss])};
            if (role == OpRole::backward_data) return bound::LossBackward{*s, cview(b.output), labels, dx()};
        }
        throw braid::GraphError("no op body for the " + std::string(to_string(role)) + " op of layer '" +
                                graph_.network.layer(l).name + "'");
    }

    const TrainingGraph& graph_;
    const RootMemory& root_;
    bool channels_last_;
};

}  // namespace

BoundOp bind_op(const TrainingGraph& graph, OpId op, const RootMemory& root, bool channels_last) {
    if (op >= graph.ops.size())
        throw braid::GraphError("bind_op: op " + std::to_string(op) + " is not in a graph of " +
                                std::to_string(graph.ops.size()) + " ops");
    return BoundOp{op, graph.ops[op].layer, Binder(graph, root, channels_last).op(op)};
}

}  // namespace braid::samples
