// Random op graphs over random buffers (roots, byte-range views, strided
// views) whose ops run hashop::OpDesc, a serial reference to compare with,
// and a generator of random valid plans. Shared by the executor tests.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "braid/graph/op_graph.hpp"
#include "braid/plan/plan.hpp"
#include "braid/plan/waits.hpp"
#include "hash_op.h"

namespace braid::testing {

struct RandomCase {
    OpGraph graph;
    std::vector<hashop::OpDesc> ops;  // per OpId
    std::vector<std::uint8_t> initial;  // the arena before an iteration
};

struct RandomCaseOptions {
    std::uint32_t min_ops = 3;
    std::uint32_t max_ops = 40;
};

inline hashop::View view_of(const OpGraph& g, BufferId b, const std::vector<std::uint64_t>& root_base) {
    const Buffer& buf = g.buffer(b);
    return hashop::View{root_base[buf.root] + buf.root_offset_bytes, buf.bytes, buf.chunks,
                        buf.chunks > 1 ? buf.stride_bytes : buf.bytes};
}

inline RandomCase make_random_case(std::uint64_t seed, const RandomCaseOptions& opt = {}) {
    std::mt19937_64 rng(seed);
    auto pick = [&](std::uint64_t lo, std::uint64_t hi) {  // inclusive
        return std::uniform_int_distribution<std::uint64_t>(lo, hi)(rng);
    };
    OpGraphBuilder b;
    std::vector<BufferId> contiguous;  // roots and contiguous views: may parent views
    std::vector<BufferId> all;
    const std::uint64_t roots = pick(2, 8);
    for (std::uint64_t r = 0; r < roots; ++r) {
        BufferId id = b.add_buffer("root" + std::to_string(r), pick(8, 160));
        contiguous.push_back(id);
        all.push_back(id);
    }
    const std::uint64_t views = pick(0, 8);
    for (std::uint64_t v = 0; v < views; ++v) {
        const BufferId parent = contiguous[pick(0, contiguous.size() - 1)];
        const std::uint64_t pbytes = b.buffer(parent).bytes;
        const std::string name = "view" + std::to_string(v);
        if (pick(0, 2) == 0 && pbytes >= 4) {
            const std::uint64_t chunks = pick(2, std::min<std::uint64_t>(4, pbytes / 2));
            const std::uint64_t stride = pick(1, pbytes / chunks);
            const std::uint64_t chunk = pick(1, stride);
            const std::uint64_t offset = pick(0, pbytes - ((chunks - 1) * stride + chunk));
            all.push_back(b.add_strided_view(name, parent, offset, chunk, stride, chunks));
        } else {
            const std::uint64_t offset = pick(0, pbytes - 1);
            const std::uint64_t bytes = pick(1, pbytes - offset);
            BufferId id = b.add_view(name, parent, offset, bytes);
            contiguous.push_back(id);
            all.push_back(id);
        }
    }

    // Arena layout: roots one after another.
    std::vector<std::uint64_t> root_base(roots, 0);
    std::uint64_t arena = 0;
    for (std::uint64_t r = 0; r < roots; ++r) {
        root_base[r] = arena;
        arena += b.buffer(static_cast<BufferId>(r)).bytes;
    }
    auto bytes_of = [&](BufferId id) {  // arena addresses a buffer covers
        const Buffer& buf = b.buffer(id);
        std::vector<std::uint64_t> out;
        for (std::uint64_t c = 0; c < buf.chunks; ++c)
            for (std::uint64_t k = 0; k < buf.bytes; ++k)
                out.push_back(root_base[buf.root] + buf.root_offset_bytes + c * buf.stride_bytes + k);
        std::sort(out.begin(), out.end());
        return out;
    };
    auto overlap = [&](BufferId x, BufferId y) {
        const auto a = bytes_of(x), c = bytes_of(y);
        std::vector<std::uint64_t> both;
        std::set_intersection(a.begin(), a.end(), c.begin(), c.end(), std::back_inserter(both));
        return !both.empty();
    };
    static constexpr OpKind kinds[] = {OpKind::forward, OpKind::backward_data, OpKind::backward_weight,
                                       OpKind::update, OpKind::other};

    const std::uint64_t n_ops = pick(opt.min_ops, opt.max_ops);
    for (std::uint64_t i = 0; i < n_ops; ++i) {
        OpSpec spec;
        spec.name = "op" + std::to_string(i);
        spec.kind = kinds[pick(0, 4)];
        std::vector<BufferId> shuffled = all;
        std::shuffle(shuffled.begin(), shuffled.end(), rng);
        const std::uint64_t reads = pick(0, std::min<std::uint64_t>(3, shuffled.size()));
        spec.reads.assign(shuffled.begin(), shuffled.begin() + static_cast<std::ptrdiff_t>(reads));
        std::shuffle(shuffled.begin(), shuffled.end(), rng);
        const std::uint64_t writes = pick(1, std::min<std::uint64_t>(2, shuffled.size()));
        spec.writes.assign(shuffled.begin(), shuffled.begin() + static_cast<std::ptrdiff_t>(writes));
        if (pick(0, 4) < 2) {
            // Splittable only when its per-image slices cannot meet: every two
            // buffers it touches are the same buffer or disjoint.
            std::vector<BufferId> touched = spec.reads;
            touched.insert(touched.end(), spec.writes.begin(), spec.writes.end());
            bool ok = true;
            for (std::size_t x = 0; x < touched.size() && ok; ++x)
                for (std::size_t y = x + 1; y < touched.size() && ok; ++y)
                    if (touched[x] != touched[y] && overlap(touched[x], touched[y])) ok = false;
            if (ok) spec.split_batch = static_cast<std::uint32_t>(pick(2, 6));
        }
        b.add_op(std::move(spec));
    }

    RandomCase out{b.finalize(), {}, {}};
    for (const Op& op : out.graph.ops()) {
        hashop::OpDesc d;
        d.op = op.id;
        d.batch = op.splittable() ? op.split_batch : 0;
        d.reads = static_cast<std::uint32_t>(op.reads.size());
        d.writes = static_cast<std::uint32_t>(op.writes.size());
        for (std::size_t r = 0; r < op.reads.size(); ++r) d.read[r] = view_of(out.graph, op.reads[r], root_base);
        for (std::size_t w = 0; w < op.writes.size(); ++w) d.write[w] = view_of(out.graph, op.writes[w], root_base);
        out.ops.push_back(d);
    }
    out.initial.resize(arena);
    for (std::uint64_t i = 0; i < arena; ++i) out.initial[i] = static_cast<std::uint8_t>(hashop::mix(seed + i));
    return out;
}

// `iterations` iterations in program order (a valid topological order),
// from the initial arena.
inline std::vector<std::uint8_t> serial_reference(const RandomCase& c, int iterations = 1) {
    std::vector<std::uint8_t> arena = c.initial;
    for (int it = 0; it < iterations; ++it)
        for (const hashop::OpDesc& d : c.ops) hashop::run_images(d, 0, d.batch, arena.data());
    return arena;
}

// A random valid plan: random splits of splittable ops, a random topological
// issue order of the steps, a random stream per step, random priorities,
// then minimal waits.
inline Plan random_plan(const OpGraph& g, std::mt19937_64& rng, std::uint32_t streams) {
    auto pick = [&](std::uint64_t lo, std::uint64_t hi) {
        return std::uniform_int_distribution<std::uint64_t>(lo, hi)(rng);
    };
    Plan plan;
    plan.strategy = "random";
    plan.graph_fingerprint = g.fingerprint();
    for (std::uint32_t s = 0; s < streams; ++s) plan.stream_priorities.push_back(-static_cast<int>(pick(0, 2)));

    const std::size_t n = g.op_count();
    std::vector<std::uint32_t> parts(n, 1);
    for (const Op& op : g.ops())
        if (op.splittable() && pick(0, 2) != 0)
            parts[op.id] = static_cast<std::uint32_t>(pick(1, std::min<std::uint32_t>(4, op.split_batch)));

    std::vector<std::uint32_t> preds_left(n), parts_left(parts);
    std::vector<PlanStep> ready;
    auto make_ready = [&](OpId op) {
        for (std::uint32_t p = 0; p < parts[op]; ++p) ready.push_back(PlanStep{op, p, parts[op], 0});
    };
    for (OpId v = 0; v < n; ++v) {
        preds_left[v] = static_cast<std::uint32_t>(g.predecessors(v).size());
        if (preds_left[v] == 0) make_ready(v);
    }
    while (!ready.empty()) {
        const std::size_t i = pick(0, ready.size() - 1);
        PlanStep step = ready[i];
        ready.erase(ready.begin() + static_cast<std::ptrdiff_t>(i));
        step.stream = static_cast<std::uint32_t>(pick(0, streams - 1));
        plan.steps.push_back(step);
        if (--parts_left[step.op] == 0)
            for (OpId s : g.successors(step.op))
                if (--preds_left[s] == 0) make_ready(s);
    }
    assign_minimal_waits(plan, g);
    return plan;
}

// Named plan sources: each makes a valid plan for a graph with at most
// `max_streams` streams.
struct PlanSource {
    std::string name;
    std::function<Plan(const OpGraph&, std::mt19937_64&, std::uint32_t max_streams)> make;
};

}  // namespace braid::testing
