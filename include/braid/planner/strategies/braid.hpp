// braid: our strategy. Candidate plans come from a critical-path-first list
// schedule over k streams (k = 1..max_streams): upward-rank priorities, the
// data-gradient chain on high-priority main streams, weight-gradient and
// update ops on low-priority side streams that fill the gaps, ops whose
// kernels fill the GPU kept in line with their predecessor rather than
// paired, small ops spread, batch splits where an op's kernels leave SMs idle.
// A fluid model ranks every candidate; the block-level simulator judges the
// best of them together with the baselines' own plans (serial, nimble, glp4nn,
// and nimble's chains with braid's priorities); the fastest wins, ties going
// to fewer streams and then fewer waits.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <queue>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "braid/graph/op_graph.hpp"
#include "braid/model/batch_split.hpp"
#include "braid/model/cost.hpp"
#include "braid/model/device_spec.hpp"
#include "braid/model/occupancy.hpp"
#include "braid/plan/compiled_plan.hpp"
#include "braid/plan/plan.hpp"
#include "braid/planner/fluid_model.hpp"
#include "braid/planner/predict.hpp"
#include "braid/planner/strategies/assemble.hpp"
#include "braid/planner/strategies/glp4nn.hpp"
#include "braid/planner/strategies/nimble.hpp"
#include "braid/planner/strategies/serial.hpp"
#include "braid/sim/program.hpp"

namespace braid::strategy {

struct BraidOptions {
    std::uint32_t max_streams = 16;
    sim::LaunchMode mode = sim::LaunchMode::eager;  // the launch mode the plan will run in
    sim::Params sim;
    std::uint32_t simulate_top = 20;                 // braid candidates the simulator judges (order: braid_plan)
    std::uint64_t block_event_budget = 120'000'000;  // simulated block events after which judging stops
};

// One judged candidate, for reports.
struct CandidateResult {
    std::string description;
    double fluid_ns = 0.0;
    double simulated_ns = 0.0;  // 0 when not simulated
    std::uint32_t streams = 0;
    std::size_t waits = 0;
};

struct BraidResult {
    Plan plan;
    double predicted_ns = 0.0;
    std::vector<CandidateResult> candidates;  // in judging order
};

namespace detail_braid {

struct OpFacts {
    double duration_ns = 0.0;
    double footprint = 1.0;  // duration-weighted share of the GPU's block slots its kernels use
    std::uint32_t launches = 0;
};

inline OpFacts facts_of(const DeviceSpec& dev, const OpCost& cost) {
    OpFacts f;
    double weighted = 0.0;
    for (const KernelCost& k : cost.kernels) {
        const Occupancy o = occupancy(dev, k.shape);
        const SmFootprint fp = footprint(dev, o, k.shape.blocks());
        f.duration_ns += k.duration_ns;
        weighted += k.duration_ns * fp.fraction;
    }
    f.footprint = f.duration_ns > 0.0 ? std::clamp(weighted / f.duration_ns, 1e-3, 1.0) : 1.0;
    f.launches = static_cast<std::uint32_t>(cost.kernels.size());
    return f;
}

struct Variant {
    std::uint32_t main_streams = 1;
    std::uint32_t side_streams = 0;
    double pin_footprint = 2.0;  // ops at least this wide stay on their predecessor's stream
    bool rank_order = false;     // issue in list-schedule order instead of modelled start time
    bool splits = false;
    bool critical_stream = false;  // the critical path alone on main stream 0, the most urgent
    bool flat_priorities = false;  // every stream at the default priority

