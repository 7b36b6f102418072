#include "train/training_graph.hpp"

#include <algorithm>
#include <map>
#include <utility>

namespace braid::samples {

std::string_view to_string(OpRole r) noexcept {
    switch (r) {
        case OpRole::data: return "data";
        case OpRole::forward: return "forward";
        case OpRole::loss_sum: return "loss_sum";
        case OpRole::backward_data: return "backward_data";
        case OpRole::backward_weight: return "backward_weight";
        case OpRole::update: return "update";
        case OpRole::gradient_sum: return "gradient_sum";
        case OpRole::advance_step: return "advance_step";
    }
    return "?";
}

std::uint64_t TrainingGraph::allocated_bytes() const {
    std::uint64_t total = 0;
    for (const braid::Buffer& b : graph.buffers())
        if (!b.parent) total += b.bytes;
    return total;
}

std::uint64_t image_stride(const TrainingGraph& tg, BufferId buffer) {
    const braid::Buffer& b = tg.graph.buffer(buffer);
    const BufferInfo& info = tg.buffers.at(buffer);
    if (info.element != ElementType::f32)
        throw braid::GraphError("buffer '" + b.name + "' does not hold floats");
    return b.chunks > 1 ? b.stride_bytes / sizeof(float) : info.shape.image_elements();
}

TensorView<float> tensor_view(const TrainingGraph& tg, BufferId buffer, std::byte* root_base) {
    const std::uint64_t stride = image_stride(tg, buffer);
    return TensorView<float>{reinterpret_cast<float*>(root_base + tg.graph.buffer(buffer).root_offset_bytes),
                             tg.buffers.at(buffer).shape, stride};
}

TensorView<float> channels_last_view(const TrainingGraph& tg, BufferId buffer, std::byte* root_base) {
    TensorView<float> v = tensor_view(tg, buffer, root_base);
    const braid::Buffer& b = tg.graph.buffer(buffer);
    if (!b.parent) return v;
    const braid::Buffer& whole = tg.graph.buffer(*b.parent);
    const Shape4& all = tg.buffers.at(*b.parent).shape;
    const std::uint64_t plane = v.shape.plane_elements();
    const std::uint64_t first = b.offset_bytes / sizeof(float);  // channel c0's plane of image 0 in NCHW terms
    if (whole.parent || all.plane_elements() != plane || plane == 0 || b.offset_bytes % sizeof(float) != 0 ||
        first % plane != 0 || first / plane + v.shape.c > all.c)
        throw braid::GraphError("buffer '" + b.name + "' is not a channel slice of '" + whole.name +
                                "', so it has no NHWC view");
    v.data = reinterpret_cast<float*>(root_base + whole.root_offset_bytes) + first / plane;
    v.image_stride = all.image_elements();
    v.pixel_stride = all.c;
    return v;
}

TensorView<float> buffer_view(const TrainingGraph& tg, BufferId buffer, std::byte* root_base, bool channels_last) {
    return channels_last ? channels_last_view(tg, buffer, root_base) : tensor_view(tg, buffer, root_base);
}

OpId TrainingGraph::op(LayerId layer, OpRole role) const {
    const LayerOps& o = layer_ops.at(layer);
    std::optional<OpId> id;
    switch (role) {
        case OpRole::forward: id = o.forward; break;
        case OpRole::loss_sum: id = o.loss_sum; break;
        case OpRole::backward_data: id = o.backward_data; break;
        case OpRole::backward_weight: id = o.backward_weight; break;
        case OpRole::update: id = o.update; break;
        default: break;
    }
    if (!id)
        throw braid::GraphError("layer '" + network.layer(layer).name + "' has no " + std::string(to_string(role)) +
                                " op");
    return *id;
}

namespace {

braid::OpKind op_kind(OpRole r) {
    switch (r) {
        case OpRole::forward:
        case OpRole::loss_sum: return braid::OpKind::forward;
        case OpRole::backward_data:
        case OpRole::gradient_sum: return braid::OpKind::backward_data;
        case OpRole::backward_weight: return braid::OpKind::backward_weight;
        case OpRole::update: return braid::OpKind::update;
        case OpRole::data:
        case OpRole::advance_step: return braid::OpKind::other;
    }
    return braid::OpKind::other;
}

std::uint64_t element_bytes(ElementType e) { return e == ElementType::u64 ? 8 : 4; }

class Assembler {
public:
    Assembler(Network net, const SgdConfig& optimizer, std::uint64_t seed, std::uint64_t data_batches,
              std::uint64_t update_bucket_bytes)
        : net_(std::move(net)),
          optimizer_(optimizer),
          seed_(seed),
          data_batches_(data_batches),
          update_bucket_bytes_(update_bucket_bytes) {}

