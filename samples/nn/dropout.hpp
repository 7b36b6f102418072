// Inverted dropout: y = x / (1 - ratio) where kept, 0 where dropped. The
// mask is never stored: element e of image n keeps iff
//   bits24(counter_hash(seed, stream_tag(dropout, layer), iteration,
//                       n * C*H*W + e)) >= threshold,  threshold = floor(ratio * 2^24)
// so forward and backward (and a GPU kernel) recompute the same mask from
// the iteration counter, for any image range.
#pragma once

#include <cstdint>
#include <vector>

#include "nn/layer.hpp"

namespace braid::samples {

struct DropoutConfig {
    float ratio = 0.5f;  // probability of dropping an element
};

// Which mask: the run's seed, the dropout layer's ordinal in the network, the iteration.
struct DropoutKey {
    std::uint64_t seed = 0;
    std::uint32_t layer = 0;
    std::uint64_t iteration = 0;
};

struct Dropout : PerImageUnaryLayer {
    DropoutConfig config;

    Dropout(Shape4 input, DropoutConfig cfg);

    LayerKind kind() const noexcept { return LayerKind::dropout; }
    PassWork work(Pass p) const;
    std::vector<braid::KernelEstimate> kernels(Pass p, const EstimateOptions& options) const;

    std::uint32_t threshold() const noexcept;  // of bits24
    float scale() const noexcept;              // 1 / (1 - ratio), in float
};

// Whether element `element` (image * C*H*W + offset) is kept.
bool dropout_keeps(const Dropout& layer, const DropoutKey& key, std::uint64_t element);

template <class T>
void dropout_forward(const Dropout& layer, const DropoutKey& key, TensorView<const T> x, TensorView<T> y,
                     ImageRange images);
template <class T>
void dropout_backward_data(const Dropout& layer, const DropoutKey& key, TensorView<const T> dy, TensorView<T> dx,
                           ImageRange images);

}  // namespace braid::samples
