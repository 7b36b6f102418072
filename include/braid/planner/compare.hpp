// Every strategy's plan for one graph, judged on the same simulator: the
// numbers braid-plan prints and tools/bench reports.
#pragma once

#include <algorithm>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "braid/graph/op_graph.hpp"
#include "braid/model/cost.hpp"
#include "braid/model/device_spec.hpp"
#include "braid/model/lower_bound.hpp"
#include "braid/planner/make_plan.hpp"
#include "braid/planner/predict.hpp"
#include "braid/planner/strategies/braid.hpp"
#include "braid/sim/program.hpp"

namespace braid {

struct ComparisonOptions {
    std::vector<std::string> strategies = strategy_names();
    std::uint32_t max_streams = 16;
    sim::LaunchMode mode = sim::LaunchMode::graph;  // how every plan is run
    sim::Params sim;
};

struct StrategyRow {
    std::string name;
    Plan plan;
    double predicted_ns = 0.0;              // in the comparison's mode
    double speedup_vs_serial = 0.0;         // serial plan launched eagerly (what frameworks do) / predicted
    double speedup_vs_serial_graph = 0.0;   // serial plan replayed as one CUDA graph / predicted
    std::uint32_t streams = 0;
    std::size_t waits = 0;
    double lb_ratio = 0.0;                  // predicted / lower bound
    double mean_busy_sm_fraction = 0.0;
    SimulatedPlan simulated;                // the simulator's program and predicted timeline
};

struct Comparison {
    std::vector<StrategyRow> rows;  // in the order asked for
    LowerBound bound;
    double serial_eager_ns = 0.0;
    double serial_graph_ns = 0.0;
    sim::LaunchMode mode = sim::LaunchMode::graph;
    // braid's full result (every candidate it weighed) when braid was compared.
    std::optional<strategy::BraidResult> braid;

    const StrategyRow& row(const std::string& name) const {
        for (const StrategyRow& r : rows)
            if (r.name == name) return r;
        throw Error("no strategy '" + name + "' in this comparison");
    }
};

// Plans and simulates each strategy once: braid already plans and judges the
// baselines it weighs as its candidates, so their rows reuse its plans and
// timelines; the rest (ios) are planned here.
inline Comparison compare_strategies(const OpGraph& graph, const DeviceSpec& dev, std::span<const OpCost> costs,
                                     const ComparisonOptions& options = {}) {
    require_costs_for<PlanError>(graph.op_count(), costs.size(), "compare_strategies");
    for (const std::string& name : options.strategies) check_strategy_name(name);
    Comparison c;
    c.mode = options.mode;
    c.bound = lower_bound(dev, graph, costs, options.sim.share_bandwidth);
    if (std::find(options.strategies.begin(), options.strategies.end(), "braid") != options.strategies.end()) {
        strategy::BraidOptions bo;
        bo.max_streams = options.max_streams;
        bo.mode = options.mode;
        bo.sim = options.sim;
        bo.keep_baseline_timelines = true;
        c.braid = strategy::braid_plan(graph, dev, costs, bo);
    }
    // A strategy's plan and its timeline in the comparison's mode.
    auto planned = [&](const std::string& name) -> std::pair<Plan, SimulatedPlan> {
        if (c.braid) {
            const strategy::BraidCandidate* b = name == "braid" ? &c.braid->chosen() : c.braid->find_baseline(name);
            if (b && b->simulated) return {name == "braid" ? c.braid->plan : b->plan, *b->simulated};
        }
        PlanOptions po;
        po.strategy = name;
        po.max_streams = options.max_streams;
        po.mode = options.mode;
        po.sim = options.sim;
        Plan plan = make_plan(graph, dev, costs, po);
        SimulatedPlan sp = simulate_plan(graph, plan, dev, costs, options.mode, options.sim);
        return {std::move(plan), std::move(sp)};
    };
    auto [serial_plan, serial_sim] = planned("serial");
    const sim::LaunchMode other = options.mode == sim::LaunchMode::graph ? sim::LaunchMode::eager : sim::LaunchMode::graph;
    const double serial_other_ns = simulate_plan(graph, serial_plan, dev, costs, other, options.sim).result.makespan_ns;
    const bool graph_mode = options.mode == sim::LaunchMode::graph;
    c.serial_eager_ns = graph_mode ? serial_other_ns : serial_sim.result.makespan_ns;
    c.serial_graph_ns = graph_mode ? serial_sim.result.makespan_ns : serial_other_ns;
    for (const std::string& name : options.strategies) {
        StrategyRow r;
        r.name = name;
        if (name == "serial") {
            r.plan = serial_plan;
            r.simulated = serial_sim;
        } else {
            std::tie(r.plan, r.simulated) = planned(name);
        }
        r.predicted_ns = r.simulated.result.makespan_ns;
        r.speedup_vs_serial = c.serial_eager_ns / r.predicted_ns;
        r.speedup_vs_serial_graph = c.serial_graph_ns / r.predicted_ns;
        r.streams = r.plan.stream_count();
        r.waits = r.plan.waits.size();
        r.lb_ratio = c.bound.bound_ns > 0.0 ? r.predicted_ns / c.bound.bound_ns : 0.0;
        r.mean_busy_sm_fraction = r.simulated.result.mean_busy_sm_fraction;
        c.rows.push_back(std::move(r));
    }
    return c;
}

}  // namespace braid
