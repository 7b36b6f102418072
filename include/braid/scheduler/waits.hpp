// Minimal waits: given which step runs on which stream and in which order,
// add exactly the cross-stream waits the graph's edges need and none that
// stream order or another wait already implies.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "braid/detail/bit_matrix.hpp"
#include "braid/error.hpp"
#include "braid/graph/op_graph.hpp"
#include "braid/scheduler/plan.hpp"
#include "braid/scheduler/step_index.hpp"

namespace braid {

// Replaces plan.waits. The issue order must be a topological order of the
// steps (all parts of an op's predecessors issued before any of its parts);
// validate() reports it otherwise. Steps are visited in issue order; for
// each, the steps it needs are tried latest-issued first, and a wait is added
// only for one not yet ordered before it, so no added wait is implied by the
// stream order or by the others.
inline void assign_minimal_waits(Plan& plan, const OpGraph& graph) {
    const std::size_t n = plan.steps.size();
    StepIndex index(plan, graph.op_count());
    // Predecessors through the transitive reduction suffice: every other edge
    // follows from a chain of them.
    std::vector<std::vector<OpId>> preds(graph.op_count());
    for (const Edge& e : graph.transitive_reduction()) preds[e.to].push_back(e.from);

    detail::BitMatrix before(n, n);  // before.test(s, t): step t finishes before step s starts
    std::vector<std::uint32_t> needed;
    plan.waits.clear();
    for (std::uint32_t s = 0; s < n; ++s) {
        const std::uint32_t prev = index.stream_prev[s];
        if (prev != no_step) {
            before.set(s, prev);
            before.or_row(s, prev);
        }
        needed.clear();
        for (OpId u : preds[plan.steps[s].op])
            for (std::uint32_t t : index.steps_of_op[u]) {
                if (t > s)
                    throw PlanError("step " + std::to_string(s) + " " + describe_step(graph, plan.steps[s]) +
                                    " is issued before step " + std::to_string(t) + " " +
                                    describe_step(graph, plan.steps[t]) + " that it depends on");
                needed.push_back(t);
            }
        std::sort(needed.begin(), needed.end(), std::greater<>());
        for (std::uint32_t t : needed) {
            if (before.test(s, t)) continue;
            plan.waits.push_back(PlanWait{s, t});
            before.set(s, t);
            before.or_row(s, t);
        }
    }
    std::sort(plan.waits.begin(), plan.waits.end(),
              [](const PlanWait& a, const PlanWait& b) { return std::pair(a.step, a.after) < std::pair(b.step, b.after); });
}

}  // namespace braid
