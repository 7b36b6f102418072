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
#include "braid/plan/plan.hpp"
#include "braid/plan/step_index.hpp"

namespace braid {

// Each op's predecessors in the transitive reduction: ordering these orders
// every edge, since every other edge follows from a chain of them.
inline std::vector<std::vector<OpId>> reduced_predecessors(const OpGraph& graph) {
    std::vector<std::vector<OpId>> preds(graph.op_count());
    for (const Edge& e : graph.transitive_reduction()) preds[e.to].push_back(e.from);
    return preds;
}

namespace detail {

// What finishes before each step, as a vector clock: every stream's steps
// run in order, so the steps of stream q that finish before step s are a
// prefix of q's steps; one count per stream says how long. O(steps x streams)
// memory: used for plans with few streams.
class StreamClocks {
public:
    explicit StreamClocks(const Plan& plan)
        : streams_(plan.stream_count()), clock_(plan.steps.size() * streams_, 0), pos_(plan.steps.size(), 0) {
        std::vector<std::uint32_t> seen(streams_, 0);
        for (std::size_t s = 0; s < plan.steps.size(); ++s) pos_[s] = seen[plan.steps[s].stream]++;
    }
    // Starts step s's clock from its stream predecessor.
    void begin(const Plan& plan, std::uint32_t s, std::uint32_t prev) {
        std::uint32_t* c = row(s);
        if (prev != no_step) std::copy(row(prev), row(prev) + streams_, c);
        c[plan.steps[s].stream] = pos_[s];
    }
    bool before(const Plan& plan, std::uint32_t s, std::uint32_t t) const {
        return pos_[t] < row(s)[plan.steps[t].stream];
    }
    // s now also starts after t (and everything before t).
    void join(const Plan& plan, std::uint32_t s, std::uint32_t t) {
        std::uint32_t* c = row(s);
        const std::uint32_t* o = row(t);
        for (std::uint32_t q = 0; q < streams_; ++q) c[q] = std::max(c[q], o[q]);
        c[plan.steps[t].stream] = std::max(c[plan.steps[t].stream], pos_[t] + 1);
    }

private:
    std::uint32_t* row(std::uint32_t s) { return clock_.data() + std::size_t{s} * streams_; }
    const std::uint32_t* row(std::uint32_t s) const { return clock_.data() + std::size_t{s} * streams_; }
    std::uint32_t streams_;
    std::vector<std::uint32_t> clock_;
    std::vector<std::uint32_t> pos_;
};

// The same questions answered with one bit per pair of steps: for plans
// with many streams (nimble's chains).
class StepBits {
public:
    explicit StepBits(const Plan& plan) : bits_(plan.steps.size(), plan.steps.size()) {}
    void begin(const Plan&, std::uint32_t s, std::uint32_t prev) {
        if (prev == no_step) return;
        bits_.set(s, prev);
        bits_.or_row(s, prev);
    }
    bool before(const Plan&, std::uint32_t s, std::uint32_t t) const { return bits_.test(s, t); }
    void join(const Plan&, std::uint32_t s, std::uint32_t t) {
        bits_.set(s, t);
        bits_.or_row(s, t);
    }

private:
    BitMatrix bits_;
};

template <class Order>
void place_waits(Plan& plan, const OpGraph& graph, const std::vector<std::vector<OpId>>& preds, const StepIndex& index) {
    Order order(plan);
    std::vector<std::uint32_t> needed;
    for (std::uint32_t s = 0; s < plan.steps.size(); ++s) {
        order.begin(plan, s, index.stream_prev[s]);
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
            if (order.before(plan, s, t)) continue;
            plan.waits.push_back(PlanWait{s, t});
            order.join(plan, s, t);
        }
    }
}

}  // namespace detail

// Replaces plan.waits. The issue order must be a topological order of the
// steps (all parts of an op's predecessors issued before any of its parts);
// a step issued before one it depends on is a PlanError. Steps are visited in
// issue order; for each, the steps it needs are tried latest-issued first,
// and a wait is added only for one not yet ordered before it, so no added
// wait is implied by the stream order or by the others. `preds` comes from
// reduced_predecessors(graph), for callers placing waits in many plans of
// one graph.
inline void assign_minimal_waits(Plan& plan, const OpGraph& graph, const std::vector<std::vector<OpId>>& preds) {
    StepIndex index(plan, graph.op_count());
    plan.waits.clear();
    // Vector clocks cost steps x streams, bits steps x steps: pick the smaller.
    if (std::size_t{plan.stream_count()} * 32 <= plan.steps.size())
        detail::place_waits<detail::StreamClocks>(plan, graph, preds, index);
    else
        detail::place_waits<detail::StepBits>(plan, graph, preds, index);
    std::sort(plan.waits.begin(), plan.waits.end(),
              [](const PlanWait& a, const PlanWait& b) { return std::pair(a.step, a.after) < std::pair(b.step, b.after); });
}

// The same, computing the reduced predecessors itself.
inline void assign_minimal_waits(Plan& plan, const OpGraph& graph) {
    assign_minimal_waits(plan, graph, reduced_predecessors(graph));
}

}  // namespace braid
