// One training iteration of a sample network as a braid::OpGraph: per layer
// forward, backward-data, backward-weight and update ops whose read and
// write sets name every buffer their bodies touch, plus the ops around them
// (synthetic data, loss sums, gradient sums at branch points, the step
// counter). Metadata says which layer and role each op has, and what each
// buffer holds, so any backend (host, CUDA) can bind bodies to the ops.
//
// Program order: data, forward ops in layer order (a loss layer's loss_sum
// right after its forward), then per layer in reverse order: the gradient
// sum of its output (when several layers read it), backward_data,
// backward_weight, update (a batch norm with shared sums has no
// backward_weight op: its backward_data writes the weight gradient; with
// update buckets an update op follows the last layer of its bucket, the
// last bucket's before advance_step); last, advance_step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "braid/graph/op_graph.hpp"
#include "braid/model/conv_engine.hpp"
#include "braid/model/estimate.hpp"
#include "braid/planner/calibration.hpp"
#include "nets/zoo.hpp"
#include "nn/sgd.hpp"

namespace braid::samples {

struct TrainConfig {
    NetConfig model;
    SgdConfig optimizer;
    std::uint64_t seed = 1;  // parameters, synthetic data and dropout masks
    // 0: a fresh synthetic batch every iteration. n > 0: a dataset of n
    // batches, cycled (iteration i trains on batch i mod n).
    std::uint64_t data_batches = 0;
};

enum class OpRole : std::uint8_t {
    data,             // writes the iteration's synthetic images and labels
    forward,          // a layer's forward pass
    loss_sum,         // a loss layer's weighted mean over the batch
    backward_data,    // a layer's input gradient(s)
    backward_weight,  // a layer's parameter gradients
    update,           // SGD on a layer's parameters
    gradient_sum,     // adds the partial gradients of a tensor read by several layers
    advance_step,     // step += 1: the iteration counter data and dropout ops read
};

std::string_view to_string(OpRole r) noexcept;

enum class ElementType : std::uint8_t { f32, i32, u64 };

struct OpInfo {
    OpRole role = OpRole::forward;
    std::optional<LayerId> layer;              // for layer ops (an update's: its first layer)
    std::optional<std::uint32_t> gradient_sum;  // index into TrainingGraph::gradient_sums
    std::vector<LayerId> update_layers;         // an update's layers, in backward order (one per layer by default)
};

struct BufferInfo {
    BufferRole role = BufferRole::activation;
    ElementType element = ElementType::f32;
    Shape4 shape;                    // NCHW for activations and their gradients
    std::optional<LayerId> layer;    // the layer owning a parameter or aux buffer
    std::optional<TensorId> tensor;  // the tensor of an activation or its gradient
};

// Every buffer an op body of the layer needs, by meaning.
struct LayerBuffers {
    std::vector<BufferId> inputs;  // values of the layer's inputs
    BufferId output = 0;           // value of its output
    // What backward_data writes for each input: the input's gradient, a
    // partial of it (summed by a gradient_sum op), or nothing (no gradient
    // needed, or an add whose input gradient is its output gradient). A
    // fused add's backward_data (its ReLU's) writes one buffer for both.
    std::vector<std::optional<BufferId>> input_gradients;
    std::optional<BufferId> output_gradient;  // dy; none for loss layers
    std::vector<BufferId> params;             // in parameters() order
    std::vector<BufferId> param_gradients;
    std::vector<BufferId> momentum;
    std::vector<BufferId> aux;  // in aux_buffers() order
};

struct LayerOps {
    std::optional<OpId> forward, loss_sum, backward_data, backward_weight, update;
};

struct TensorBuffers {
    BufferId value = 0;
    std::optional<BufferId> gradient;
};

struct GradientSum {
    TensorId tensor = 0;
    BufferId total = 0;
    std::vector<BufferId> partials;  // summed in this order
};

struct TrainingGraph {
    braid::OpGraph graph;
    Network network;
    SgdConfig optimizer;
    std::uint64_t seed = 0;
    std::uint64_t data_batches = 0;  // as TrainConfig::data_batches
    std::vector<OpInfo> ops;           // by OpId
    std::vector<BufferInfo> buffers;   // by BufferId
    std::vector<LayerBuffers> layers;  // by LayerId
    std::vector<LayerOps> layer_ops;   // by LayerId
    std::vector<TensorBuffers> tensors;  // by TensorId
    std::vector<GradientSum> gradient_sums;
    BufferId images = 0;  // f32, N x 3 x S x S
    BufferId labels = 0;  // i32, N
    BufferId step = 0;    // u64: iterations run so far

