// glp4nn (Wang et al., ICPP 2018): serial layer order; each op that may be
// split over its batch is split across k streams, k from an analytical
// occupancy model: how many copies of the op's dominant kernel fit on the GPU
// at once (its blocks against the SMs' threads, registers, shared memory and
// block slots), capped by the stream limit and the batch. Other ops stay on
// stream 0.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "braid/graph/op_graph.hpp"
#include "braid/model/cost.hpp"
#include "braid/model/device_spec.hpp"
#include "braid/model/occupancy.hpp"
#include "braid/plan/plan.hpp"
#include "braid/planner/strategies/assemble.hpp"

namespace braid::strategy {

// Streams GLP4NN would give this op: 1 when it cannot be split or its
// dominant kernel already fills the GPU.
inline std::uint32_t glp4nn_streams(const DeviceSpec& dev, const Op& op, const OpCost& cost, std::uint32_t max_streams) {
    if (!op.splittable() || cost.kernels.empty() || max_streams <= 1) return 1;
    // The dominant kernel: the longest one of an image (per-image loops) or of the op.
    const std::size_t considered = cost.launches_per_image > 0 ? cost.launches_per_image : cost.kernels.size();
    const KernelCost* dominant = &cost.kernels.front();
    for (std::size_t i = 0; i < considered && i < cost.kernels.size(); ++i)
        if (cost.kernels[i].duration_ns > dominant->duration_ns) dominant = &cost.kernels[i];
    const Occupancy o = occupancy(dev, dominant->shape);
    const std::uint64_t capacity = static_cast<std::uint64_t>(o.blocks_per_sm) * static_cast<std::uint64_t>(dev.sm_count);
    const std::uint64_t blocks = dominant->shape.blocks();
    if (blocks >= capacity) return 1;
    const std::uint64_t fit = capacity / blocks;  // copies resident at once
    return static_cast<std::uint32_t>(std::min<std::uint64_t>({fit, max_streams, op.split_batch}));
}

inline Plan glp4nn(const OpGraph& graph, const DeviceSpec& dev, std::span<const OpCost> costs,
                   std::uint32_t max_streams, std::string device = {}) {
    require_costs_for<PlanError>(graph.op_count(), costs.size(), "glp4nn");
    std::vector<Placement> order;
    order.reserve(graph.op_count());
    std::uint32_t streams = 1;
    for (OpId op : graph.topological_order()) {
        const std::uint32_t k = glp4nn_streams(dev, graph.op(op), costs[op], max_streams);
        Placement p{op, {}};
        for (std::uint32_t i = 0; i < k; ++i) p.part_streams.push_back(i);
        streams = std::max(streams, k);
        order.push_back(std::move(p));
    }
    return assemble(graph, "glp4nn", StrategyOptions{.max_streams = max_streams}, std::move(device),
                    std::vector<int>(streams, 0), order);
}

}  // namespace braid::strategy
