// Which memory every op of a training graph reads and writes, resolved once
// for any backend: bind_op turns an op into one of the argument records
// below (the layer, its views and pointers), and each backend (HostModel,
// CudaModel) only maps a record to its kernels. A change to what a layer's
// op touches is made here, once, and both backends follow.
//
// Views point into the backend's memory (host or device): the binder never
// dereferences them.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <variant>
#include <vector>

#include "braid/exec/op_context.hpp"
#include "nn/layers.hpp"
#include "train/training_graph.hpp"

namespace braid::samples::bound {

using In = TensorView<const float>;
using Out = TensorView<float>;

struct Data {
    Out images;
    std::int32_t* labels;
    const std::uint64_t* step;  // the iteration counter
    std::uint64_t seed, data_batches;  // data_batches 0: the iteration is the step
    std::uint32_t classes;
};
struct AdvanceStep {
    std::uint64_t* step;
};
struct GradientSum {
    std::vector<In> partials;
    Out total;
};
// One layer's update: each of its parameter tensors.
struct Update {
    SgdConfig sgd;
    std::vector<SgdTensorRef> tensors;
};

struct ConvForward {
    Conv2d layer;
    In x;
    const float* weight;
    const float* bias;  // null without one
    Out y;
};
struct ConvBackwardData {
    Conv2d layer;
    In dy;
    const float* weight;
    Out dx;
};
struct ConvBackwardWeight {
    Conv2d layer;
    In x, dy;
    float* dweight;
    float* dbias;  // null without a bias
};
struct FcForward {
    FullyConnected layer;
    In x;
    const float* weight;
    const float* bias;
    Out y;
};
struct FcBackwardData {
    FullyConnected layer;
    In dy;
    const float* weight;
    Out dx;
};
struct FcBackwardWeight {
    FullyConnected layer;
    In x, dy;
    float* dweight;
    float* dbias;
};
struct BnForward {
    BatchNorm2d layer;
    In x;
    const float* gamma;
    const float* beta;
    Out y;
    float* saved_mean;
    float* saved_inv_std;
    float* running_mean;
    float* running_var;
};
struct BnBackwardData {
    BatchNorm2d layer;
    In x, dy;
    const float* gamma;
    const float* saved_mean;
    const float* saved_inv_std;
    Out dx;
    In y;  // the output, with a fused ReLU (its mask); empty without
    // With shared sums the weight gradient, written here too; null without.
    float* dgamma = nullptr;
    float* dbeta = nullptr;
};
struct BnBackwardWeight {
    BatchNorm2d layer;
    In x, dy;
    const float* saved_mean;
    const float* saved_inv_std;
    float* dgamma;
    float* dbeta;
    In y;  // as in BnBackwardData
};
struct ReluForward {
    Relu layer;
    In x;
    Out y;
};
struct ReluBackward {
    Relu layer;
    In y, dy;
    Out dx;
};
struct PoolForward {
    Pool2d layer;
    In x;
    Out y;
};
// Average pooling reads dy alone: its op declares no x or y, and they are empty views.
struct PoolBackward {
    Pool2d layer;
    In x, y, dy;
    Out dx;
};
struct LrnForward {
    Lrn layer;
    In x;
    Out y;
};
struct LrnBackward {
    Lrn layer;
    In x, y, dy;
    Out dx;
};
// The mask is a function of (seed, id, *step, element); id: the layer's
// ordinal among the net's dropout layers.
struct DropoutForward {
    Dropout layer;
    std::uint64_t seed;
    LayerId id;
    const std::uint64_t* step;
    In x;
    Out y;
};
struct DropoutBackward {
    Dropout layer;
    std::uint64_t seed;
    LayerId id;
    const std::uint64_t* step;
    In dy;
    Out dx;
};
struct AddForward {
    Add layer;
    In a, b;
    Out y;
};
struct LossForward {
    SoftmaxCrossEntropy layer;
    In logits;
    const std::int32_t* labels;
    Out probabilities;
    float* per_image_loss;
};
struct LossSum {
    SoftmaxCrossEntropy layer;
    const float* per_image_loss;
    float* loss;
};
struct LossBackward {
    SoftmaxCrossEntropy layer;
    In probabilities;
    const std::int32_t* labels;
    Out dx;
};

using Args = std::variant<Data, AdvanceStep, GradientSum, Update, ConvForward, ConvBackwardData, ConvBackwardWeight,
                          FcForward, FcBackwardData, FcBackwardWeight, BnForward, BnBackwardData, BnBackwardWeight,
                          ReluForward, ReluBackward, PoolForward, PoolBackward, LrnForward, LrnBackward,
                          DropoutForward, DropoutBackward, AddForward, LossForward, LossSum, LossBackward>;

}  // namespace braid::samples::bound

namespace braid::samples {

struct BoundOp {
    OpId op = 0;
    std::optional<LayerId> layer;  // the layer whose op this is (none for data, step and gradient sums)
    bound::Args args;
};

// The base address of a root buffer's memory in the backend.
using RootMemory = std::function<std::byte*(BufferId root)>;

// Op `op` of `graph` over the memory `root` gives; with `channels_last`,
// activation views are NHWC (channels_last_view). Throws braid::GraphError
// naming the layer and role when no record describes the op.
BoundOp bind_op(const TrainingGraph& graph, OpId op, const RootMemory& root, bool channels_last = false);

// The images a body works on: the context's range, or the whole batch when it gives none.
inline ImageRange op_images(const braid::OpContext& ctx, std::uint32_t batch) {
    if (ctx.batch_end > ctx.batch_begin) return ImageRange{ctx.batch_begin, ctx.batch_end};
    return ImageRange{0, batch};
}

// For std::visit over bound::Args with one lambda per record.
template <class... F>
struct Overloaded : F... {
    using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

}  // namespace braid::samples