    TrainingGraph run() {
        const std::size_t layer_count = net_.layers().size();
        layers_.resize(layer_count);
        layer_ops_.resize(layer_count);
        tensors_.resize(net_.tensors().size());
        add_input_buffers();
        add_value_buffers();
        add_layer_buffers();
        add_gradient_buffers();
        add_ops();
        return TrainingGraph{g_.finalize(), std::move(net_), optimizer_, seed_, data_batches_, std::move(ops_),
                             std::move(buffers_), std::move(layers_), std::move(layer_ops_), std::move(tensors_),
                             std::move(sums_),    images_,         labels_,    step_};
    }

private:
    BufferId root(const std::string& name, BufferInfo info) {
        const BufferId id = g_.add_buffer(name, info.shape.elements() * element_bytes(info.element));
        buffers_.push_back(info);
        return id;
    }

    void add_input_buffers() {
        const Shape4 images = net_.input_shape();
        images_ = root("data", {BufferRole::input, ElementType::f32, images, std::nullopt, net_.images()});
        tensors_[net_.images()].value = images_;
        labels_ = root("labels", {BufferRole::input, ElementType::i32, vector_shape(images.n), std::nullopt, std::nullopt});
        step_ = root("step", {BufferRole::state, ElementType::u64, vector_shape(1), std::nullopt, std::nullopt});
    }

    // The concat layer and input slot reading tensor t, when a concat does.
    std::optional<Consumer> concat_reader(TensorId t) const {
        for (const Consumer& c : net_.tensor(t).consumers)
            if (kind_of(net_.layer(c.layer).spec) == LayerKind::concat) return c;
        return std::nullopt;
    }

    // A branch output is the channel slice of its concat's buffer: one chunk
    // of C_branch * H * W floats per image, C_concat * H * W floats apart.
    BufferId slice_view(const std::string& name, BufferId concat_buffer, const Consumer& reader, BufferInfo info) {
        const auto& concat = std::get<Concat>(net_.layer(reader.layer).spec);
        const Shape4 whole = concat.out, part = concat.in[reader.slot];
        const std::uint64_t offset = std::uint64_t{concat.channel_offsets[reader.slot]} * whole.plane_elements() * 4;
        const BufferId id =
            g_.add_strided_view(name, concat_buffer, offset, part.image_elements() * 4, whole.image_elements() * 4, whole.n);
        buffers_.push_back(info);
        return id;
    }

    BufferId value_of(TensorId t) {
        if (value_made_[t]) return tensors_[t].value;
        const TensorInfo& info = net_.tensor(t);
        const BufferInfo meta{BufferRole::activation, ElementType::f32, info.shape, std::nullopt, t};
        BufferId id;
        if (auto reader = concat_reader(t))
            id = slice_view(info.name, value_of(net_.layer(reader->layer).output), *reader, meta);
        else
            id = root(info.name, meta);
        value_made_[t] = true;
        tensors_[t].value = id;
        return id;
    }

    void add_value_buffers() {
        value_made_.assign(net_.tensors().size(), false);
        value_made_[net_.images()] = true;
        for (TensorId t = 1; t < net_.tensors().size(); ++t) (void)value_of(t);
        for (LayerId l = 0; l < net_.layers().size(); ++l) {
            const LayerNode& node = net_.layer(l);
            for (TensorId t : node.inputs) layers_[l].inputs.push_back(tensors_[t].value);
            layers_[l].output = tensors_[node.output].value;
        }
    }

    void add_layer_buffers() {
        for (LayerId l = 0; l < net_.layers().size(); ++l) {
            const LayerNode& node = net_.layer(l);
            LayerBuffers& lb = layers_[l];
            for (const ParamSpec& p : parameters_of(node.spec)) {
                const std::string base = node.name + "." + p.name;
                lb.params.push_back(root(base, {BufferRole::parameter, ElementType::f32, p.shape, l, std::nullopt}));
                lb.param_gradients.push_back(
                    root(base + ".grad", {BufferRole::gradient, ElementType::f32, p.shape, l, std::nullopt}));
                lb.momentum.push_back(
                    root(base + ".momentum", {BufferRole::state, ElementType::f32, p.shape, l, std::nullopt}));
            }
            for (const AuxBufferSpec& a : aux_buffers_of(node.spec))
                lb.aux.push_back(root(node.name + "." + a.name, {a.role, ElementType::f32, a.shape, l, std::nullopt}));
        }
    }