    std::uint32_t streams() const { return main_streams + side_streams; }
    std::string describe() const {
        std::string d = std::to_string(main_streams) + " main + " + std::to_string(side_streams) + " side streams";
        if (pin_footprint <= 1.0) d += ", ops wider than " + std::to_string(static_cast<int>(pin_footprint * 100)) + "% kept in line";
        d += rank_order ? ", issued by rank" : ", issued by modelled start";
        if (splits) d += ", batch splits";
        if (critical_stream) d += ", critical path on its own stream";
        if (flat_priorities) d += ", equal priorities";
        return d;
    }
    nlohmann::json to_json() const {
        return {{"main_streams", main_streams}, {"side_streams", side_streams}, {"pin_footprint", pin_footprint},
                {"issue_order", rank_order ? "rank" : "modelled_start"}, {"batch_splits", splits},
                {"critical_stream", critical_stream}, {"equal_priorities", flat_priorities}};
    }
};

class Planner {
public:
    Planner(const OpGraph& graph, const DeviceSpec& dev, std::span<const OpCost> costs, const BraidOptions& options)
        : graph_(graph), dev_(dev), costs_(costs), options_(options) {
        const std::size_t n = graph.op_count();
        facts_.reserve(n);
        for (OpId i = 0; i < n; ++i) facts_.push_back(facts_of(dev, costs[i]));
        std::vector<double> d(n);
        for (OpId i = 0; i < n; ++i) d[i] = facts_[i].duration_ns;
        rank_ = graph.upward_ranks(d);
        reduced_preds_ = reduced_predecessors(graph);
        for (OpId op : graph.critical_path(d).ops) on_critical_path_.insert(op);
    }

    bool is_side(OpId op) const {
        const OpKind k = graph_.op(op).kind;
        return k == OpKind::backward_weight || k == OpKind::update;
    }
    bool any_side() const {
        for (OpId i = 0; i < graph_.op_count(); ++i)
            if (is_side(i)) return true;
        return false;
    }
    bool any_splittable() const {
        for (const Op& op : graph_.ops())
            if (op.splittable()) return true;
        return false;
    }

    const OpFacts& part_facts(OpId op, std::uint32_t parts) {
        if (parts <= 1) return facts_[op];
        auto key = std::pair(op, parts);
        auto it = split_facts_.find(key);
        if (it == split_facts_.end()) {
            // Parts differ by at most one image; the first (largest) stands for all.
            OpCost part = split_part(dev_, costs_[op], graph_.op(op).split_batch, parts, 0);
            it = split_facts_.emplace(key, facts_of(dev_, part)).first;
        }
        return it->second;
    }

