// A validated plan turned into what an executor does per step: which events
// to wait for, which batch range to run, and which event to record after.
// Every backend (host threads, CUDA streams, the simulator) runs this.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "braid/graph/op_graph.hpp"
#include "braid/model/batch_split.hpp"
#include "braid/model/cost.hpp"
#include "braid/plan/plan.hpp"
#include "braid/plan/validate.hpp"

namespace braid {

inline constexpr std::uint32_t no_event = std::numeric_limits<std::uint32_t>::max();

struct CompiledStep {
    OpId op = 0;
    std::uint32_t part = 0;
    std::uint32_t parts = 1;
    std::uint32_t stream = 0;
    BatchRange batch;                         // images this step covers ([0, split_batch) when unsplit)
    std::vector<std::uint32_t> wait_events;   // wait for these before running
    std::uint32_t record_event = no_event;    // record this after running, if a later step waits on it
};

struct CompiledPlan {
    std::vector<CompiledStep> steps;  // issue order
    std::vector<int> stream_priorities;
    std::uint32_t event_count = 0;

    std::uint32_t stream_count() const noexcept { return static_cast<std::uint32_t>(stream_priorities.size()); }
};

// Numbers one event per step that is waited on, trusting that the plan is
// valid for the graph (planners use it on plans they have just built).
inline CompiledPlan compile_unchecked(const Plan& plan, const OpGraph& graph) {
    CompiledPlan out;
    out.stream_priorities = plan.stream_priorities;
    out.steps.resize(plan.steps.size());
    for (std::uint32_t s = 0; s < plan.steps.size(); ++s) {
        const PlanStep& st = plan.steps[s];
        CompiledStep& c = out.steps[s];
        c.op = st.op;
        c.part = st.part;
        c.parts = st.parts;
        c.stream = st.stream;
        const std::uint32_t batch = graph.op(st.op).split_batch;
        c.batch = st.parts > 1 ? split_range(batch, st.parts, st.part) : BatchRange{0, batch};
    }
    for (const PlanWait& w : plan.waits) {
        CompiledStep& source = out.steps[w.after];
        if (source.record_event == no_event) source.record_event = out.event_count++;
        out.steps[w.step].wait_events.push_back(source.record_event);
    }
    return out;
}

// Validates, then compiles: what executors run.
inline CompiledPlan compile(const Plan& plan, const OpGraph& graph) {
    validate(plan, graph);
    return compile_unchecked(plan, graph);
}

}  // namespace braid
