// ooo: out-of-order backprop on one GPU (Oh et al., EuroSys 2022). Weight
// gradients are off the critical path: nothing but their own update waits
// for them. So the step runs in framework order on an urgent main stream,
// and every weight-gradient and update op on one low-priority sub stream,
// where it fills what the data-gradient chain leaves idle. A graph without
// such ops gets the serial plan.
#pragma once

#include <string>
#include <vector>

#include "braid/graph/op_graph.hpp"
#include "braid/plan/plan.hpp"
#include "braid/planner/strategies/assemble.hpp"

namespace braid::strategy {

// Weight gradients and updates: nothing but an update waits for them.
inline bool off_critical_chain(OpKind kind) noexcept { return kind == OpKind::backward_weight || kind == OpKind::update; }

inline Plan ooo(const OpGraph& graph, std::string device = {}) {
    bool any_sub = false;
    for (const Op& op : graph.ops()) any_sub = any_sub || off_critical_chain(op.kind);
    std::vector<Placement> order;
    order.reserve(graph.op_count());
    for (OpId op : graph.topological_order())
        order.push_back(Placement{op, {any_sub && off_critical_chain(graph.op(op).kind) ? 1u : 0u}});
    // CUDA's convention: the lower number is the more urgent stream.
    std::vector<int> priorities = any_sub ? std::vector<int>{-1, 0} : std::vector<int>{0};
    return assemble(graph, "ooo", {}, std::move(device), std::move(priorities), order);
}

}  // namespace braid::strategy
