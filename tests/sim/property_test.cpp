// Random DAG-shaped programs, simulated: every stream order and every wait
// holds, two runs agree bit for bit, and the makespan never beats the lower
// bound — for plain, split and Caffe-style per-image ops, eager and graph.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "braid/graph/op_graph.hpp"
#include "braid/model/batch_split.hpp"
#include "braid/model/cost.hpp"
#include "braid/model/lower_bound.hpp"
#include "braid/sim/simulator.hpp"
#include "sim_fixtures.hpp"

using namespace braid;
using namespace braid::sim;
using namespace braid::sim::test;

namespace {

struct Case {
    OpGraph graph;
    OpCosts costs;
    Program program;
    Params params;
    std::vector<std::vector<std::uint32_t>> op_kernels;  // per op: its kernels in the program (all parts)
};

KernelCost random_kernel(std::mt19937_64& rng, const DeviceSpec& dev, const std::string& name) {
    std::uniform_int_distribution<std::uint32_t> warps(1, 32);
    const std::uint32_t regs_choice[] = {16, 24, 32, 40, 64, 96, 128, 168, 255};
    const std::uint32_t smem_choice[] = {0, 0, 0, 4096, 16384, 49152, 102400, 200000};
    std::uniform_int_distribution<std::size_t> pick_regs(0, std::size(regs_choice) - 1);
    std::uniform_int_distribution<std::size_t> pick_smem(0, std::size(smem_choice) - 1);
    std::uniform_real_distribution<double> log_grid(0.0, std::log(30000.0));
    std::uniform_real_distribution<double> log_ns(std::log(800.0), std::log(400000.0));
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    for (;;) {
        KernelCost k;
        k.shape.name = name;
        const auto g = static_cast<std::uint32_t>(std::exp(log_grid(rng)));
        if (unit(rng) < 0.3) {
            k.shape.grid = {std::max(1u, g / 8), 8, 1};
        } else {
            k.shape.grid = {std::max(1u, g), 1, 1};
        }
        k.shape.block = {32 * warps(rng), 1, 1};
        k.shape.regs_per_thread = regs_choice[pick_regs(rng)];
        k.shape.dynamic_smem_bytes = smem_choice[pick_smem(rng)];
        try {
            (void)occupancy(dev, k.shape);
        } catch (const ModelError&) {
            continue;  // does not fit: draw again
        }
        k.duration_ns = std::exp(log_ns(rng));
        if (unit(rng) < 0.5) k.dram_bytes = unit(rng) * 3.0 * dev.dram_bytes_per_ns() * k.duration_ns;
        return k;
    }
}

Case random_case(std::uint64_t seed, const DeviceSpec& dev) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    std::uniform_int_distribution<std::uint32_t> op_count(2, 28);
    const std::uint32_t n = op_count(rng);
    const std::uint32_t batch = unit(rng) < 0.5 ? 4 : 6;

    OpGraphBuilder gb;
    std::vector<BufferId> out;
    OpCosts costs(n);
    for (std::uint32_t i = 0; i < n; ++i) {
        out.push_back(gb.add_buffer("b" + std::to_string(i), 1024));
        OpSpec spec;
        spec.name = "op" + std::to_string(i);
        if (i > 0) {
            std::uniform_int_distribution<std::uint32_t> reads(0, 3), earlier(0, i - 1);
            for (std::uint32_t r = reads(rng); r > 0; --r) spec.reads.push_back(out[earlier(rng)]);
        }
        spec.writes.push_back(out[i]);
        const bool splittable = unit(rng) < 0.35;
        if (splittable) spec.split_batch = batch;
        gb.add_op(spec);
        if (splittable && unit(rng) < 0.4) {
            const std::uint32_t per = unit(rng) < 0.5 ? 1 : 2;
            costs[i].launches_per_image = per;
            for (std::uint32_t j = 0; j < batch * per; ++j) {
                KernelCost k = random_kernel(rng, dev, spec.name + "_img" + std::to_string(j));
                k.shape.grid = {std::min(k.shape.grid.x, 400u), 1, 1};
                k.duration_ns = std::min(k.duration_ns, 20000.0);
                costs[i].kernels.push_back(k);
            }
        } else {
            std::uniform_int_distribution<int> kernels(1, 3);
            for (int j = kernels(rng); j > 0; --j) costs[i].kernels.push_back(random_kernel(rng, dev, spec.name + "_k" + std::to_string(j)));
        }
    }
    Case c{gb.finalize(), std::move(costs), {}, {}, {}};
    c.op_kernels.resize(n);