    // Whether layer `l` produces a gradient for its inputs at all.
    bool sends_gradient(LayerId l) const {
        const LayerNode& node = net_.layer(l);
        const LayerKind k = kind_of(node.spec);
        if (k == LayerKind::softmax_loss) return true;  // the source of all gradients
        if (k == LayerKind::concat) return false;       // slices, handled by the views
        if (!tensors_[node.output].gradient) return false;
        return k == LayerKind::add || has_pass(node.spec, Pass::backward_data);
    }

    // Walk tensors from the last to the first: every consumer of a tensor
    // comes later, so its output gradient is known when the tensor's is made.
    void add_gradient_buffers() {
        for (LayerId l = 0; l < net_.layers().size(); ++l)
            layers_[l].input_gradients.assign(net_.layer(l).inputs.size(), std::nullopt);
        for (TensorId t = static_cast<TensorId>(net_.tensors().size()); t-- > 1;) {
            const TensorInfo& info = net_.tensor(t);
            const BufferInfo meta{BufferRole::gradient, ElementType::f32, info.shape, std::nullopt, t};
            if (auto reader = concat_reader(t)) {
                const auto& total = tensors_[net_.layer(reader->layer).output].gradient;
                if (total) tensors_[t].gradient = slice_view(info.name + ".grad", *total, *reader, meta);
                continue;
            }
            std::vector<Consumer> senders;
            for (const Consumer& c : info.consumers)
                if (sends_gradient(c.layer)) senders.push_back(c);
            if (senders.empty()) continue;
            auto alias_of = [&](const Consumer& c) -> std::optional<BufferId> {
                const auto* sum = std::get_if<Add>(&net_.layer(c.layer).spec);
                if (!sum) return std::nullopt;
                if (!sum->relu) return tensors_[net_.layer(c.layer).output].gradient;  // identity backward
                // A fused ReLU masks dy into one buffer, both inputs' gradient.
                const BufferId masked = masked_gradient(c.layer);
                layers_[c.layer].input_gradients[c.slot] = masked;
                return masked;
            };
            if (senders.size() == 1) {
                if (auto alias = alias_of(senders[0])) {
                    tensors_[t].gradient = *alias;
                } else {
                    const BufferId grad = root(info.name + ".grad", meta);
                    tensors_[t].gradient = grad;
                    layers_[senders[0].layer].input_gradients[senders[0].slot] = grad;
                }
                continue;
            }
            GradientSum sum;
            sum.tensor = t;
            sum.total = root(info.name + ".grad", meta);
            tensors_[t].gradient = sum.total;
            std::map<LayerId, int> reads;
            for (const Consumer& c : senders) ++reads[c.layer];
            for (const Consumer& c : senders) {
                if (auto alias = alias_of(c)) {
                    sum.partials.push_back(*alias);
                    continue;
                }
                std::string name = info.name + ".grad." + net_.layer(c.layer).name;
                if (reads[c.layer] > 1) name += "#" + std::to_string(c.slot);
                const BufferId partial = root(name, meta);
                layers_[c.layer].input_gradients[c.slot] = partial;
                sum.partials.push_back(partial);
            }
            sum_of_tensor_[t] = static_cast<std::uint32_t>(sums_.size());
            sums_.push_back(std::move(sum));
        }
        for (LayerId l = 0; l < net_.layers().size(); ++l)
            layers_[l].output_gradient = tensors_[net_.layer(l).output].gradient;
    }

    // The gradient of a fused add's sum before its ReLU, made on first use.
    BufferId masked_gradient(LayerId add) {
        if (auto it = masked_.find(add); it != masked_.end()) return it->second;
        const LayerNode& node = net_.layer(add);
        const BufferInfo meta{BufferRole::gradient, ElementType::f32, net_.tensor(node.output).shape, std::nullopt,
                              std::nullopt};
        return masked_[add] = root(node.name + ".pre_relu.grad", meta);
    }

    OpId add_op(std::string name, OpRole role, std::optional<LayerId> layer, std::vector<BufferId> reads,
                std::vector<BufferId> writes, bool split, std::optional<std::uint32_t> sum = std::nullopt) {
        braid::OpSpec spec;
        spec.name = std::move(name);
        spec.kind = op_kind(role);
        spec.layer = layer ? net_.layer(*layer).name : std::string();
        spec.reads = std::move(reads);
        spec.writes = std::move(writes);
        spec.split_batch = split ? net_.batch() : 0;
        const OpId id = g_.add_op(std::move(spec));
        ops_.push_back(OpInfo{role, layer, sum});
        return id;
    }

