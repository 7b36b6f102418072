// A network as the training step sees it: named tensors (NCHW activations)
// and layers in program order, each reading tensors and producing one.
// Built with NetworkBuilder, then immutable. The first tensor is the images.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nn/layers.hpp"

namespace braid::samples {

using TensorId = std::uint32_t;
using LayerId = std::uint32_t;

struct Consumer {
    LayerId layer = 0;
    std::uint32_t slot = 0;  // which of the layer's inputs
};

struct TensorInfo {
    std::string name;
    Shape4 shape;
    std::optional<LayerId> producer;  // none for the images
    std::vector<Consumer> consumers;  // in program order
};

struct LayerNode {
    std::string name;
    LayerSpec spec;
    std::vector<TensorId> inputs;
    TensorId output = 0;  // named like the layer
};

class Network {
public:
    const std::string& name() const noexcept { return name_; }
    TensorId images() const noexcept { return 0; }
    Shape4 input_shape() const { return tensors_.front().shape; }
    std::uint32_t batch() const { return input_shape().n; }
    std::uint32_t classes() const noexcept { return classes_; }

    std::span<const LayerNode> layers() const noexcept { return layers_; }
    std::span<const TensorInfo> tensors() const noexcept { return tensors_; }
    const LayerNode& layer(LayerId id) const { return layers_.at(id); }
    const TensorInfo& tensor(TensorId id) const { return tensors_.at(id); }
    // Throws ShapeError naming the network and `name` when there is none.
    LayerId layer_id(std::string_view name) const;
    std::optional<LayerId> find_layer(std::string_view name) const;
    // The softmax-loss layers, in program order.
    std::vector<LayerId> loss_layers() const;
    std::uint64_t parameter_count() const;

private:
    friend class NetworkBuilder;
    std::string name_;
    std::uint32_t classes_ = 0;
    std::vector<TensorInfo> tensors_;
    std::vector<LayerNode> layers_;
};

class NetworkBuilder {
public:
    NetworkBuilder(std::string network_name, Shape4 images);

    TensorId images() const noexcept { return 0; }
    Shape4 shape(TensorId t) const { return net_.tensors_.at(t).shape; }

    // From now on, relu(x) of a batch norm's or an add's output that nothing
    // else has read yet adds no layer: that layer takes the ReLU on
    // (BatchNormConfig::relu, Add::relu) and relu returns x, which then
    // holds the activations. The ReLU's name is not in the network. The
    // caller must not read x again as the layer's raw output.
    void fuse_relu(bool on) noexcept { fuse_relu_ = on; }
    // From now on, every batch norm's backward_data also writes its weight
    // gradient, and it has no backward_weight op (BatchNormConfig::share_sums).
    void share_batch_norm_sums(bool on) noexcept { share_batch_norm_sums_ = on; }

    TensorId conv(std::string name, TensorId x, ConvConfig config);
    TensorId batch_norm(std::string name, TensorId x, BatchNormConfig config = {});
    TensorId relu(std::string name, TensorId x);
    TensorId pool(std::string name, TensorId x, PoolConfig config);
    TensorId lrn(std::string name, TensorId x, LrnConfig config = {});
    TensorId concat(std::string name, std::vector<TensorId> xs);
    TensorId fully_connected(std::string name, TensorId x, FullyConnectedConfig config);
    TensorId dropout(std::string name, TensorId x, DropoutConfig config);
    TensorId add(std::string name, TensorId a, TensorId b);
    TensorId softmax_loss(std::string name, TensorId logits, SoftmaxLossConfig config = {});

    // Checks what the training step relies on (a loss; one label space;
    // concat inputs that can be views of the concat output), then hands
    // the network over.
    Network finish();

private:
    template <class Make>
    TensorId add_layer(std::string name, std::vector<TensorId> inputs, Make make_spec);
    [[noreturn]] void fail(const std::string& layer, const std::string& why) const;

    Network net_;
    bool fuse_relu_ = false;
    bool share_batch_norm_sums_ = false;
};

}  // namespace braid::samples
