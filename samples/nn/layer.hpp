// The vocabulary every layer shares: its passes, what a pass costs, the
// parameter and extra buffers it owns, and how its kernels are estimated.
// Each layer type (conv.hpp, batch_norm.hpp, ...) provides the same members:
//
//   LayerKind kind() const;
//   std::vector<Shape4> inputs() const;  Shape4 output() const;
//   std::vector<ParamSpec> parameters() const;       // learnable tensors
//   std::vector<AuxBufferSpec> aux_buffers() const;  // statistics, losses
//   bool has_pass(Pass) const;  bool splittable(Pass) const;
//   PassWork work(Pass) const;  // FLOPs and ideal DRAM bytes, whole batch
//   std::vector<braid::KernelEstimate> kernels(Pass, const EstimateOptions&) const;
//
// and reference CPU functions (templates on float and double) whose forward
// and backward-data forms take an ImageRange when the pass is splittable.
// A CUDA implementation adds its own functions over the same layer structs.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "braid/model/estimate.hpp"
#include "nn/tensor.hpp"

namespace braid::samples {

enum class LayerKind : std::uint8_t {
    conv,
    batch_norm,
    relu,
    max_pool,
    avg_pool,
    lrn,
    concat,
    fully_connected,
    dropout,
    add,
    softmax_loss,
};

constexpr std::string_view to_string(LayerKind k) noexcept {
    switch (k) {
        case LayerKind::conv: return "conv";
        case LayerKind::batch_norm: return "batch_norm";
        case LayerKind::relu: return "relu";
        case LayerKind::max_pool: return "max_pool";
        case LayerKind::avg_pool: return "avg_pool";
        case LayerKind::lrn: return "lrn";
        case LayerKind::concat: return "concat";
        case LayerKind::fully_connected: return "fully_connected";
        case LayerKind::dropout: return "dropout";
        case LayerKind::add: return "add";
        case LayerKind::softmax_loss: return "softmax_loss";
    }
    return "?";
}

// The four ops a layer can contribute to a training step.
enum class Pass : std::uint8_t { forward, backward_data, backward_weight, update };

constexpr std::string_view to_string(Pass p) noexcept {
    switch (p) {
        case Pass::forward: return "forward";
        case Pass::backward_data: return "backward_data";
        case Pass::backward_weight: return "backward_weight";
        case Pass::update: return "update";
    }
    return "?";
}

// What a pass does over the whole batch. DRAM bytes assume every tensor is
// read once and written once (perfect on-chip reuse): a lower bound.
struct PassWork {
    double flops = 0.0;
    double dram_bytes = 0.0;
};

// How a buffer is used in the training step.
enum class BufferRole : std::uint8_t {
    input,       // images and labels, written by the data op
    activation,  // forward outputs, incl. probabilities and loss values
    saved,       // forward results kept for backward (batch-norm batch statistics)
    parameter,   // learnable weights
    gradient,    // gradients of activations and parameters
    state,       // carried across iterations: momentum, running statistics, step counter
};

constexpr std::string_view to_string(BufferRole r) noexcept {
    switch (r) {
        case BufferRole::input: return "input";
        case BufferRole::activation: return "activation";
        case BufferRole::saved: return "saved";
        case BufferRole::parameter: return "parameter";
        case BufferRole::gradient: return "gradient";
        case BufferRole::state: return "state";
    }
    return "?";
}

enum class InitRule : std::uint8_t {
    zeros,
    ones,
    constant,        // ParamSpec::value

    he_uniform,      // U(-b, b), b = sqrt(6 / fan_in): Kaiming-uniform, for convolutions before ReLUs
    fan_in_uniform,  // U(-b, b), b = 1 / sqrt(fan_in): PyTorch's nn.Linear default, small initial logits
    xavier_uniform,  // U(-b, b), b = sqrt(3 / fan_in): Caffe's "xavier" filler (variance_norm FAN_IN)
};

// The bound b of a uniform rule for a tensor with `fan_in` inputs per output.
double uniform_bound(InitRule rule, std::uint64_t fan_in);

// A learnable tensor of a layer ("weight", "bias", "gamma", "beta").
struct ParamSpec {
    std::string name;
    Shape4 shape;              // conv weight K x C/groups x R x R, FC weight out x in x 1 x 1, vectors n x 1 x 1 x 1
    std::uint64_t fan_in = 0;  // for he_uniform
    InitRule init = InitRule::zeros;
    bool weight_decay = false;  // decayed by SGD (weights), or not (biases, BN scale/shift)
    float value = 0.0f;         // for InitRule::constant

    std::uint64_t elements() const noexcept { return shape.elements(); }
};

// A vector of n values as a Shape4.
constexpr Shape4 vector_shape(std::uint32_t n) noexcept { return Shape4{n, 1, 1, 1}; }

// A non-learnable buffer a layer owns besides its output, e.g. batch-norm
// running statistics or a loss layer's per-image losses.
struct AuxBufferSpec {
    std::string name;
    Shape4 shape;
    BufferRole role = BufferRole::state;
    InitRule init = InitRule::zeros;

    std::uint64_t elements() const noexcept { return shape.elements(); }
};

// What layers that map one tensor to one of the same shape, image by image
// and without parameters, have in common (ReLU, LRN, dropout): a forward
// and a backward-data pass, both splittable over the batch.
struct PerImageUnaryLayer {
    Shape4 in;

    std::vector<Shape4> inputs() const { return {in}; }
    Shape4 output() const noexcept { return in; }
    std::vector<ParamSpec> parameters() const { return {}; }
    std::vector<AuxBufferSpec> aux_buffers() const { return {}; }
    bool has_pass(Pass p) const noexcept { return p == Pass::forward || p == Pass::backward_data; }
    bool splittable(Pass p) const noexcept { return has_pass(p); }
};

// Choices the launch-shape estimates depend on.
struct EstimateOptions {
    // cuDNN and cuBLAS run FP32 convolutions and GEMMs on TF32 tensor cores
    // by default on Ampere and newer; fp32 models CUDA-core kernels instead.
    braid::MathMode gemm_math = braid::MathMode::tf32;
};

}  // namespace braid::samples
