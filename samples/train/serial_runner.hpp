// Runs one iteration of a graph without an executor: every op body once, in
// the graph's topological order, on the calling thread. With parts > 1 each
// splittable op runs as that many batch parts, one after another, the way a
// plan that splits it would call it.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "braid/exec/op_context.hpp"
#include "braid/graph/op_graph.hpp"

namespace braid::samples {

using HostBody = std::function<void(const braid::OpContext&)>;

struct SerialRunOptions {
    std::uint32_t parts = 1;  // batch parts per splittable op
    // Called after each op with (ops done, ops in total), e.g. for a progress bar.
    std::function<void(std::size_t, std::size_t)> progress;
};

// Body exceptions come out as braid::ExecutionError naming the op.
void run_serial(const braid::OpGraph& graph, std::span<const HostBody> bodies, const SerialRunOptions& options = {});

}  // namespace braid::samples
