// Every layer type of the samples, as one value type, and the shared member
// set (see layer.hpp) reached without knowing which layer it is. Backends
// dispatch on the alternative: std::get_if<Conv2d>(&spec), std::visit, ...
#pragma once

#include <cstdint>
#include <variant>
#include <vector>

#include "nn/add.hpp"
#include "nn/batch_norm.hpp"
#include "nn/concat.hpp"
#include "nn/conv.hpp"
#include "nn/dropout.hpp"
#include "nn/fully_connected.hpp"
#include "nn/layer.hpp"
#include "nn/lrn.hpp"
#include "nn/pool.hpp"
#include "nn/relu.hpp"
#include "nn/softmax_loss.hpp"

namespace braid::samples {

using LayerSpec = std::variant<Conv2d, BatchNorm2d, Relu, Pool2d, Lrn, Concat, FullyConnected, Dropout, Add,
                               SoftmaxCrossEntropy>;

inline LayerKind kind_of(const LayerSpec& s) {
    return std::visit([](const auto& l) { return l.kind(); }, s);
}
inline std::vector<Shape4> inputs_of(const LayerSpec& s) {
    return std::visit([](const auto& l) { return l.inputs(); }, s);
}
inline Shape4 output_of(const LayerSpec& s) {
    return std::visit([](const auto& l) { return l.output(); }, s);
}
inline std::vector<ParamSpec> parameters_of(const LayerSpec& s) {
    return std::visit([](const auto& l) { return l.parameters(); }, s);
}
inline std::vector<AuxBufferSpec> aux_buffers_of(const LayerSpec& s) {
    return std::visit([](const auto& l) { return l.aux_buffers(); }, s);
}
inline bool has_pass(const LayerSpec& s, Pass p) {
    return std::visit([p](const auto& l) { return l.has_pass(p); }, s);
}
inline bool splittable(const LayerSpec& s, Pass p) {
    return std::visit([p](const auto& l) { return l.splittable(p); }, s);
}
inline PassWork work_of(const LayerSpec& s, Pass p) {
    return std::visit([p](const auto& l) { return l.work(p); }, s);
}
inline std::vector<braid::KernelEstimate> kernels_of(const LayerSpec& s, Pass p, const EstimateOptions& o = {}) {
    return std::visit([&](const auto& l) { return l.kernels(p, o); }, s);
}
inline std::uint64_t parameter_count(const LayerSpec& s) {
    std::uint64_t n = 0;
    for (const ParamSpec& p : parameters_of(s)) n += p.elements();
    return n;
}

}  // namespace braid::samples
