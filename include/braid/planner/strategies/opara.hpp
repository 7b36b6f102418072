// opara (Chen et al., 2024; after its published implementation): streams
// from a greedy chain walk and a launch order by resource demand.
//   - Streams: in framework order, an op takes the stream of the first of
//     its predecessors whose first successor it is (the stream continues
//     along a producer's first consumer); an op that continues no stream
//     opens a new one.
//   - Launch order: Kahn's algorithm whose ready list gives out first the
//     op whose first kernel asks for the least shared memory per block
//     (ties: the longest-ready op), so that light kernels are in flight
//     before heavy ones claim the SMs.
#pragma once

#include <cstdint>
#include <limits>
#include <list>
#include <span>
#include <string>
#include <vector>

#include "braid/graph/op_graph.hpp"
#include "braid/model/cost.hpp"
#include "braid/plan/plan.hpp"
#include "braid/planner/strategies/assemble.hpp"

namespace braid::strategy {

// Each op's stream under Opara's allocation, and how many streams it opens.
struct OparaStreams {
    std::vector<std::uint32_t> stream_of;
    std::uint32_t streams = 0;
};

inline OparaStreams opara_streams(const OpGraph& graph) {
    const std::size_t n = graph.op_count();
    const auto pos = graph.topological_position();
    constexpr std::uint32_t none = std::numeric_limits<std::uint32_t>::max();
    // The first successor of each op in framework (topological) order.
    std::vector<OpId> first_successor(n, OpGraph::invalid_op);
    for (OpId op = 0; op < n; ++op)
        for (OpId s : graph.successors(op))
            if (first_successor[op] == OpGraph::invalid_op || pos[s] < pos[first_successor[op]]) first_successor[op] = s;
    OparaStreams out;
    out.stream_of.assign(n, none);
    for (OpId op : graph.topological_order()) {
        OpId continued = OpGraph::invalid_op;
        for (OpId p : graph.predecessors(op))
            if (first_successor[p] == op && (continued == OpGraph::invalid_op || pos[p] < pos[continued])) continued = p;
        out.stream_of[op] = continued != OpGraph::invalid_op ? out.stream_of[continued] : out.streams++;
    }
    return out;
}

// Shared memory per block of the op's first kernel; 0 without kernels.
inline std::uint64_t opara_demand(const OpCost& cost) {
    if (cost.kernels.empty()) return 0;
    const KernelShape& k = cost.kernels.front().shape;
    return std::uint64_t{k.static_smem_bytes} + k.dynamic_smem_bytes;
}

inline Plan opara(const OpGraph& graph, std::span<const OpCost> costs, std::string device = {}) {
    require_costs_for<PlanError>(graph.op_count(), costs.size(), "opara");
    const OparaStreams s = opara_streams(graph);
    const std::size_t n = graph.op_count();
    std::vector<std::uint32_t> pending(n);
    std::list<OpId> ready;  // in the order the ops became ready
    for (OpId op : graph.topological_order()) {
        pending[op] = static_cast<std::uint32_t>(graph.predecessors(op).size());
        if (pending[op] == 0) ready.push_back(op);
    }
    std::vector<Placement> order;
    order.reserve(n);
    while (!ready.empty()) {
        auto pick = ready.begin();
        for (auto it = ready.begin(); it != ready.end(); ++it)
            if (opara_demand(costs[*it]) < opara_demand(costs[*pick])) pick = it;
        const OpId op = *pick;
        ready.erase(pick);
        order.push_back(Placement{op, {s.stream_of[op]}});
        for (OpId succ : graph.successors(op))
            if (--pending[succ] == 0) ready.push_back(succ);
    }
    return assemble(graph, "opara", {}, std::move(device), std::vector<int>(s.streams, 0), order);
}

}  // namespace braid::strategy
