// ios: inter-operator scheduling by dynamic programming over stages (Ding
// et al., MLSys 2021). A schedule is a sequence of stages; a stage is a set
// of ops cut into groups that run side by side, one stream each, a group's
// ops in order on its stream. IOS finds the sequence with the least summed
// stage latency, each stage's latency measured on the GPU; here the
// simulator measures it (the stage alone, its groups on their own streams).
// Pruning as in IOS: at most `max_groups` groups of at most `max_group_ops`
// ops a stage. The groups of a stage are its weakly connected parts (ops
// that depend on each other stay in order on one stream).
//
// IOS runs its search block by block, since the number of states grows
// exponentially with an input's width. A training step has no narrow cuts
// to split it at (saved activations and weight gradients cross every
// layer), so the search runs on windows of `window_ops` consecutive ops of
// a level order (ops by their depth in the graph, a topological order in
// which independent ops sit together); stages never span two windows. The
// plan keeps the stages' streams and issue order, and the waits the data
// need (no barrier between stages: one could only add idle time).
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "braid/error.hpp"
#include "braid/graph/op_graph.hpp"
#include "braid/model/cost.hpp"
#include "braid/model/device_spec.hpp"
#include "braid/model/lower_bound.hpp"
#include "braid/plan/plan.hpp"
#include "braid/planner/strategies/assemble.hpp"
#include "braid/sim/program.hpp"
#include "braid/sim/simulator.hpp"

namespace braid::strategy {

struct IosOptions {
    std::uint32_t window_ops = 8;     // ops a search window holds (1..16; the search takes ~3^window steps)
    std::uint32_t max_groups = 8;     // groups (streams) a stage may run side by side
    std::uint32_t max_group_ops = 8;  // ops one group may hold
    sim::LaunchMode mode = sim::LaunchMode::graph;  // how the stages are timed
    sim::Params sim;
};

namespace detail_ios {

using Mask = std::uint32_t;

// One window of a topological order: its ops, and per op the ops of the
// window it depends on directly and the ones it touches either way.
struct Window {
    std::vector<OpId> ops;
    std::vector<Mask> preds, neighbours;
};

inline Window window_of(const OpGraph& graph, std::span<const OpId> ops) {
    Window w;
    w.ops.assign(ops.begin(), ops.end());
    w.preds.assign(ops.size(), 0);
    w.neighbours.assign(ops.size(), 0);
    for (std::size_t i = 0; i < ops.size(); ++i)
        for (std::size_t j = 0; j < i; ++j)
            if (graph.has_edge(ops[j], ops[i])) {
                w.preds[i] |= Mask{1} << j;
                w.neighbours[i] |= Mask{1} << j;
                w.neighbours[j] |= Mask{1} << i;
            }
    return w;
}

// The weakly connected parts of `stage`, each in topological order.
inline std::vector<Mask> groups_of(const Window& w, Mask stage) {
    std::vector<Mask> out;
    Mask left = stage;
    while (left) {
        Mask group = left & (~left + 1), frontier = group;
        while (frontier) {
            Mask next = 0;
            for (Mask f = frontier; f; f &= f - 1) next |= w.neighbours[std::countr_zero(f)];
            next &= stage & ~group;
            group |= next;
            frontier = next;
        }
        out.push_back(group);
        left &= ~group;
    }
    return out;
}

// Stage latencies, simulated once each; and a bound below them that needs
// no simulation, so that the search simulates only stages that could
// improve on what it has.
class StageTimer {
public:
    StageTimer(const Window& w, const DeviceSpec& dev, std::span<const OpCost> costs, const IosOptions& o,
               std::uint32_t max_groups)
        : w_(w), dev_(dev), costs_(costs), o_(o), max_groups_(max_groups),
          memo_(std::size_t{1} << w.ops.size(), std::numeric_limits<double>::quiet_NaN()), bound_(memo_) {
        for (OpId op : w.ops) {
            op_ns_.push_back(costs[op].duration_ns());
            std::array<double, sm_resource_count> area{};
            double bytes = 0.0;
            braid::detail::add_area(dev, costs[op].kernels, area, bytes);
            op_area_.push_back(area);
        }
    }

    // The stage's simulated latency; infinity when pruning rules it out.
    double operator()(Mask stage) {
        double& t = memo_[stage];
        if (std::isnan(t)) t = std::isinf(lower_bound(stage)) ? lower_bound(stage) : time(stage);
        return t;
    }

    // At most the stage's latency (the terms of model/lower_bound.hpp: its
    // longest group run alone, its blocks' SM-time spread over every SM);
    // infinity when pruning rules the stage out.
    double lower_bound(Mask stage) {
        double& b = bound_[stage];
        if (!std::isnan(b)) return b;
        const std::vector<Mask> groups = groups_of(w_, stage);
        b = groups.size() > max_groups_ ? std::numeric_limits<double>::infinity() : 0.0;
        std::array<double, sm_resource_count> area{};
        for (std::size_t g = 0; g < groups.size() && !std::isinf(b); ++g) {
            if (static_cast<std::uint32_t>(std::popcount(groups[g])) > o_.max_group_ops) {
                b = std::numeric_limits<double>::infinity();
                break;
            }
            double ns = 0.0;
            for (Mask m = groups[g]; m; m &= m - 1) {
                const auto i = static_cast<std::size_t>(std::countr_zero(m));
                ns += op_ns_[i];
                for (std::size_t r = 0; r < sm_resource_count; ++r) area[r] += op_area_[i][r];
            }
            b = std::max(b, ns);
        }
        if (!std::isinf(b)) b = std::max(b, braid::detail::max_area_ns(dev_, area));
        return b;
    }

private:
    double time(Mask stage) const {
        const std::vector<Mask> groups = groups_of(w_, stage);
        sim::Program p;
        p.mode = o_.mode;
        p.stream_priorities.assign(groups.size(), 0);
        for (std::uint32_t g = 0; g < groups.size(); ++g)
            for (Mask m = groups[g]; m; m &= m - 1) {
                const OpId op = w_.ops[static_cast<std::size_t>(std::countr_zero(m))];
                const double host_share = costs_[op].host_share_ns();  // eager host time as a plan's program has it
                for (const KernelCost& k : costs_[op].kernels) {
                    p.actions.push_back({sim::ActionKind::launch, g, static_cast<std::uint32_t>(p.kernels.size())});
                    p.kernels.push_back(sim::Kernel{k, op, {}, host_share});
                }
            }
        if (p.kernels.empty()) return 0.0;
        return sim::simulate(dev_, p, o_.sim).makespan_ns;
    }

