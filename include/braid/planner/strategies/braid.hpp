// braid: our strategy. Candidate plans come from a critical-path-first list
// schedule over k streams (k = 1..max_streams): upward-rank priorities, the
// data-gradient chain on high-priority main streams, weight-gradient and
// update ops on low-priority side streams that fill the gaps, ops whose
// kernels fill the GPU kept in line with their predecessor rather than
// paired, small ops spread, batch splits where an op's kernels leave SMs idle.
// A fluid model ranks every candidate; the block-level simulator judges the
// best of them together with the baselines' own plans (serial, nimble,
// glp4nn, ooo, opara, ios when asked, and nimble's chains with braid's
// priorities); the fastest plan that honours the options wins, ties going to
// fewer streams and then fewer waits. A candidate's simulation stops once it
// is sure to lose to the best so far.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <queue>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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
#include "braid/planner/strategies/ios.hpp"
#include "braid/planner/strategies/nimble.hpp"
#include "braid/planner/strategies/ooo.hpp"
#include "braid/planner/strategies/opara.hpp"
#include "braid/planner/strategies/serial.hpp"
#include "braid/sim/program.hpp"

namespace braid::strategy {

struct BraidOptions {
    std::uint32_t max_streams = 16;
    sim::LaunchMode mode = sim::LaunchMode::eager;  // the launch mode the plan will run in
    sim::Params sim;
    std::uint32_t simulate_top = 20;                 // braid candidates the simulator judges (order: braid_plan)
    std::uint64_t block_event_budget = 120'000'000;  // simulated block events after which judging stops
    // Candidates simulated to the end: the best `complete_top` times are
    // exact, and a candidate is given up only once sure to be slower than
    // all of them. 1 finds the winner; tuning wants its runners-up too.
    std::uint32_t complete_top = 1;
    // Simulate the baselines to the end and keep their timelines (what a
    // strategy comparison shows); otherwise they too are given up once sure
    // to lose.
    bool keep_baseline_timelines = false;
    // Weigh IOS's plan too. Its search simulates thousands of stages (3.4 s
    // for a 2,000-op training-shaped graph, where braid's own planning takes
    // 1.4 s), so only tuning, which measures for a minute anyway, asks.
    bool weigh_ios = false;
};

// One candidate plan and what braid learnt about it.
struct BraidCandidate {
    PlanChoice choice;
    Plan plan;
    double fluid_ns = 0.0;       // the fluid model's estimate (0 for baselines, which it does not rank)
    double simulated_ns = 0.0;   // the simulator's iteration time; 0 when not judged or cut off
    bool cut_off = false;        // judged, and given up once sure to be slower than the best (complete_top) so far
    bool eligible = true;        // honours the options (a baseline may want more than max_streams streams)
    // The simulator's program and timeline, kept for the baselines and the
    // winner (what a strategy comparison shows) and dropped for the rest.
    std::optional<SimulatedPlan> simulated;

    std::string describe() const { return choice.describe(); }
};

// braid's plan together with every candidate it weighed: the baselines
// (serial, nimble, nimble with critical-path priorities, glp4nn, ooo,
// opara, and ios when asked) first, then its own list schedules in judging
// order.
struct BraidResult {
    Plan plan;                  // the winner, as strategy "braid" with its options filled in
    double predicted_ns = 0.0;
    std::vector<BraidCandidate> candidates;
    std::size_t winner = 0;     // index into candidates

    StrategyOptions record;     // the settings and counts every plan_of() carries

    const BraidCandidate& chosen() const { return candidates.at(winner); }
    // Candidate i as a plan of strategy "braid" that says what it is
    // (options.chosen) and what the simulator predicted for it.
    Plan plan_of(std::size_t i) const {
        const BraidCandidate& c = candidates.at(i);
        Plan p = c.plan;
        p.strategy = "braid";
        p.options = record;
        p.options.chosen = c.choice;
        if (c.simulated_ns > 0.0) p.options.predicted_ms = c.simulated_ns / 1e6;
        return p;
    }
    // Indices of the candidates simulated to the end, fastest first (the
    // winner first): what tuning measures on the GPU. At most `count`.
    std::vector<std::size_t> ranked(std::size_t count) const {
        std::vector<std::size_t> out;
        for (std::size_t i = 0; i < candidates.size(); ++i)
            if (i != winner && candidates[i].eligible && !candidates[i].cut_off && candidates[i].simulated_ns > 0.0)
                out.push_back(i);
        std::stable_sort(out.begin(), out.end(), [&](std::size_t a, std::size_t b) {
            return candidates[a].simulated_ns < candidates[b].simulated_ns;
        });
        out.insert(out.begin(), winner);
        if (out.size() > count) out.resize(count);
        return out;
    }
    // A baseline's own plan (one of baseline_strategies()), as its strategy
    // makes it; null when braid did not weigh it.
    const BraidCandidate* find_baseline(std::string_view base) const {
        for (const BraidCandidate& c : candidates)
            if (c.choice.base == base && !c.choice.critical_path_priorities) return &c;
        return nullptr;
    }
    const BraidCandidate& baseline(std::string_view base) const {
        if (const BraidCandidate* c = find_baseline(base)) return *c;
        throw PlanError("braid weighed no '" + std::string(base) + "' baseline");
    }
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

