#include "nets/network.hpp"

#include <set>

namespace braid::samples {

LayerId Network::layer_id(std::string_view name) const {
    if (auto id = find_layer(name)) return *id;
    throw ShapeError("network '" + name_ + "' has no layer named '" + std::string(name) + "'");
}

std::optional<LayerId> Network::find_layer(std::string_view name) const {
    for (LayerId i = 0; i < layers_.size(); ++i)
        if (layers_[i].name == name) return i;
    return std::nullopt;
}

std::vector<LayerId> Network::loss_layers() const {
    std::vector<LayerId> out;
    for (LayerId i = 0; i < layers_.size(); ++i)
        if (kind_of(layers_[i].spec) == LayerKind::softmax_loss) out.push_back(i);
    return out;
}

std::uint64_t Network::parameter_count() const {
    std::uint64_t n = 0;
    for (const LayerNode& l : layers_) n += braid::samples::parameter_count(l.spec);
    return n;
}

NetworkBuilder::NetworkBuilder(std::string network_name, Shape4 images) {
    net_.name_ = std::move(network_name);
    if (images.n == 0) throw ShapeError("network '" + net_.name_ + "': the batch must hold at least one image");
    if (images.c == 0 || images.h == 0 || images.w == 0)
        throw ShapeError("network '" + net_.name_ + "': empty images " + to_string(images));
    net_.tensors_.push_back(TensorInfo{"data", images, std::nullopt, {}});
}

void NetworkBuilder::fail(const std::string& layer, const std::string& why) const {
    throw ShapeError("network '" + net_.name_ + "', layer '" + layer + "': " + why);
}

template <class Make>
TensorId NetworkBuilder::add_layer(std::string name, std::vector<TensorId> inputs, Make make_spec) {
    if (name.empty()) fail("#" + std::to_string(net_.layers_.size()), "a layer needs a name");
    for (const TensorInfo& t : net_.tensors_)
        if (t.name == name) fail(name, "the name is already taken");
    std::vector<Shape4> shapes;
    for (TensorId t : inputs) {
        if (t >= net_.tensors_.size()) fail(name, "reads unknown tensor #" + std::to_string(t));
        shapes.push_back(net_.tensors_[t].shape);
    }
    std::optional<LayerSpec> spec;
    try {
        spec.emplace(make_spec(shapes));
    } catch (const ShapeError& e) {
        fail(name, e.what());
    }
    const LayerId id = static_cast<LayerId>(net_.layers_.size());
    const TensorId out = static_cast<TensorId>(net_.tensors_.size());
    for (std::uint32_t slot = 0; slot < inputs.size(); ++slot)
        net_.tensors_[inputs[slot]].consumers.push_back(Consumer{id, slot});
    net_.tensors_.push_back(TensorInfo{name, output_of(*spec), id, {}});
    net_.layers_.push_back(LayerNode{std::move(name), std::move(*spec), std::move(inputs), out});
    return out;
}

TensorId NetworkBuilder::conv(std::string name, TensorId x, ConvConfig config) {
    return add_layer(std::move(name), {x}, [&](const std::vector<Shape4>& s) { return Conv2d(s[0], config); });
}
TensorId NetworkBuilder::batch_norm(std::string name, TensorId x, BatchNormConfig config) {
    config.share_sums = config.share_sums || share_batch_norm_sums_;
    return add_layer(std::move(name), {x}, [&](const std::vector<Shape4>& s) { return BatchNorm2d(s[0], config); });
}
TensorId NetworkBuilder::relu(std::string name, TensorId x) {
    if (fuse_relu_ && x < net_.tensors_.size() && net_.tensors_[x].consumers.empty() &&
        net_.tensors_[x].producer) {
        LayerSpec& producer = net_.layers_[*net_.tensors_[x].producer].spec;
        if (auto* bn = std::get_if<BatchNorm2d>(&producer); bn && !bn->config.relu) {
            bn->config.relu = true;
            return x;
        }
        if (auto* sum = std::get_if<Add>(&producer); sum && !sum->relu) {
            sum->relu = true;
            return x;
        }
    }
    return add_layer(std::move(name), {x}, [&](const std::vector<Shape4>& s) { return Relu(s[0]); });
}
TensorId NetworkBuilder::pool(std::string name, TensorId x, PoolConfig config) {
    return add_layer(std::move(name), {x}, [&](const std::vector<Shape4>& s) { return Pool2d(s[0], config); });
}
TensorId NetworkBuilder::lrn(std::string name, TensorId x, LrnConfig config) {
    return add_layer(std::move(name), {x}, [&](const std::vector<Shape4>& s) { return Lrn(s[0], config); });
}
TensorId NetworkBuilder::concat(std::string name, std::vector<TensorId> xs) {
    return add_layer(std::move(name), std::move(xs), [&](const std::vector<Shape4>& s) { return Concat(s); });
}
TensorId NetworkBuilder::fully_connected(std::string name, TensorId x, FullyConnectedConfig config) {
    return add_layer(std::move(name), {x}, [&](const std::vector<Shape4>& s) { return FullyConnected(s[0], config); });
}
TensorId NetworkBuilder::dropout(std::string name, TensorId x, DropoutConfig config) {
    return add_layer(std::move(name), {x}, [&](const std::vector<Shape4>& s) { return Dropout(s[0], config); });
}
TensorId NetworkBuilder::add(std::string name, TensorId a, TensorId b) {
    return add_layer(std::move(name), {a, b}, [&](const std::vector<Shape4>& s) { return Add(s[0], s[1]); });
}
TensorId NetworkBuilder::softmax_loss(std::string name, TensorId logits, SoftmaxLossConfig config) {
    return add_layer(std::move(name), {logits},
                     [&](const std::vector<Shape4>& s) { return SoftmaxCrossEntropy(s[0], config); });
}

Network NetworkBuilder::finish() {
    const std::vector<LayerId> losses = net_.loss_layers();
    if (losses.empty()) throw ShapeError("network '" + net_.name_ + "' has no softmax loss layer to train against");
    net_.classes_ = std::get<SoftmaxCrossEntropy>(net_.layers_[losses.front()].spec).classes();
    for (LayerId l : losses) {
        const auto& loss = std::get<SoftmaxCrossEntropy>(net_.layers_[l].spec);
        if (loss.classes() != net_.classes_)
            fail(net_.layers_[l].name, "has " + std::to_string(loss.classes()) + " classes but '" +
                                           net_.layers_[losses.front()].name + "' has " +
                                           std::to_string(net_.classes_) + "; the heads share one set of labels");
    }
    // A concat input becomes a channel slice of the concat output, so only
    // the concat may read it, and it must be a plain layer output.
    for (const LayerNode& l : net_.layers_) {
        if (kind_of(l.spec) != LayerKind::concat) continue;
        std::set<TensorId> seen;
        for (TensorId t : l.inputs) {
            const TensorInfo& info = net_.tensors_[t];
            if (!seen.insert(t).second) fail(l.name, "reads tensor '" + info.name + "' twice");
            if (!info.producer) fail(l.name, "reads the images; concat inputs must be layer outputs");
            if (info.consumers.size() != 1)
                fail(l.name, "input '" + info.name +
                                 "' is also read by other layers; it must be a view of the concat output alone");
            if (kind_of(net_.layers_[*info.producer].spec) == LayerKind::concat)
                fail(l.name, "input '" + info.name + "' is itself a concat output; nested concats are not supported");
        }
    }
    return std::move(net_);
}

}  // namespace braid::samples