    void add_forward(LayerId l) {
        const LayerNode& node = net_.layer(l);
        const LayerBuffers& b = layers_[l];
        const std::string& n = node.name;
        const bool split = splittable(node.spec, Pass::forward);
        std::vector<BufferId> reads = b.inputs, writes{b.output};
        switch (kind_of(node.spec)) {
            case LayerKind::concat: return;  // the inputs are slices of the output already
            case LayerKind::conv:
            case LayerKind::fully_connected:
                reads.insert(reads.end(), b.params.begin(), b.params.end());
                break;
            case LayerKind::batch_norm:
                reads.insert(reads.end(), b.params.begin(), b.params.end());
                reads.push_back(b.aux[BatchNorm2d::running_mean]);
                reads.push_back(b.aux[BatchNorm2d::running_var]);
                writes.insert(writes.end(), b.aux.begin(), b.aux.end());
                break;
            case LayerKind::dropout: reads.push_back(step_); break;
            case LayerKind::softmax_loss: {
                reads.push_back(labels_);
                writes.push_back(b.aux[SoftmaxCrossEntropy::per_image_loss]);
                layer_ops_[l].forward = add_op(n + ".forward", OpRole::forward, l, reads, writes, split);
                layer_ops_[l].loss_sum = add_op(n + ".loss_sum", OpRole::loss_sum, l,
                                                {b.aux[SoftmaxCrossEntropy::per_image_loss]},
                                                {b.aux[SoftmaxCrossEntropy::loss]}, false);
                return;
            }
            default: break;
        }
        layer_ops_[l].forward = add_op(n + ".forward", OpRole::forward, l, reads, writes, split);
    }

    void add_backward(LayerId l) {
        const LayerNode& node = net_.layer(l);
        const LayerBuffers& b = layers_[l];
        const std::string& n = node.name;
        const LayerKind kind = kind_of(node.spec);
        if (auto it = sum_of_tensor_.find(node.output); it != sum_of_tensor_.end()) {
            const GradientSum& s = sums_[it->second];
            add_op(net_.tensor(s.tensor).name + ".gradient_sum", OpRole::gradient_sum, l, s.partials, {s.total},
                   true, it->second);
        }
        if (kind == LayerKind::concat) return;  // views: no backward op
        if (kind == LayerKind::add) {            // aliases: none either, but a fused ReLU's mask
            if (auto it = masked_.find(l); it != masked_.end() && b.output_gradient)
                layer_ops_[l].backward_data = add_op(n + ".backward_data", OpRole::backward_data, l,
                                                     {b.output, *b.output_gradient}, {it->second}, true);
            return;
        }
        const bool has_dy = b.output_gradient.has_value() || kind == LayerKind::softmax_loss;
        if (!has_dy) return;

        std::vector<BufferId> dx;
        for (const auto& g : b.input_gradients)
            if (g) dx.push_back(*g);
        // A batch norm with shared sums writes its weight gradient in its
        // backward_data op and has no backward_weight op (but when it sends
        // no gradient, as any layer).
        const auto* bn = std::get_if<BatchNorm2d>(&node.spec);
        const bool one_op = bn && bn->config.share_sums && !dx.empty() && has_weight_gradient(l);
        if (!dx.empty()) {
            std::vector<BufferId> reads;
            const BufferId dy = b.output_gradient.value_or(0);
            switch (kind) {
                case LayerKind::conv:
                case LayerKind::fully_connected: reads = {dy, b.params[0]}; break;
                case LayerKind::batch_norm:
                    reads = {b.inputs[0], dy, b.params[0], b.aux[BatchNorm2d::saved_mean],
                             b.aux[BatchNorm2d::saved_inv_std]};
                    if (std::get<BatchNorm2d>(node.spec).config.relu) reads.push_back(b.output);  // the ReLU's mask
                    if (one_op) dx.insert(dx.end(), b.param_gradients.begin(), b.param_gradients.end());
                    break;
                case LayerKind::relu: reads = {b.output, dy}; break;
                case LayerKind::max_pool:
                case LayerKind::lrn: reads = {b.inputs[0], b.output, dy}; break;
                case LayerKind::avg_pool: reads = {dy}; break;
                case LayerKind::dropout: reads = {dy, step_}; break;
                case LayerKind::softmax_loss: reads = {b.output, labels_}; break;
                default: break;
            }
            layer_ops_[l].backward_data = add_op(n + ".backward_data", OpRole::backward_data, l, reads, dx,
                                                 splittable(node.spec, Pass::backward_data));
        }
        if (!one_op) add_backward_weight(l);
        add_update(l);
    }

