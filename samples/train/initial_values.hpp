// The initial values of a model's tensors, shared by every backend so that a
// host model and a device model start from the same bits: parameters from
// the seed as their ParamSpec says, auxiliary buffers (running statistics)
// as their AuxBufferSpec says. Everything else starts at zero.
#pragma once

#include <cstdint>

#include "nn/layer.hpp"

namespace braid::samples {

// Writes the p.elements() initial values of the parameter tensor with global
// ordinal `ordinal` (layers in order, their tensors in order): uniform rules
// draw element e as (2 * uniform01(counter_hash(seed, stream_tag(parameter_init,
// ordinal), 0, e)) - 1) * bound, in float.
void fill_initial_parameter(const ParamSpec& p, std::uint64_t seed, std::uint64_t ordinal, float* out);

// Writes a.elements() initial values of an auxiliary buffer (ones or zeros).
void fill_initial_aux(const AuxBufferSpec& a, float* out);

}  // namespace braid::samples
