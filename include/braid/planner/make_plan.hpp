// make_plan: one entry point for every strategy, by name.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "braid/error.hpp"
#include "braid/graph/op_graph.hpp"
#include "braid/model/cost.hpp"
#include "braid/model/device_spec.hpp"
#include "braid/plan/plan.hpp"
#include "braid/planner/strategies/braid.hpp"
#include "braid/planner/strategies/glp4nn.hpp"
#include "braid/planner/strategies/ios.hpp"
#include "braid/planner/strategies/nimble.hpp"
#include "braid/planner/strategies/ooo.hpp"
#include "braid/planner/strategies/opara.hpp"
#include "braid/planner/strategies/serial.hpp"
#include "braid/sim/program.hpp"

namespace braid {

struct PlanOptions {
    std::string strategy = "braid";
    std::uint32_t max_streams = 16;                  // glp4nn, ios and braid; nimble and opara take as many as they open
    sim::LaunchMode mode = sim::LaunchMode::eager;  // what braid tunes for and ios times its stages in
    sim::Params sim;                                // the simulator braid tunes on and ios times with
};

inline const std::vector<std::string>& strategy_names() {
    static const std::vector<std::string> names{"serial", "glp4nn", "nimble", "ooo", "opara", "ios", "braid"};
    return names;
}

// Throws PlanError naming the known strategies when `name` is none of them.
inline void check_strategy_name(const std::string& name) {
    for (const std::string& n : strategy_names())
        if (n == name) return;
    std::string known;
    for (const std::string& n : strategy_names()) known += (known.empty() ? "" : ", ") + n;
    throw PlanError("unknown strategy '" + name + "'; known strategies: " + known);
}

inline Plan make_plan(const OpGraph& graph, const DeviceSpec& dev, std::span<const OpCost> costs,
                      const PlanOptions& options = {}) {
    require_costs_for<PlanError>(graph.op_count(), costs.size(), "make_plan");
    if (options.max_streams == 0) throw PlanError("max_streams must be at least 1");
    if (options.strategy == "serial") return strategy::serial(graph, dev.key);
    if (options.strategy == "nimble") return strategy::nimble(graph, dev.key);
    if (options.strategy == "glp4nn") return strategy::glp4nn(graph, dev, costs, options.max_streams, dev.key);
    if (options.strategy == "ooo") return strategy::ooo(graph, dev.key);
    if (options.strategy == "opara") return strategy::opara(graph, costs, dev.key);
    if (options.strategy == "ios") {
        strategy::IosOptions io;
        io.mode = options.mode;
        io.sim = options.sim;
        return strategy::ios(graph, dev, costs, io, options.max_streams, dev.key);
    }
    if (options.strategy == "braid") {
        strategy::BraidOptions b;
        b.max_streams = options.max_streams;
        b.mode = options.mode;
        b.sim = options.sim;
        return strategy::braid(graph, dev, costs, b);
    }
    check_strategy_name(options.strategy);
    throw PlanError("make_plan: strategy '" + options.strategy + "' has no planner");  // strategy_names() and this list disagree
}

}  // namespace braid
