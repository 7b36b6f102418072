// validate(plan, graph): the plan was made for this graph, every op is
// issued exactly once (or as all of its batch parts), every edge of the
// graph is ordered by stream order or a chain of stream order and waits, and
// no wait is implied by the others. The first violation is reported exactly.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "braid/detail/bit_matrix.hpp"
#include "braid/error.hpp"
#include "braid/graph/op_graph.hpp"
#include "braid/plan/plan.hpp"
#include "braid/plan/step_index.hpp"

namespace braid {

// The first thing wrong with the plan for this graph, or "" when it is valid.
inline std::string first_violation(const Plan& plan, const OpGraph& graph) {
    auto step_name = [&](std::uint32_t s) {
        return "step " + std::to_string(s) + " " + describe_step(graph, plan.steps[s]) + " (stream " +
               std::to_string(plan.steps[s].stream) + ")";
    };
    if (plan.graph_fingerprint != graph.fingerprint())
        return "the plan was made for graph " + plan.graph_fingerprint + " but this graph is " + graph.fingerprint() +
               " (" + std::to_string(graph.op_count()) + " ops): make a new plan for it";
    if (plan.stream_count() == 0) return "the plan has no streams";

    // Steps: ops and streams in range, each op complete and once.
    std::vector<std::vector<std::uint32_t>> parts_seen(graph.op_count());
    for (std::uint32_t s = 0; s < plan.steps.size(); ++s) {
        const PlanStep& st = plan.steps[s];
        if (st.op >= graph.op_count())
            return "step " + std::to_string(s) + " names op id " + std::to_string(st.op) + " but the graph has " +
                   std::to_string(graph.op_count()) + " ops";
        if (st.stream >= plan.stream_count())
            return step_name(s) + " uses stream " + std::to_string(st.stream) + " but the plan has " +
                   std::to_string(plan.stream_count()) + " streams";
        const Op& op = graph.op(st.op);
        if (st.parts == 0 || st.part >= st.parts)
            return step_name(s) + " is part " + std::to_string(st.part) + " of " + std::to_string(st.parts);
        if (st.parts > 1 && !op.splittable())
            return step_name(s) + " splits op '" + op.name + "' which is not marked splittable";
        if (st.parts > 1 && st.parts > op.split_batch)
            return step_name(s) + " splits op '" + op.name + "' into " + std::to_string(st.parts) +
                   " parts but its batch has only " + std::to_string(op.split_batch) + " images";
        parts_seen[st.op].push_back(s);
    }
    for (OpId op = 0; op < graph.op_count(); ++op) {
        const auto& seen = parts_seen[op];
        if (seen.empty()) return "op '" + graph.op(op).name + "' is missing from the plan";
        const std::uint32_t parts = plan.steps[seen.front()].parts;
        std::vector<bool> have(parts, false);
        for (std::uint32_t s : seen) {
            if (plan.steps[s].parts != parts)
                return "op '" + graph.op(op).name + "' is split into " + std::to_string(parts) + " parts by step " +
                       std::to_string(seen.front()) + " but into " + std::to_string(plan.steps[s].parts) +
                       " by step " + std::to_string(s);
            if (have[plan.steps[s].part])
                return "op '" + graph.op(op).name + "'" +
                       (parts > 1 ? " part " + std::to_string(plan.steps[s].part + 1) : std::string()) +
                       " appears more than once (again at step " + std::to_string(s) + ")";
            have[plan.steps[s].part] = true;
        }
        if (seen.size() != parts)
            return "op '" + graph.op(op).name + "' is split into " + std::to_string(parts) + " parts but only " +
                   std::to_string(seen.size()) + " are in the plan";
    }

    // Waits: well formed, no duplicates, pointing backwards across streams.
    std::vector<std::vector<std::uint32_t>> waits_of(plan.steps.size());
    for (std::size_t i = 0; i < plan.waits.size(); ++i) {
        const PlanWait& w = plan.waits[i];
        const std::string which = "wait " + std::to_string(i);
        if (w.step >= plan.steps.size() || w.after >= plan.steps.size())
            return which + " names step " + std::to_string(std::max(w.step, w.after)) + " but the plan has " +
                   std::to_string(plan.steps.size()) + " steps";
        if (w.after >= w.step)
            return which + ": " + step_name(w.step) + " waits for " + step_name(w.after) +
                   " which is not issued before it (a wait on a later event does not wait)";
        if (plan.steps[w.after].stream == plan.steps[w.step].stream)
            return which + ": " + step_name(w.step) + " waits for " + step_name(w.after) +
                   " on its own stream, which stream order already implies";
        if (std::find(waits_of[w.step].begin(), waits_of[w.step].end(), w.after) != waits_of[w.step].end())
            return which + " repeats an earlier wait of " + step_name(w.step) + " for " + step_name(w.after);
        waits_of[w.step].push_back(w.after);
    }

    // Happens-before closure in issue order.
    const std::size_t n = plan.steps.size();
    StepIndex index(plan, graph.op_count());
    detail::BitMatrix before(n, n);
    for (std::uint32_t s = 0; s < n; ++s) {
        const std::uint32_t prev = index.stream_prev[s];
        if (prev != no_step) {
            before.set(s, prev);
            before.or_row(s, prev);
        }
        for (std::uint32_t a : waits_of[s]) {
            before.set(s, a);
            before.or_row(s, a);
        }
    }

    // Every edge ordered, checked on the full edge set so the message names
    // the edge the user's graph actually has.
    for (const Edge& e : graph.edges())
        for (std::uint32_t su : index.steps_of_op[e.from])
            for (std::uint32_t sv : index.steps_of_op[e.to])
                if (!before.test(sv, su)) {
                    std::string why = su > sv ? "it is issued after" : "no chain of stream order and waits orders them";
                    return "edge " + graph.describe_edge(e.from, e.to) + " is not respected: " + step_name(sv) +
                           " may start before " + step_name(su) + " finishes (" + why + ")";
                }

    // Minimality: a wait is redundant when its target already finishes before
    // the stream predecessor or another wait's target.
    for (std::uint32_t s = 0; s < n; ++s) {
        for (std::uint32_t a : waits_of[s]) {
            const std::uint32_t prev = index.stream_prev[s];
            if (prev != no_step && (prev == a || before.test(prev, a)))
                return "the wait of " + step_name(s) + " for " + step_name(a) + " is implied by stream order (via " +
                       step_name(prev) + ")";
            for (std::uint32_t other : waits_of[s])
                if (other != a && before.test(other, a))
                    return "the wait of " + step_name(s) + " for " + step_name(a) + " is implied by its wait for " +
                           step_name(other);
        }
    }
    return "";
}

// Throws PlanError with first_violation()'s message.
inline void validate(const Plan& plan, const OpGraph& graph) {
    std::string problem = first_violation(plan, graph);
    if (!problem.empty()) throw PlanError("invalid plan '" + plan.strategy + "': " + problem);
}

}  // namespace braid