    // Critical-path-first list schedule with isolated durations: decides each
    // op's stream(s) and the issue order.
    Plan schedule(const Variant& v) {
        const std::size_t n = graph_.op_count();
        const auto topo_pos = graph_.topological_position();
        auto less_urgent = [&](OpId a, OpId b) {
            if (rank_[a] != rank_[b]) return rank_[a] < rank_[b];
            return topo_pos[a] > topo_pos[b];
        };
        std::priority_queue<OpId, std::vector<OpId>, decltype(less_urgent)> ready(less_urgent);
        std::vector<std::uint32_t> pending(n);
        for (OpId i = 0; i < n; ++i) {
            pending[i] = static_cast<std::uint32_t>(graph_.predecessors(i).size());
            if (pending[i] == 0) ready.push(i);
        }
        const std::uint32_t streams = v.streams();
        std::vector<double> stream_free(streams, 0.0), finish(n, 0.0), start(n, 0.0);
        std::vector<std::uint32_t> stream_of(n, 0);
        std::vector<Placement> placed;
        placed.reserve(n);
        while (!ready.empty()) {
            const OpId op = ready.top();
            ready.pop();
            double earliest = 0.0;
            OpId latest_pred = OpGraph::invalid_op;
            for (OpId p : graph_.predecessors(op))
                if (latest_pred == OpGraph::invalid_op || finish[p] > earliest) {
                    earliest = std::max(earliest, finish[p]);
                    latest_pred = p;
                }
            const bool side = v.side_streams > 0 && is_side(op);
            const bool critical = v.critical_stream && on_critical_path_.count(op) != 0;
            // The critical path owns main stream 0; the rest share the others.
            const std::uint32_t reserved = v.critical_stream && v.main_streams > 1 ? 1u : 0u;
            const std::uint32_t first = side ? v.main_streams : critical ? 0u : reserved;
            const std::uint32_t count = side ? v.side_streams : critical ? 1u : v.main_streams - reserved;
            const Op& info = graph_.op(op);

            Placement pl{op, {}};
            std::uint32_t parts = 1;
            if (v.splits && !side && !critical && info.splittable() &&
                (costs_[op].launches_per_image > 0 || facts_[op].footprint < 0.5))
                parts = glp4nn_streams(dev_, info, costs_[op], count);
            if (parts > 1) {
                // Each part on the group's stream that frees up first.
                std::vector<std::uint32_t> by_free(count);
                for (std::uint32_t i = 0; i < count; ++i) by_free[i] = first + i;
                std::stable_sort(by_free.begin(), by_free.end(),
                                 [&](std::uint32_t a, std::uint32_t b) { return stream_free[a] < stream_free[b]; });
                const OpFacts& pf = part_facts(op, parts);
                double op_start = std::numeric_limits<double>::infinity(), op_end = 0.0;
                for (std::uint32_t i = 0; i < parts; ++i) {
                    const std::uint32_t s = by_free[i % count];
                    const double t0 = std::max(stream_free[s], earliest);
                    stream_free[s] = t0 + pf.duration_ns;
                    op_start = std::min(op_start, t0);
                    op_end = std::max(op_end, stream_free[s]);
                    pl.part_streams.push_back(s);
                }
                start[op] = op_start;
                finish[op] = op_end;
                stream_of[op] = pl.part_streams.front();
            } else {
                std::uint32_t s = first;
                const bool pinned = facts_[op].footprint >= v.pin_footprint;
                const bool pred_in_group = latest_pred != OpGraph::invalid_op && stream_of[latest_pred] >= first &&
                                           stream_of[latest_pred] < first + count;
                if (pinned) {
                    s = pred_in_group ? stream_of[latest_pred] : first;
                } else {
                    double best = std::numeric_limits<double>::infinity();
                    for (std::uint32_t c = first; c < first + count; ++c) {
                        const double t0 = std::max(stream_free[c], earliest);
                        const bool preferred = pred_in_group && c == stream_of[latest_pred];
                        if (t0 < best || (t0 == best && preferred)) {
                            best = t0;
                            s = c;
                        }
                    }
                }
                start[op] = std::max(stream_free[s], earliest);
                finish[op] = start[op] + facts_[op].duration_ns;
                stream_free[s] = finish[op];
                stream_of[op] = s;
                pl.part_streams.push_back(s);
            }
            placed.push_back(std::move(pl));
            for (OpId succ : graph_.successors(op))
                if (--pending[succ] == 0) ready.push(succ);
        }
        if (!v.rank_order)
            std::stable_sort(placed.begin(), placed.end(), [&](const Placement& a, const Placement& b) {
                if (start[a.op] != start[b.op]) return start[a.op] < start[b.op];
                return topo_pos[a.op] < topo_pos[b.op];
            });
        std::vector<int> priorities(streams, 0);
        if (streams > 1) {
            for (std::uint32_t s = 0; s < v.main_streams; ++s) priorities[s] = s == 0 ? -2 : -1;
            if (v.side_streams == 0) priorities[0] = -1, std::fill(priorities.begin() + 1, priorities.end(), 0);
        }
        return assemble(graph_, "braid", nlohmann::json::object(), dev_.key, priorities, placed, &reduced_preds_);
    }

    // Nimble's chains, with the chains that carry the critical path urgent.
    Plan nimble_with_priorities() {
        Plan p = nimble(graph_, dev_.key);
        std::vector<int> pr(p.stream_count(), 0);
        for (const PlanStep& s : p.steps)
            if (on_critical_path_.count(s.op)) pr[s.stream] = -1;
        p.stream_priorities = pr;
        return p;
    }