    const Window& w_;
    const DeviceSpec& dev_;
    std::span<const OpCost> costs_;
    const IosOptions& o_;
    std::uint32_t max_groups_;
    std::vector<double> op_ns_;
    std::vector<std::array<double, sm_resource_count>> op_area_;
    std::vector<double> memo_, bound_;
};

// The window's stages, in order, with the least summed latency. Backwards:
// rest[d] is the least latency that finishes the window once the ops of d
// are done. From each d the stages are tried smallest-numbered first, so
// the first is a single op (the window's earliest undone op is always
// ready) and sets a bound that leaves most larger stages unsimulated.
inline std::vector<Mask> best_stages(const Window& w, StageTimer& timer) {
    const std::size_t m = w.ops.size();
    const Mask full = static_cast<Mask>((std::uint64_t{1} << m) - 1);
    std::vector<double> rest(std::size_t{full} + 1, std::numeric_limits<double>::infinity());
    std::vector<Mask> next(std::size_t{full} + 1, 0);
    rest[full] = 0.0;
    for (Mask done = full; done-- > 0;) {
        bool downset = true;
        for (Mask d = done; d && downset; d &= d - 1) downset = (w.preds[std::countr_zero(d)] & ~done) == 0;
        if (!downset) continue;
        const Mask left = full & ~done;
        for (Mask stage = left & (~left + 1); stage; stage = (stage - left) & left) {
            const Mask after = done | stage;
            bool closed = true;  // every op of the stage has its window predecessors done or in the stage
            for (Mask s = stage; s && closed; s &= s - 1) closed = (w.preds[std::countr_zero(s)] & ~after) == 0;
            if (!closed || rest[after] + timer.lower_bound(stage) >= rest[done]) continue;  // not simulated
            const double t = rest[after] + timer(stage);
            if (t < rest[done]) {
                rest[done] = t;
                next[done] = stage;
            }
        }
    }
    if (std::isinf(rest[0])) throw PlanError("ios: no stage sequence fits the pruning limits");  // single ops always do
    std::vector<Mask> stages;
    for (Mask at = 0; at != full; at |= next[at]) stages.push_back(next[at]);
    return stages;
}

}  // namespace detail_ios

inline Plan ios(const OpGraph& graph, const DeviceSpec& dev, std::span<const OpCost> costs,
                const IosOptions& options = {}, std::uint32_t max_streams = 16, std::string device = {}) {
    require_costs_for<PlanError>(graph.op_count(), costs.size(), "ios");
    if (options.window_ops == 0 || options.window_ops > 16)
        throw PlanError("ios: window_ops must be within 1..16, got " + std::to_string(options.window_ops));
    if (options.max_groups == 0) throw PlanError("ios: max_groups must be at least 1");
    if (options.max_group_ops == 0) throw PlanError("ios: max_group_ops must be at least 1");
    if (max_streams == 0) throw PlanError("ios: max_streams must be at least 1");
    const std::uint32_t groups_cap = std::min(options.max_groups, max_streams);
    // Windows of a level order (a topological order too): ops that could
    // run side by side share a window more often than in framework order,
    // which walks one branch to its end before the next.
    const std::vector<std::uint32_t> level = graph.levels();
    std::vector<OpId> by_level(graph.topological_order().begin(), graph.topological_order().end());
    std::stable_sort(by_level.begin(), by_level.end(), [&](OpId a, OpId b) { return level[a] < level[b]; });
    std::vector<Placement> order;
    order.reserve(graph.op_count());
    std::uint32_t streams = 1;
    for (std::size_t first = 0; first < by_level.size(); first += options.window_ops) {
        const std::size_t count = std::min<std::size_t>(options.window_ops, by_level.size() - first);
        const detail_ios::Window w = detail_ios::window_of(graph, std::span<const OpId>(by_level).subspan(first, count));
        detail_ios::StageTimer timer(w, dev, costs, options, groups_cap);
        for (detail_ios::Mask stage : detail_ios::best_stages(w, timer)) {
            const std::vector<detail_ios::Mask> groups = detail_ios::groups_of(w, stage);
            streams = std::max(streams, static_cast<std::uint32_t>(groups.size()));
            for (std::uint32_t g = 0; g < groups.size(); ++g)
                for (detail_ios::Mask m = groups[g]; m; m &= m - 1)
                    order.push_back(Placement{w.ops[static_cast<std::size_t>(std::countr_zero(m))], {g}});
        }
    }
    return assemble(graph, "ios", StrategyOptions{.max_streams = groups_cap, .mode = options.mode}, std::move(device),
                    std::vector<int>(streams, 0), order);
}

}  // namespace braid::strategy
