// serial: one stream, topological order — what frameworks do.
#pragma once

#include <vector>

#include "braid/graph/op_graph.hpp"
#include "braid/plan/plan.hpp"
#include "braid/planner/strategies/assemble.hpp"

namespace braid::strategy {

inline Plan serial(const OpGraph& graph, std::string device = {}) {
    std::vector<Placement> order;
    order.reserve(graph.op_count());
    for (OpId op : graph.topological_order()) order.push_back(Placement{op, {0}});
    return assemble(graph, "serial", {}, std::move(device), {0}, order);
}

}  // namespace braid::strategy