    bool has_weight_gradient(LayerId l) const { return !layers_[l].params.empty() && layers_[l].output_gradient; }

    void add_backward_weight(LayerId l) {
        if (!has_weight_gradient(l)) return;
        const LayerNode& node = net_.layer(l);
        const LayerBuffers& b = layers_[l];
        const std::string& n = node.name;
        std::vector<BufferId> reads{b.inputs[0], *b.output_gradient};
        if (kind_of(node.spec) == LayerKind::batch_norm) {
            reads.push_back(b.aux[BatchNorm2d::saved_mean]);
            reads.push_back(b.aux[BatchNorm2d::saved_inv_std]);
            if (std::get<BatchNorm2d>(node.spec).config.relu) reads.push_back(b.output);
        }
        layer_ops_[l].backward_weight =
            add_op(n + ".backward_weight", OpRole::backward_weight, l, reads, b.param_gradients, false);
    }

    // Layer l's parameters join the open update bucket; the bucket becomes
    // one update op once it holds update_bucket_bytes_ (at once when 0).
    void add_update(LayerId l) {
        if (!has_weight_gradient(l)) return;
        bucket_.push_back(l);
        for (BufferId p : layers_[l].params) bucket_bytes_ += g_.buffer(p).bytes;
        if (bucket_bytes_ >= update_bucket_bytes_) flush_updates();
    }

    // One update op over the open bucket's layers: "<layer>.update" for one,
    // "<first>..<last>.update" (backward order) for several.
    void flush_updates() {
        if (bucket_.empty()) return;
        std::vector<BufferId> reads, writes;
        for (LayerId l : bucket_) {
            const LayerBuffers& b = layers_[l];
            reads.insert(reads.end(), b.params.begin(), b.params.end());
            reads.insert(reads.end(), b.param_gradients.begin(), b.param_gradients.end());
            reads.insert(reads.end(), b.momentum.begin(), b.momentum.end());
            writes.insert(writes.end(), b.params.begin(), b.params.end());
            writes.insert(writes.end(), b.momentum.begin(), b.momentum.end());
        }
        std::string name = net_.layer(bucket_.front()).name;
        if (bucket_.size() > 1) name += ".." + net_.layer(bucket_.back()).name;
        const OpId id = add_op(name + ".update", OpRole::update, bucket_.front(), reads, writes, false);
        ops_.back().update_layers = bucket_;
        for (LayerId l : bucket_) layer_ops_[l].update = id;
        bucket_.clear();
        bucket_bytes_ = 0;
    }

    void add_ops() {
        add_op("data", OpRole::data, std::nullopt, {step_}, {images_, labels_}, true);
        for (LayerId l = 0; l < net_.layers().size(); ++l) add_forward(l);
        for (LayerId l = static_cast<LayerId>(net_.layers().size()); l-- > 0;) add_backward(l);
        flush_updates();
        add_op("step.advance", OpRole::advance_step, std::nullopt, {step_}, {step_}, false);
    }

    Network net_;
    SgdConfig optimizer_;
    std::uint64_t seed_;
    std::uint64_t data_batches_;
    braid::OpGraphBuilder g_;
    std::vector<OpInfo> ops_;
    std::vector<BufferInfo> buffers_;
    std::vector<LayerBuffers> layers_;
    std::vector<LayerOps> layer_ops_;
    std::vector<TensorBuffers> tensors_;
    std::vector<GradientSum> sums_;
    std::map<TensorId, std::uint32_t> sum_of_tensor_;
    std::map<LayerId, BufferId> masked_;  // fused adds: the gradient before the ReLU
    std::uint64_t update_bucket_bytes_ = 0;
    std::vector<LayerId> bucket_;  // layers whose update op is not made yet, in backward order
    std::uint64_t bucket_bytes_ = 0;
    std::vector<bool> value_made_;  // by TensorId
    BufferId images_ = 0, labels_ = 0, step_ = 0;
};

}  // namespace

TrainingGraph build_training_graph(Network network, const SgdConfig& optimizer, std::uint64_t seed,
                                   std::uint64_t data_batches, std::uint64_t update_bucket_bytes) {
    return Assembler(std::move(network), optimizer, seed, data_batches, update_bucket_bytes).run();
}

TrainingGraph build_training_graph(const TrainConfig& config) {
    return build_training_graph(make_network(config.model), config.optimizer, config.seed, config.data_batches,
                                config.model.update_bucket_bytes);
}

}  // namespace braid::samples
