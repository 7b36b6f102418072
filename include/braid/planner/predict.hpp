// What a plan will do on a device, without the device: the block-level
// simulator's timeline and its ratio to the iteration's lower bound.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <utility>

#include "braid/graph/op_graph.hpp"
#include "braid/model/cost.hpp"
#include "braid/model/device_spec.hpp"
#include "braid/model/lower_bound.hpp"
#include "braid/plan/compiled_plan.hpp"
#include "braid/plan/plan.hpp"
#include "braid/plan/sim_program.hpp"
#include "braid/sim/program.hpp"
#include "braid/sim/simulator.hpp"

namespace braid {

// A plan as the simulator ran it: the program (kernels, streams, waits) and
// the predicted timeline; the trace and timeline writers take both.
struct SimulatedPlan {
    sim::Program program;
    sim::Result result;
};

inline SimulatedPlan simulate_plan(const OpGraph& graph, const Plan& plan, const DeviceSpec& dev,
                                   std::span<const OpCost> costs, sim::LaunchMode mode, const sim::Params& params = {}) {
    SimulatedPlan out;
    out.program = to_sim_program(compile(plan, graph), graph, dev, costs, mode);
    out.result = sim::simulate(dev, out.program, params);
    return out;
}

// simulate_plan for a search that only wants plans faster than `limit_ns`:
// nullopt once this one is sure to take longer (sim::simulate_within).
inline std::optional<SimulatedPlan> simulate_plan_within(const OpGraph& graph, const Plan& plan, const DeviceSpec& dev,
                                                         std::span<const OpCost> costs, sim::LaunchMode mode,
                                                         const sim::Params& params, double limit_ns,
                                                         std::uint64_t& block_events) {
    SimulatedPlan out;
    out.program = to_sim_program(compile(plan, graph), graph, dev, costs, mode);
    std::optional<sim::Result> r = sim::simulate_within(dev, out.program, params, limit_ns, block_events);
    if (!r) return std::nullopt;
    out.result = std::move(*r);
    return out;
}

struct Prediction {
    sim::Result result;
    LowerBound bound;
    double predicted_ns = 0.0;
    double lb_ratio = 0.0;  // predicted / lower bound (>= 1)
};

inline Prediction predict(const OpGraph& graph, const Plan& plan, const DeviceSpec& dev, std::span<const OpCost> costs,
                          sim::LaunchMode mode, const sim::Params& params = {}) {
    Prediction p;
    p.result = simulate_plan(graph, plan, dev, costs, mode, params).result;
    p.bound = lower_bound(dev, graph, costs, params.share_bandwidth);
    p.predicted_ns = p.result.makespan_ns;
    p.lb_ratio = p.bound.bound_ns > 0.0 ? p.predicted_ns / p.bound.bound_ns : 0.0;
    return p;
}

}  // namespace braid
