// What every strategy does last: expand its decisions (issue order, a stream
// per op or per batch part) into plan steps, stamp the graph's fingerprint,
// and place minimal waits.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "braid/graph/op_graph.hpp"
#include "braid/plan/plan.hpp"
#include "braid/plan/waits.hpp"

namespace braid::strategy {

// One op's placement: the streams of its parts (one entry when unsplit).
struct Placement {
    OpId op = 0;
    std::vector<std::uint32_t> part_streams;
};

// `reduced_preds`: reduced_predecessors(graph), when the caller assembles
// many plans of one graph; null to compute it here.
inline Plan assemble(const OpGraph& graph, std::string strategy, StrategyOptions options, std::string device,
                     std::vector<int> stream_priorities, const std::vector<Placement>& issue_order,
                     const std::vector<std::vector<OpId>>* reduced_preds = nullptr) {
    Plan plan;
    plan.strategy = std::move(strategy);
    plan.options = std::move(options);
    plan.device = std::move(device);
    plan.graph_fingerprint = graph.fingerprint();
    plan.stream_priorities = std::move(stream_priorities);
    for (const Placement& p : issue_order) {
        const auto parts = static_cast<std::uint32_t>(p.part_streams.size());
        for (std::uint32_t i = 0; i < parts; ++i) plan.steps.push_back(PlanStep{p.op, i, parts, p.part_streams[i]});
    }
    if (reduced_preds)
        assign_minimal_waits(plan, graph, *reduced_preds);
    else
        assign_minimal_waits(plan, graph);
    return plan;
}

}  // namespace braid::strategy