    std::uniform_int_distribution<std::uint32_t> stream_count(1, 4);
    const std::uint32_t streams = stream_count(rng);
    std::uniform_int_distribution<int> priority(-2, 0);
    for (std::uint32_t s = 0; s < streams; ++s) c.program.stream_priorities.push_back(priority(rng));
    c.program.mode = unit(rng) < 0.5 ? LaunchMode::eager : LaunchMode::graph;
    std::uniform_int_distribution<std::uint32_t> pick_stream(0, streams - 1);

    // Ops in id order (a topological order: edges only go to later ops);
    // each step records its own event; a step waits for every step of every
    // predecessor on another stream.
    std::vector<std::vector<std::pair<std::uint32_t, std::uint32_t>>> op_steps(n);  // (stream, event)
    std::uint32_t events = 0;
    for (OpId op = 0; op < n; ++op) {
        std::uint32_t parts = 1;
        if (c.graph.op(op).splittable()) {
            const std::uint32_t choice[] = {1, 2, 3, batch};
            parts = choice[std::uniform_int_distribution<std::size_t>(0, 3)(rng)];
        }
        for (std::uint32_t part = 0; part < parts; ++part) {
            const std::uint32_t s = pick_stream(rng);
            for (OpId pred : c.graph.predecessors(op))
                for (const auto& [ps, event] : op_steps[pred])
                    if (ps != s || unit(rng) < 0.1)  // a few redundant same-stream waits too
                        c.program.actions.push_back(Action{ActionKind::wait, s, event});
            const OpCost body = parts > 1 ? split_part(dev, c.costs[op], batch, parts, part) : c.costs[op];
            for (const KernelCost& k : body.kernels) {
                const auto idx = static_cast<std::uint32_t>(c.program.kernels.size());
                c.program.kernels.push_back(Kernel{k, op, c.graph.op(op).name});
                c.program.actions.push_back(Action{ActionKind::launch, s, idx});
                c.op_kernels[op].push_back(idx);
            }
            c.program.actions.push_back(Action{ActionKind::record, s, events});
            op_steps[op].emplace_back(s, events++);
        }
    }
    c.program.event_count = events;

    const int limits[] = {0, 0, 1, 2, 5};
    c.params.max_resident_kernels = limits[std::uniform_int_distribution<std::size_t>(0, 4)(rng)];
    c.params.share_bandwidth = unit(rng) < 0.8;
    c.params.dispatch_latency_ns = unit(rng) < 0.3 ? 0.0 : 1000.0 * unit(rng);
    // The calibrated effects only ever slow things down: the bound holds with them.
    c.params.corun_slowdown = unit(rng) < 0.5 ? 0.0 : 1.5 * unit(rng);
    c.params.event_latency_ns = unit(rng) < 0.5 ? 0.0 : 3000.0 * unit(rng);
    c.params.eager_dispatch_extra_ns = unit(rng) < 0.5 ? 0.0 : 3000.0 * unit(rng);
    c.params.op_host_ns = unit(rng) < 0.5 ? 0.0 : 5000.0 * unit(rng);
    return c;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

bool identical(const Result& a, const Result& b) {
    if (!same_bits(a.makespan_ns, b.makespan_ns) || !same_bits(a.mean_busy_sm_fraction, b.mean_busy_sm_fraction) ||
        a.block_events != b.block_events || a.kernels.size() != b.kernels.size() || a.ops.size() != b.ops.size() ||
        a.utilisation.size() != b.utilisation.size())
        return false;
    for (std::size_t i = 0; i < a.kernels.size(); ++i) {
        const KernelRecord &x = a.kernels[i], &y = b.kernels[i];
        if (!same_bits(x.issue_ns, y.issue_ns) || !same_bits(x.runnable_ns, y.runnable_ns) ||
            !same_bits(x.resident_ns, y.resident_ns) || !same_bits(x.start_ns, y.start_ns) ||
            !same_bits(x.end_ns, y.end_ns) || x.stream != y.stream || x.sms_used != y.sms_used)
            return false;
    }
    for (std::size_t i = 0; i < a.ops.size(); ++i)
        if (a.ops[i].op != b.ops[i].op || !same_bits(a.ops[i].start_ns, b.ops[i].start_ns) ||
            !same_bits(a.ops[i].end_ns, b.ops[i].end_ns) || a.ops[i].sms_used != b.ops[i].sms_used)
            return false;
    for (std::size_t i = 0; i < a.utilisation.size(); ++i)
        if (!same_bits(a.utilisation[i].time_ns, b.utilisation[i].time_ns) ||
            a.utilisation[i].busy_sms != b.utilisation[i].busy_sms ||
            !same_bits(a.utilisation[i].warp_fraction, b.utilisation[i].warp_fraction))
            return false;
    return true;
}

constexpr double slack = 1e-9;  // relative: sums of block times in floating point

}  // namespace

