// The split granule of a plan: the largest g such that every batch part the
// plan runs starts and ends at a multiple of g (or at the batch end). A
// backend whose library calls cover images [k*g, (k+1)*g) only then makes
// the same calls for any part as for the whole batch (see
// cuda::LayerOptions::split_granule).
#pragma once

#include <cstdint>

#include "braid/graph/op_graph.hpp"
#include "braid/plan/plan.hpp"

namespace braid::samples {

// The greatest common divisor of every part boundary of the plan's split
// ops; 0 when the plan splits nothing.
std::uint32_t split_granule(const braid::Plan& plan, const braid::OpGraph& graph);

}  // namespace braid::samples
