// Lookups over a plan's steps that validation, wait placement and executors
// share: the steps of each op, and each step's predecessor on its stream.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "braid/error.hpp"
#include "braid/graph/op_graph.hpp"
#include "braid/plan/plan.hpp"

namespace braid {

inline constexpr std::uint32_t no_step = std::numeric_limits<std::uint32_t>::max();

struct StepIndex {
    std::vector<std::vector<std::uint32_t>> steps_of_op;  // op -> its step indices, in issue order
    std::vector<std::uint32_t> stream_prev;               // step -> previous step on its stream, or no_step

    // Assumes ops and streams are in range (validate checks that first).
    StepIndex(const Plan& plan, std::size_t op_count) : steps_of_op(op_count), stream_prev(plan.steps.size(), no_step) {
        std::vector<std::uint32_t> last(plan.stream_count(), no_step);
        for (std::uint32_t s = 0; s < plan.steps.size(); ++s) {
            const PlanStep& st = plan.steps[s];
            if (st.op >= op_count || st.stream >= plan.stream_count())
                throw PlanError("step " + std::to_string(s) + " names op " + std::to_string(st.op) + " on stream " +
                                std::to_string(st.stream) + ", but the graph has " + std::to_string(op_count) +
                                " ops and the plan " + std::to_string(plan.stream_count()) + " streams");
            steps_of_op[st.op].push_back(s);
            stream_prev[s] = last[st.stream];
            last[st.stream] = s;
        }
    }
};

// "'conv1.fwd'" or "'conv1.fwd' part 2/4" for messages.
inline std::string describe_step(const OpGraph& g, const PlanStep& s) {
    std::string out = "'" + g.op(s.op).name + "'";
    if (s.parts > 1) out += " part " + std::to_string(s.part + 1) + "/" + std::to_string(s.parts);
    return out;
}

}  // namespace braid