TEST_CASE("random DAG programs: orders hold, runs repeat bit for bit, makespan >= lower bound") {
    const DeviceSpec& dev = h200();
    constexpr int cases = 250;
    int split_cases = 0, graph_cases = 0, limited_cases = 0;
    double tightest = 1e300;
    for (int i = 0; i < cases; ++i) {
        const Case c = random_case(0x5eed0000u + static_cast<std::uint64_t>(i), dev);
        CAPTURE(i);
        const Program& p = c.program;
        const Result r = simulate(dev, p, c.params);
        const Result again = simulate(dev, p, c.params);
        REQUIRE(identical(r, again));

        // Every kernel: its stages in order, at least its isolated time.
        std::uint64_t blocks = 0;
        for (std::size_t k = 0; k < p.kernels.size(); ++k) {
            const KernelRecord& kr = r.kernels[k];
            CHECK(kr.runnable_ns >= kr.issue_ns);
            const double dispatch = c.params.dispatch_latency_ns +
                                    (p.mode == LaunchMode::eager ? c.params.eager_dispatch_extra_ns : 0.0);
            CHECK(kr.resident_ns >= kr.runnable_ns + dispatch * (1 - slack));
            CHECK(kr.start_ns >= kr.resident_ns);
            CHECK(kr.end_ns - kr.start_ns >= p.kernels[k].cost.duration_ns * (1 - slack));
            CHECK(kr.sms_used >= 1);
            blocks += p.kernels[k].cost.shape.blocks();
        }
        CHECK(r.block_events == 2 * blocks);

        // Stream order, and every wait against the record it binds to.
        std::vector<std::vector<std::uint32_t>> on_stream(p.stream_count());  // kernels so far
        std::vector<std::pair<std::uint32_t, std::size_t>> record_of(p.event_count, {0, 0});  // (stream, kernels before)
        std::vector<double> stream_floor(p.stream_count(), 0.0);  // kernels after this point start no earlier
        for (const Action& a : p.actions) {
            auto& mine = on_stream[a.stream];
            if (a.kind == ActionKind::launch) {
                const KernelRecord& kr = r.kernels[a.index];
                if (!mine.empty()) CHECK(kr.start_ns >= r.kernels[mine.back()].end_ns);
                CHECK(kr.start_ns >= stream_floor[a.stream]);
                mine.push_back(a.index);
            } else if (a.kind == ActionKind::record) {
                record_of[a.index] = {a.stream, mine.size()};
            } else {
                const auto& [rs, before] = record_of[a.index];
                for (std::size_t j = 0; j < before; ++j)
                    stream_floor[a.stream] = std::max(stream_floor[a.stream], r.kernels[on_stream[rs][j]].end_ns);
            }
        }

        // Every graph edge: all of the predecessor's kernels end before any of the successor's start.
        for (const Edge& e : c.graph.edges())
            for (std::uint32_t u : c.op_kernels[e.from])
                for (std::uint32_t v : c.op_kernels[e.to]) CHECK(r.kernels[u].end_ns <= r.kernels[v].start_ns);

        // The resident-kernel limit.
        const std::uint32_t limit =
            c.params.max_resident_kernels > 0 ? static_cast<std::uint32_t>(c.params.max_resident_kernels) : dev.max_resident_grids;
        std::vector<std::pair<double, int>> sweep;  // ends (-1) sort before starts (+1) at one instant
        for (const KernelRecord& kr : r.kernels) {
            sweep.emplace_back(kr.resident_ns, +1);
            sweep.emplace_back(kr.end_ns, -1);
        }
        std::sort(sweep.begin(), sweep.end());
        int resident = 0, most = 0;
        for (const auto& [t, d] : sweep) most = std::max(most, resident += d);
        CHECK(static_cast<std::uint32_t>(most) <= limit);

        const LowerBound lb = lower_bound(dev, c.graph, c.costs, c.params.share_bandwidth);
        CHECK(lb.bound_ns > 0);
        CHECK(r.makespan_ns >= lb.bound_ns * (1 - slack));
        tightest = std::min(tightest, r.makespan_ns / lb.bound_ns);

        bool split = false;
        for (const Op& op : c.graph.ops()) split |= op.splittable();
        split_cases += split;
        graph_cases += p.mode == LaunchMode::graph;
        limited_cases += c.params.max_resident_kernels > 0;
    }
    // The generator reached the cases it is meant to cover.
    CHECK(split_cases > cases / 4);
    CHECK(graph_cases > cases / 4);
    CHECK(limited_cases > cases / 4);
    MESSAGE("tightest makespan / lower bound over " << cases << " programs: " << tightest);
}
