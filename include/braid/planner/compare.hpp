// Every strategy's plan for one graph, judged on the same simulator: the
// numbers braid-plan prints and tools/bench reports.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "braid/graph/op_graph.hpp"
#include "braid/model/cost.hpp"
#include "braid/model/device_spec.hpp"
#include "braid/model/lower_bound.hpp"
#include "braid/planner/make_plan.hpp"
#include "braid/planner/predict.hpp"
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
    sim::Result result;                     // the predicted timeline
};

struct Comparison {
    std::vector<StrategyRow> rows;  // in the order asked for
    LowerBound bound;
    double serial_eager_ns = 0.0;
    double serial_graph_ns = 0.0;
    sim::LaunchMode mode = sim::LaunchMode::graph;

    const StrategyRow& row(const std::string& name) const {
        for (const StrategyRow& r : rows)
            if (r.name == name) return r;
        throw Error("no strategy '" + name + "' in this comparison");
    }
};

inline Comparison compare_strategies(const OpGraph& graph, const DeviceSpec& dev, std::span<const OpCost> costs,
                                     const ComparisonOptions& options = {}) {
    Comparison c;
    c.mode = options.mode;
    c.bound = lower_bound(dev, graph, costs, options.sim.share_bandwidth);
    const Plan serial_plan = make_plan(graph, dev, costs, {"serial"});
    sim::Result serial_eager = simulate_plan(graph, serial_plan, dev, costs, sim::LaunchMode::eager, options.sim);
    sim::Result serial_graph = simulate_plan(graph, serial_plan, dev, costs, sim::LaunchMode::graph, options.sim);
    c.serial_eager_ns = serial_eager.makespan_ns;
    c.serial_graph_ns = serial_graph.makespan_ns;
    for (const std::string& name : options.strategies) {
        StrategyRow r;
        r.name = name;
        if (name == "serial") {  // planned and simulated above
            r.plan = serial_plan;
            r.result = options.mode == sim::LaunchMode::graph ? serial_graph : serial_eager;
        } else {
            PlanOptions po;
            po.strategy = name;
            po.max_streams = options.max_streams;
            po.mode = options.mode;
            po.sim = options.sim;
            r.plan = make_plan(graph, dev, costs, po);
            r.result = simulate_plan(graph, r.plan, dev, costs, options.mode, options.sim);
        }
        const sim::Result& res = r.result;
        r.predicted_ns = res.makespan_ns;
        r.speedup_vs_serial = c.serial_eager_ns / r.predicted_ns;
        r.speedup_vs_serial_graph = c.serial_graph_ns / r.predicted_ns;
        r.streams = r.plan.stream_count();
        r.waits = r.plan.waits.size();
        r.lb_ratio = c.bound.bound_ns > 0.0 ? r.predicted_ns / c.bound.bound_ns : 0.0;
        r.mean_busy_sm_fraction = res.mean_busy_sm_fraction;
        c.rows.push_back(std::move(r));
    }
    return c;
}

}  // namespace braid