    double fluid_ns(const Plan& plan) {
        const CompiledPlan c = compile_unchecked(plan, graph_);
        std::vector<FluidStep> steps;
        steps.reserve(c.steps.size());
        for (const CompiledStep& s : c.steps) {
            const OpFacts& f = part_facts(s.op, s.parts);
            steps.push_back(FluidStep{f.duration_ns, f.footprint, f.launches});
        }
        return fluid_makespan_ns(c, steps, options_.mode, options_.sim);
    }

private:
    const OpGraph& graph_;
    const DeviceSpec& dev_;
    std::span<const OpCost> costs_;
    const BraidOptions& options_;
    std::vector<OpFacts> facts_;
    std::vector<double> rank_;
    std::vector<std::vector<OpId>> reduced_preds_;
    std::set<OpId> on_critical_path_;
    std::map<std::pair<OpId, std::uint32_t>, OpFacts> split_facts_;
};

// The candidates for one graph. All ops on main streams, in every
// combination of pinning, issue order and a critical-path stream; side
// streams for weight gradients and updates, and batch splits, as variations
// of the plain schedule (on the sample nets they rarely win, so they are not
// crossed with everything else). Equal-priority twins are made by
// braid_plan from the same placements.
inline std::vector<Variant> variants(std::uint32_t max_streams, bool any_side, bool any_splittable) {
    std::vector<Variant> out;
    // Every stream count up to 8, then every other: beyond the 8 hardware
    // queues of eager launches the simulator judges whether more pay.
    std::vector<std::uint32_t> counts;
    for (std::uint32_t k = 1; k <= std::max<std::uint32_t>(1, max_streams); k += k < 8 ? 1 : 2) counts.push_back(k);
    if (max_streams > 8 && counts.back() != max_streams) counts.push_back(max_streams);
    for (std::uint32_t k : counts) {
        for (bool rank_order : {false, true}) {
            if (k == 1) {
                out.push_back(Variant{1, 0, 2.0, rank_order, false, false, false});
                continue;
            }
            for (double pin : {0.75, 2.0})
                for (bool critical : {false, true}) out.push_back(Variant{k, 0, pin, rank_order, false, critical, false});
            if (any_side) out.push_back(Variant{k - 1, 1, 2.0, rank_order, false, false, false});
            if (any_side && k >= 4) out.push_back(Variant{k - 2, 2, 2.0, rank_order, false, false, false});
            if (any_splittable) out.push_back(Variant{k, 0, 2.0, rank_order, true, false, false});
        }
    }
    return out;
}

}  // namespace detail_braid

inline BraidResult braid_plan(const OpGraph& graph, const DeviceSpec& dev, std::span<const OpCost> costs,
                              const BraidOptions& options = {}) {
    require_costs_for<PlanError>(graph.op_count(), costs.size(), "braid");
    using detail_braid::Variant;
    detail_braid::Planner planner(graph, dev, costs, options);

    struct Candidate {
        Plan plan;
        std::string description;
        nlohmann::json chosen;
        double fluid_ns = 0.0;
    };
    std::vector<Candidate> baselines;
    baselines.push_back({serial(graph, dev.key), "serial baseline", {{"base", "serial"}}, 0.0});
    baselines.push_back({nimble(graph, dev.key), "nimble baseline", {{"base", "nimble"}}, 0.0});
    baselines.push_back({planner.nimble_with_priorities(), "nimble chains with critical-path priorities",
                         {{"base", "nimble"}, {"priorities", "critical_path"}}, 0.0});
    baselines.push_back({glp4nn(graph, dev, costs, options.max_streams, dev.key), "glp4nn baseline",
                         {{"base", "glp4nn"}}, 0.0});

    std::vector<Candidate> own;
    for (const Variant& v : detail_braid::variants(options.max_streams, planner.any_side(), planner.any_splittable())) {
        Candidate c{planner.schedule(v), v.describe(), v.to_json(), 0.0};
        c.fluid_ns = planner.fluid_ns(c.plan);
        if (v.streams() > 1) {
            // The same placement and waits with every stream at the default priority.
            Variant flat = v;
            flat.flat_priorities = true;
            Candidate f{c.plan, flat.describe(), flat.to_json(), 0.0};
            std::fill(f.plan.stream_priorities.begin(), f.plan.stream_priorities.end(), 0);
            f.fluid_ns = planner.fluid_ns(f.plan);
            own.push_back(std::move(f));
        }
        own.push_back(std::move(c));
    }
    // Judging order: the fluid model's best few overall, then the best
    // remaining plan of each stream count, then each count's next best, and
    // so on — the coarse model ranks plans of one stream count better than
    // plans of different counts.
    std::stable_sort(own.begin(), own.end(), [](const Candidate& a, const Candidate& b) { return a.fluid_ns < b.fluid_ns; });
    {
        constexpr std::size_t overall_first = 8;
        std::map<std::uint32_t, std::uint32_t> seen;  // stream count -> candidates of it so far
        std::vector<std::pair<std::uint32_t, std::size_t>> key(own.size());
        for (std::size_t i = 0; i < own.size(); ++i)
            key[i] = {i < overall_first ? 0u : 1u + seen[own[i].plan.stream_count()]++, i};
        std::sort(key.begin(), key.end());
        std::vector<Candidate> reordered;
        reordered.reserve(own.size());
        for (const auto& [round, i] : key) reordered.push_back(std::move(own[i]));
        own = std::move(reordered);
    }

    BraidResult out;
    std::uint64_t block_events = 0;
    std::size_t best = 0;
    bool have_best = false;
    double best_ns = 0.0;
    std::vector<Candidate*> judged;
    auto better = [](double ns, const Plan& p, double best_ns_, const Plan& b) {
        const double tol = 1e-9 * std::max(ns, best_ns_);
        if (ns < best_ns_ - tol) return true;
        if (ns > best_ns_ + tol) return false;
        if (p.stream_count() != b.stream_count()) return p.stream_count() < b.stream_count();
        return p.waits.size() < b.waits.size();
    };
    auto judge = [&](Candidate& c) {
        for (const Candidate* j : judged)  // the same plan twice: nothing to learn
            if (j->plan.steps == c.plan.steps && j->plan.stream_priorities == c.plan.stream_priorities) return;
        if (c.fluid_ns == 0.0) c.fluid_ns = planner.fluid_ns(c.plan);
        const sim::Result r = simulate_plan(graph, c.plan, dev, costs, options.mode, options.sim);
        block_events += r.block_events;
        out.candidates.push_back({c.description, c.fluid_ns, r.makespan_ns, c.plan.stream_count(), c.plan.waits.size()});
        judged.push_back(&c);
        if (!have_best || better(r.makespan_ns, c.plan, best_ns, judged[best]->plan)) {
            best = judged.size() - 1;
            best_ns = r.makespan_ns;
            have_best = true;
        }
    };
    for (Candidate& c : baselines) judge(c);
    std::uint32_t simulated_own = 0;
    for (Candidate& c : own) {
        if (simulated_own >= options.simulate_top || block_events >= options.block_event_budget) break;
        const std::size_t before = judged.size();
        judge(c);
        if (judged.size() > before) ++simulated_own;
    }
    for (const Candidate& c : own)
        if (std::find(judged.begin(), judged.end(), &c) == judged.end())
            out.candidates.push_back({c.description, c.fluid_ns, 0.0, c.plan.stream_count(), c.plan.waits.size()});

    const Candidate& winner = *judged[best];
    out.plan = winner.plan;
    out.plan.strategy = "braid";
    out.plan.device = dev.key;
    out.plan.options = nlohmann::json{
        {"max_streams", options.max_streams},
        {"mode", options.mode == sim::LaunchMode::graph ? "graph" : "eager"},
        {"chosen", winner.chosen},
        {"chosen_description", winner.description},
        {"candidates", own.size() + baselines.size()},
        {"simulated", judged.size()},
        {"predicted_ms", best_ns / 1e6},
    };
    out.predicted_ns = best_ns;
    return out;
}

inline Plan braid(const OpGraph& graph, const DeviceSpec& dev, std::span<const OpCost> costs, const BraidOptions& options = {}) {
    return braid_plan(graph, dev, costs, options).plan;
}

}  // namespace braid::strategy
