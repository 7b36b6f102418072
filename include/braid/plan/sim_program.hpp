// A compiled plan as the simulator's input: per step its waits, the op's
// kernels (its batch part's, when split), and its event record — the same
// calls the CUDA backend makes, in the same order.
#pragma once

#include <span>
#include <string>

#include "braid/error.hpp"
#include "braid/graph/op_graph.hpp"
#include "braid/model/batch_split.hpp"
#include "braid/model/cost.hpp"
#include "braid/model/device_spec.hpp"
#include "braid/plan/compiled_plan.hpp"
#include "braid/sim/program.hpp"

namespace braid {

inline sim::Program to_sim_program(const CompiledPlan& plan, const OpGraph& graph, const DeviceSpec& dev,
                                   std::span<const OpCost> costs, sim::LaunchMode mode) {
    require_costs_for<PlanError>(graph.op_count(), costs.size(), "to_sim_program");
    sim::Program p;
    p.mode = mode;
    p.stream_priorities = plan.stream_priorities;
    p.event_count = plan.event_count;
    p.actions.reserve(plan.steps.size() * 3);
    for (const CompiledStep& s : plan.steps) {
        for (std::uint32_t e : s.wait_events) p.actions.push_back({sim::ActionKind::wait, s.stream, e});
        const OpCost& whole = costs[s.op];
        const double host_share = whole.host_share_ns();
        auto add_kernels = [&](const OpCost& c) {
            for (const KernelCost& k : c.kernels) {
                p.actions.push_back({sim::ActionKind::launch, s.stream, static_cast<std::uint32_t>(p.kernels.size())});
                p.kernels.push_back(sim::Kernel{k, s.op, graph.op(s.op).name, host_share});
            }
        };
        if (s.parts > 1)
            add_kernels(split_part(dev, whole, graph.op(s.op).split_batch, s.parts, s.part));
        else
            add_kernels(whole);
        if (s.record_event != no_event) p.actions.push_back({sim::ActionKind::record, s.stream, s.record_event});
    }
    return p;
}

}  // namespace braid