    bool is_side(OpId op) const { return off_critical_chain(graph_.op(op).kind); }
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
    Plan schedule(const ListSchedule& v) {
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
            if (v.batch_splits && !side && !critical && info.splittable() &&
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
        return assemble(graph_, "braid", {}, dev_.key, priorities, placed, &reduced_preds_);
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
inline std::vector<ListSchedule> variants(std::uint32_t max_streams, bool any_side, bool any_splittable) {
    std::vector<ListSchedule> out;
    // Every stream count up to 8, then every other: beyond the 8 hardware
    // queues of eager launches the simulator judges whether more pay.
    std::vector<std::uint32_t> counts;
    for (std::uint32_t k = 1; k <= std::max<std::uint32_t>(1, max_streams); k += k < 8 ? 1 : 2) counts.push_back(k);
    if (max_streams > 8 && counts.back() != max_streams) counts.push_back(max_streams);
    for (std::uint32_t k : counts) {
        for (bool rank_order : {false, true}) {
            if (k == 1) {
                out.push_back(ListSchedule{1, 0, 2.0, rank_order, false, false, false});
                continue;
            }
            for (double pin : {0.75, 2.0})
                for (bool critical : {false, true}) out.push_back(ListSchedule{k, 0, pin, rank_order, false, critical, false});
            if (any_side) out.push_back(ListSchedule{k - 1, 1, 2.0, rank_order, false, false, false});
            if (any_side && k >= 4) out.push_back(ListSchedule{k - 2, 2, 2.0, rank_order, false, false, false});
            if (any_splittable) out.push_back(ListSchedule{k, 0, 2.0, rank_order, true, false, false});
        }
    }
    return out;
}

}  // namespace detail_braid

inline BraidResult braid_plan(const OpGraph& graph, const DeviceSpec& dev, std::span<const OpCost> costs,
                              const BraidOptions& options = {}) {
    require_costs_for<PlanError>(graph.op_count(), costs.size(), "braid");
    if (options.max_streams == 0) throw PlanError("braid: max_streams must be at least 1");
    detail_braid::Planner planner(graph, dev, costs, options);

    BraidResult out;
    std::vector<BraidCandidate>& all = out.candidates;
    auto baseline = [](std::string base, Plan plan, bool priorities = false) {
        BraidCandidate c;
        c.choice.base = std::move(base);
        c.choice.critical_path_priorities = priorities;
        c.plan = std::move(plan);
        return c;
    };
    all.push_back(baseline("serial", serial(graph, dev.key)));
    all.push_back(baseline("nimble", nimble(graph, dev.key)));
    all.push_back(baseline("nimble", nimble_critical_path(graph, costs, dev.key), true));
    all.push_back(baseline("glp4nn", glp4nn(graph, dev, costs, options.max_streams, dev.key)));
    all.push_back(baseline("ooo", ooo(graph, dev.key)));
    all.push_back(baseline("opara", opara(graph, costs, dev.key)));
    if (options.weigh_ios) {
        IosOptions io;
        io.mode = options.mode;
        io.sim = options.sim;
        all.push_back(baseline("ios", ios(graph, dev, costs, io, options.max_streams, dev.key)));
    }
    const std::size_t baselines = all.size();

    for (const ListSchedule& v : detail_braid::variants(options.max_streams, planner.any_side(), planner.any_splittable())) {
        BraidCandidate c;
        c.choice.schedule = v;
        c.plan = planner.schedule(v);
        c.fluid_ns = planner.fluid_ns(c.plan);
        if (v.streams() > 1) {
            // The same placement and waits with every stream at the default priority.
            BraidCandidate flat = c;
            flat.choice.schedule.equal_priorities = true;
            std::fill(flat.plan.stream_priorities.begin(), flat.plan.stream_priorities.end(), 0);
            flat.fluid_ns = planner.fluid_ns(flat.plan);
            all.push_back(std::move(flat));
        }
        all.push_back(std::move(c));
    }
    for (BraidCandidate& c : all) c.eligible = c.plan.stream_count() <= options.max_streams;

    // Judging order of the own schedules: the fluid model's best few overall,
    // then the best remaining plan of each stream count, then each count's
    // next best, and so on — the coarse model ranks plans of one stream count
    // better than plans of different counts.
    {
        auto own = all.begin() + static_cast<std::ptrdiff_t>(baselines);
        std::stable_sort(own, all.end(), [](const BraidCandidate& a, const BraidCandidate& b) { return a.fluid_ns < b.fluid_ns; });
        constexpr std::size_t overall_first = 8;
        std::map<std::uint32_t, std::uint32_t> seen;  // stream count -> candidates of it so far
        const std::size_t n = static_cast<std::size_t>(all.end() - own);
        std::vector<std::pair<std::uint32_t, std::size_t>> key(n);
        for (std::size_t i = 0; i < n; ++i)
            key[i] = {i < overall_first ? 0u : 1u + seen[own[static_cast<std::ptrdiff_t>(i)].plan.stream_count()]++, i};
        std::sort(key.begin(), key.end());
        std::vector<BraidCandidate> reordered;
        reordered.reserve(n);
        for (const auto& [round, i] : key) reordered.push_back(std::move(own[static_cast<std::ptrdiff_t>(i)]));
        std::move(reordered.begin(), reordered.end(), own);
    }

    // The fastest eligible plan wins; ties go to fewer streams, then fewer waits.
    auto better = [](const BraidCandidate& c, const BraidCandidate& best) {
        const double tol = 1e-9 * std::max(c.simulated_ns, best.simulated_ns);
        if (c.simulated_ns < best.simulated_ns - tol) return true;
        if (c.simulated_ns > best.simulated_ns + tol) return false;
        if (c.plan.stream_count() != best.plan.stream_count()) return c.plan.stream_count() < best.plan.stream_count();
        return c.plan.waits.size() < best.plan.waits.size();
    };
    std::uint64_t block_events = 0;
    std::uint32_t simulated_own = 0, simulated = 0;
    bool have_winner = false;
    std::vector<std::size_t> judged;
    std::vector<double> completed;  // the best complete_top times so far, ascending
    const std::size_t keep = std::max<std::uint32_t>(1, options.complete_top);
    auto judge = [&](std::size_t i) {
        BraidCandidate& c = all[i];
        if (!c.eligible) return false;
        const bool wanted = i < baselines && options.keep_baseline_timelines;
        for (std::size_t j : judged)  // the same plan twice: nothing to learn, unless its timeline is wanted
            if (!wanted && all[j].plan.steps == c.plan.steps && all[j].plan.stream_priorities == c.plan.stream_priorities)
                return false;
        judged.push_back(i);
        ++simulated;
        // A candidate is given up once it is sure to lose to the best so far,
        // unless it is a baseline whose timeline was asked for.
        const bool to_the_end = completed.size() < keep || wanted;
        const double limit = to_the_end ? std::numeric_limits<double>::infinity() : completed.back() * (1.0 + 1e-9);
        std::uint64_t events = 0;
        std::optional<SimulatedPlan> run =
            simulate_plan_within(graph, c.plan, dev, costs, options.mode, options.sim, limit, events);
        block_events += events;
        if (!run) {
            c.cut_off = true;
            return true;
        }
        SimulatedPlan& sp = *run;
        c.simulated_ns = sp.result.makespan_ns;
        completed.insert(std::upper_bound(completed.begin(), completed.end(), c.simulated_ns), c.simulated_ns);
        if (completed.size() > keep) completed.pop_back();
        const bool wins = !have_winner || better(c, all[out.winner]);
        if (wins || wanted) c.simulated = std::move(sp);
        if (wins) {
            if (have_winner && !(out.winner < baselines && options.keep_baseline_timelines))
                all[out.winner].simulated.reset();
            out.winner = i;
            have_winner = true;
        }
        return true;
    };
    // Own schedules first, best-ranked first, so that a good time to beat
    // is known early and the rest are given up sooner; then the baselines,
    // which are always judged.
    for (std::size_t i = baselines; i < all.size(); ++i) {
        if (simulated_own >= options.simulate_top || block_events >= options.block_event_budget) break;
        if (judge(i)) ++simulated_own;
    }
    for (std::size_t i = 0; i < baselines; ++i) judge(i);
    if (!have_winner) throw PlanError("braid: no candidate plan honours max_streams " + std::to_string(options.max_streams));

    out.record = StrategyOptions{};
    out.record.max_streams = options.max_streams;
    out.record.mode = options.mode;
    out.record.candidates = static_cast<std::uint32_t>(all.size());
    out.record.simulated = simulated;
    out.plan = out.plan_of(out.winner);
    out.predicted_ns = all[out.winner].simulated_ns;
    return out;
}

inline Plan braid(const OpGraph& graph, const DeviceSpec& dev, std::span<const OpCost> costs, const BraidOptions& options = {}) {
    return braid_plan(graph, dev, costs, options).plan;
}

}  // namespace braid::strategy
