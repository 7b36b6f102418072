// Graphs and costs for planner tests and benchmarks: random DAGs of several
// shapes, training-shaped graphs (forward, backward-data, weight-gradient and
// update ops), and hand-made ones (diamond, Inception-like, residual chain).
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "braid/graph/op_graph.hpp"
#include "braid/model/cost.hpp"
#include "braid/model/device_table.hpp"

namespace braid::testing {

struct TestGraph {
    std::string name;
    OpGraph graph;
    OpCosts costs;
};

inline KernelCost random_kernel(std::mt19937_64& rng, const std::string& name) {
    std::uniform_int_distribution<int> grid_log(0, 13);
    const std::uint32_t threads[] = {64, 128, 256, 512};
    const std::uint32_t regs[] = {24, 32, 48, 64, 96, 128};
    KernelCost k;
    k.shape.name = name;
    k.shape.grid = {static_cast<std::uint32_t>(1u << grid_log(rng)) + static_cast<std::uint32_t>(rng() % 37), 1, 1};
    k.shape.block = {threads[rng() % 4], 1, 1};
    k.shape.regs_per_thread = regs[rng() % 6];
    k.shape.static_smem_bytes = (rng() % 3 == 0) ? static_cast<std::uint32_t>(1024 * (rng() % 40)) : 0u;
    k.duration_ns = 3000.0 + static_cast<double>(rng() % 200000);
    if (rng() % 3 == 0) k.dram_bytes = k.duration_ns * static_cast<double>(500 + rng() % 3000);  // up to ~3.5 TB/s
    return k;
}

inline OpCost random_cost(std::mt19937_64& rng, const std::string& op) {
    OpCost c;
    const int kernels = 1 + static_cast<int>(rng() % 3);
    for (int i = 0; i < kernels; ++i) c.kernels.push_back(random_kernel(rng, op + ".k" + std::to_string(i)));
    return c;
}

// Ops write one buffer each and read a few earlier ones; `window` bounds how
// far back reads reach (small: narrow graphs, large: wide ones).
inline TestGraph random_dag(std::uint64_t seed, int ops, int window, int max_reads, const std::string& name) {
    std::mt19937_64 rng(seed);
    OpGraphBuilder b;
    std::vector<BufferId> out;
    OpCosts costs;
    for (int i = 0; i < ops; ++i) {
        out.push_back(b.add_buffer("b" + std::to_string(i), 4096));
        OpSpec s;
        s.name = "op" + std::to_string(i);
        s.kind = static_cast<OpKind>(rng() % 4);
        const int reads = i == 0 ? 0 : static_cast<int>(rng() % (max_reads + 1));
        for (int r = 0; r < reads; ++r) {
            const int lo = std::max(0, i - window);
            s.reads.push_back(out[static_cast<std::size_t>(lo + static_cast<int>(rng() % (i - lo)))]);
        }
        s.writes.push_back(out.back());
        if (rng() % 4 == 0) s.split_batch = 2 + static_cast<std::uint32_t>(rng() % 31);
        b.add_op(s);
        costs.push_back(random_cost(rng, s.name));
    }
    return TestGraph{name, b.finalize(), std::move(costs)};
}

// Levels of independent ops; each op reads 1-3 ops of the previous level.
inline TestGraph layered_dag(std::uint64_t seed, int levels, int width, const std::string& name) {
    std::mt19937_64 rng(seed);
    OpGraphBuilder b;
    OpCosts costs;
    std::vector<BufferId> prev, cur;
    for (int l = 0; l < levels; ++l) {
        cur.clear();
        const int w = 1 + static_cast<int>(rng() % width);
        for (int i = 0; i < w; ++i) {
            OpSpec s;
            s.name = "L" + std::to_string(l) + "." + std::to_string(i);
            s.kind = OpKind::forward;
            if (!prev.empty())
                for (int r = 0, n = 1 + static_cast<int>(rng() % 3); r < n; ++r) s.reads.push_back(prev[rng() % prev.size()]);
            cur.push_back(b.add_buffer(s.name + ".out", 1024));
            s.writes.push_back(cur.back());
            b.add_op(s);
            costs.push_back(random_cost(rng, s.name));
        }
        prev = cur;
    }
    return TestGraph{name, b.finalize(), std::move(costs)};
}

// A training step of a chain of `layers` layers with an Inception-like fork
// every `fork_every` layers: forward, loss, then per layer (in reverse)
// backward-data, backward-weight and update. Costs scale with a layer's size.
inline TestGraph training_dag(std::uint64_t seed, int layers, int fork_every, const std::string& name,
                              std::uint32_t batch = 32) {
    std::mt19937_64 rng(seed);
    OpGraphBuilder b;
    OpCosts costs;
    struct Layer {
        BufferId in, out, w, gw, gin, gout;
    };
    std::vector<Layer> L;
    BufferId x = b.add_buffer("input", 1 << 20);
    BufferId gx = b.add_buffer("input.grad", 1 << 20);
    BufferId cur = x, cur_grad = gx;
    auto add = [&](OpSpec s, double scale) {
        b.add_op(s);
        OpCost c = random_cost(rng, s.name);
        for (auto& k : c.kernels) k.duration_ns *= scale;
        costs.push_back(std::move(c));
    };
    for (int l = 0; l < layers; ++l) {
        Layer ly;
        ly.in = cur;
        ly.gin = cur_grad;
        ly.out = b.add_buffer("act" + std::to_string(l), 1 << 20);
        ly.gout = b.add_buffer("act" + std::to_string(l) + ".grad", 1 << 20);
        ly.w = b.add_buffer("w" + std::to_string(l), 1 << 16);
        ly.gw = b.add_buffer("w" + std::to_string(l) + ".grad", 1 << 16);
        L.push_back(ly);
        cur = ly.out;
        cur_grad = ly.gout;
    }
    auto reads_of = [&](int l) {
        std::vector<BufferId> r{L[l].in, L[l].w};
        // a fork: this layer also reads the input of the layer before (a second branch)
        if (fork_every > 0 && l % fork_every == fork_every - 1 && l >= 1) r.push_back(L[l - 1].in);
        return r;
    };
    for (int l = 0; l < layers; ++l) {
        OpSpec s{"fwd" + std::to_string(l), OpKind::forward, "layer" + std::to_string(l), reads_of(l), {L[l].out}, batch};
        add(s, 1.0 + static_cast<double>(rng() % 4));
    }
    add(OpSpec{"loss", OpKind::forward, "loss", {L.back().out}, {L.back().gout}, 0}, 0.2);
    for (int l = layers - 1; l >= 0; --l) {
        OpSpec bd{"bwd_data" + std::to_string(l), OpKind::backward_data, "layer" + std::to_string(l),
                  {L[l].gout, L[l].w}, {L[l].gin}, batch};
        if (l == 0) bd.writes = {gx};
        add(bd, 1.0 + static_cast<double>(rng() % 4));
        add(OpSpec{"bwd_weight" + std::to_string(l), OpKind::backward_weight, "layer" + std::to_string(l),
                   {L[l].gout, L[l].in}, {L[l].gw}, 0},
            0.5 + static_cast<double>(rng() % 3));
        add(OpSpec{"update" + std::to_string(l), OpKind::update, "layer" + std::to_string(l), {L[l].gw, L[l].w},
                   {L[l].w}, 0},
            0.1);
    }
    return TestGraph{name, b.finalize(), std::move(costs)};
}

inline TestGraph diamond() {
    OpGraphBuilder b;
    BufferId in = b.add_buffer("in", 64), l = b.add_buffer("l", 64), r = b.add_buffer("r", 64), o = b.add_buffer("o", 64);
    b.add_op({"src", OpKind::forward, "", {}, {in}, 0});
    b.add_op({"left", OpKind::forward, "", {in}, {l}, 8});
    b.add_op({"right", OpKind::forward, "", {in}, {r}, 8});
    b.add_op({"join", OpKind::forward, "", {l, r}, {o}, 0});
    std::mt19937_64 rng(3);
    OpCosts c;
    for (const char* n : {"src", "left", "right", "join"}) c.push_back(random_cost(rng, n));
    return TestGraph{"diamond", b.finalize(), std::move(c)};
}

// An Inception module's shape: a fan-out to 4 branches of 1-3 ops writing
// slices of one concat buffer, then a consumer of the whole concat.
inline TestGraph inception_like(int modules) {
    OpGraphBuilder b;
    std::mt19937_64 rng(11);
    OpCosts c;
    BufferId cur = b.add_buffer("in", 4 * 1024);
    b.add_op({"stem", OpKind::forward, "stem", {}, {cur}, 16});
    c.push_back(random_cost(rng, "stem"));
    for (int m = 0; m < modules; ++m) {
        const std::string mod = "inc" + std::to_string(m);
        BufferId cat = b.add_buffer(mod + ".concat", 4 * 1024);
        for (int br = 0; br < 4; ++br) {
            BufferId slice = b.add_view(mod + ".slice" + std::to_string(br), cat, static_cast<std::uint64_t>(br) * 1024, 1024);
            BufferId in = cur;
            for (int k = 0; k <= br % 3; ++k) {
                const std::string name = mod + ".b" + std::to_string(br) + "." + std::to_string(k);
                BufferId out = k == br % 3 ? slice : b.add_buffer(name + ".out", 1024);
                b.add_op({name, OpKind::forward, mod, {in}, {out}, 16});
                c.push_back(random_cost(rng, name));
                in = out;
            }
        }
        cur = cat;
    }
    return TestGraph{"inception_like", b.finalize(), std::move(c)};
}

inline TestGraph residual_chain(int blocks) {
    OpGraphBuilder b;
    std::mt19937_64 rng(5);
    OpCosts c;
    BufferId cur = b.add_buffer("x0", 1024);
    b.add_op({"stem", OpKind::forward, "stem", {}, {cur}, 0});
    c.push_back(random_cost(rng, "stem"));
    for (int i = 0; i < blocks; ++i) {
        const std::string p = "res" + std::to_string(i);
        BufferId a = b.add_buffer(p + ".a", 1024), bb = b.add_buffer(p + ".b", 1024), sc = b.add_buffer(p + ".sc", 1024),
                 out = b.add_buffer(p + ".out", 1024);
        b.add_op({p + ".conv1", OpKind::forward, p, {cur}, {a}, 0});
        b.add_op({p + ".conv2", OpKind::forward, p, {a}, {bb}, 0});
        b.add_op({p + ".shortcut", OpKind::forward, p, {cur}, {sc}, 0});
        b.add_op({p + ".add", OpKind::forward, p, {bb, sc}, {out}, 0});
        for (const char* n : {".conv1", ".conv2", ".shortcut", ".add"}) c.push_back(random_cost(rng, p + n));
        cur = out;
    }
    return TestGraph{"residual_chain", b.finalize(), std::move(c)};
}

// The graphs planner tests iterate over.
inline std::vector<TestGraph> planner_test_graphs() {
    std::vector<TestGraph> g;
    g.push_back(diamond());
    g.push_back(inception_like(3));
    g.push_back(residual_chain(4));
    g.push_back(random_dag(1, 1, 1, 1, "single"));
    g.push_back(random_dag(2, 12, 2, 2, "narrow12"));
    g.push_back(random_dag(3, 40, 30, 3, "wide40"));
    g.push_back(random_dag(4, 120, 8, 2, "random120"));
    g.push_back(layered_dag(5, 10, 6, "layered"));
    g.push_back(training_dag(6, 12, 3, "training12"));
    g.push_back(random_dag(7, 500, 20, 3, "random500"));
    return g;
}

}  // namespace braid::testing