    std::uint32_t batch() const { return network.batch(); }
    // Bytes of all root buffers: what a backend allocates.
    std::uint64_t allocated_bytes() const;
    // Throws braid::GraphError naming the layer when it has no such op.
    OpId op(LayerId layer, OpRole role) const;
    OpId op(std::string_view layer_name, OpRole role) const { return op(network.layer_id(layer_name), role); }
};

TrainingGraph build_training_graph(const TrainConfig& config);
// update_bucket_bytes as NetConfig::update_bucket_bytes.
TrainingGraph build_training_graph(Network network, const SgdConfig& optimizer, std::uint64_t seed,
                                   std::uint64_t data_batches = 0, std::uint64_t update_bucket_bytes = 0);

// An f32 buffer of the graph as an NCHW view, given the address its root
// buffer was allocated at (host or device memory): the view's first element
// is root + root_offset_bytes, images image_stride elements apart (the
// concat's C*H*W for a channel slice). For a cuDNN descriptor: nStride =
// image_stride, cStride = H*W, hStride = W, wStride = 1.
TensorView<float> tensor_view(const TrainingGraph& tg, BufferId buffer, std::byte* root_base);
// The same buffer where activations are NHWC: whole tensors as
// tensor_view; a concat's channel slice starts at its first channel of the
// first pixel, its pixels the concat's channel count apart (pixel_stride).
// Throws braid::GraphError when a view is not a channel slice of its parent.
TensorView<float> channels_last_view(const TrainingGraph& tg, BufferId buffer, std::byte* root_base);
// channels_last_view when activations are NHWC (channels_last), else tensor_view.
TensorView<float> buffer_view(const TrainingGraph& tg, BufferId buffer, std::byte* root_base, bool channels_last);
// The image stride of that view, in floats: C*H*W of the buffer's own shape
// for a whole tensor, more for a channel slice (at batch 1, where a slice is
// one chunk, its own C*H*W too).
std::uint64_t image_stride(const TrainingGraph& tg, BufferId buffer);

// Kernel estimates of every op (indexed by OpId), for
// braid::estimate_costs(device, estimates).
std::vector<braid::OpEstimate> op_estimates(const TrainingGraph& tg, const EstimateOptions& options = {});

// What a plan of `tg` for `device` is made with: the estimated costs and the
// simulator's constants, calibrated when `calibration` is given (as a real
// iteration in `mode` would see them), roofline and defaults otherwise.
// `engines` (by OpId, or empty): the engine family the backend chose for
// each op's convolution (CudaModel::conv_engines), so a calibration's
// engine fits price those kernels (braid::engine_families_from_choices).
// `eager_hardware_queues`: the queues the process that runs the plan has
// (braid::sim::process_hardware_queues), over the calibration's or the
// default.
struct PlanningModel {
    braid::OpCosts costs;
    braid::sim::Params sim;
};
PlanningModel planning_model(const TrainingGraph& tg, const braid::DeviceSpec& device,
                             const std::optional<braid::Calibration>& calibration, braid::LaunchMode mode,
                             std::span<const braid::ConvEngineFamily> engines = {},
                             std::optional<int> eager_hardware_queues = std::nullopt);

// Whether op `op` of `tg` runs a pass of a convolution layer (forward,
// backward data or backward weight): the ops a backend chooses engines for.
bool runs_conv_pass(const TrainingGraph& tg, std::size_t op);

// "96 of 159 convolution passes named: tensor_core 60, legacy 30, fft 6":
// of the ops of `tg` that run a convolution pass, how many `engines` (by
// OpId) names a family for, and how many it names each.
std::string describe_conv_engines(const TrainingGraph& tg, std::span<const braid::ConvEngineFamily> engines);

}  // namespace braid::samples
