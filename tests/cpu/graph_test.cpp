#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "braid/graph/op_graph.hpp"

#include "error_of.hpp"

using namespace braid;
using braid::testing::error_of;

namespace {

OpSpec op(std::string name, std::vector<BufferId> reads, std::vector<BufferId> writes,
          OpKind kind = OpKind::forward) {
    OpSpec s;
    s.name = std::move(name);
    s.kind = kind;
    s.reads = std::move(reads);
    s.writes = std::move(writes);
    return s;
}

std::set<std::pair<std::string, std::string>> edge_names(const OpGraph& g) {
    std::set<std::pair<std::string, std::string>> out;
    for (const Edge& e : g.edges()) out.emplace(g.op(e.from).name, g.op(e.to).name);
    return out;
}

}  // namespace

TEST_CASE("hazard kinds") {
    OpGraphBuilder b;
    BufferId x = b.add_buffer("x", 64);
    BufferId y = b.add_buffer("y", 64);
    OpId w1 = b.add_op(op("write_x", {}, {x}));
    OpId r1 = b.add_op(op("read_x", {x}, {y}));
    OpId w2 = b.add_op(op("rewrite_x", {}, {x}));
    OpGraph g = b.finalize();

    CHECK(g.edge_count() == 3);
    CHECK(edge_names(g) == std::set<std::pair<std::string, std::string>>{
                               {"write_x", "read_x"}, {"read_x", "rewrite_x"}, {"write_x", "rewrite_x"}});
    CHECK(g.edge_hazards(w1, r1) == hazard_raw);
    CHECK(g.edge_hazards(r1, w2) == hazard_war);
    CHECK(g.edge_hazards(w1, w2) == hazard_waw);
    CHECK(g.describe_edge(w1, r1) == "'write_x' -> 'read_x' (read-after-write)");
}

TEST_CASE("read after read adds no edge") {
    OpGraphBuilder b;
    BufferId w = b.add_buffer("weights", 128);
    BufferId a = b.add_buffer("a", 8);
    BufferId c = b.add_buffer("c", 8);
    b.add_op(op("reader1", {w}, {a}));
    b.add_op(op("reader2", {w}, {c}));
    OpGraph g = b.finalize();
    CHECK(g.edge_count() == 0);
    CHECK(g.level_widths() == std::vector<std::uint32_t>{2});
}

TEST_CASE("views: overlapping ranges conflict, disjoint ranges do not") {
    OpGraphBuilder b;
    BufferId cat = b.add_buffer("concat", 100);
    BufferId left = b.add_view("concat.left", cat, 0, 50);
    BufferId right = b.add_view("concat.right", cat, 50, 50);
    BufferId mid = b.add_view("concat.mid", cat, 40, 20);
    BufferId right_half = b.add_view("concat.right.tail", right, 25, 25);  // bytes [75,100) of concat

    OpId wl = b.add_op(op("write_left", {}, {left}));
    OpId wr = b.add_op(op("write_right", {}, {right}));
    OpId rm = b.add_op(op("read_mid", {mid}, {}));
    OpId rt = b.add_op(op("read_tail", {right_half}, {}));
    OpId rall = b.add_op(op("read_all", {cat}, {}));
    OpGraph g = b.finalize();

    CHECK_FALSE(g.has_edge(wl, wr));  // disjoint writes
    CHECK(g.edge_hazards(wl, rm) == hazard_raw);  // [40,50) overlaps the left slice
    CHECK(g.edge_hazards(wr, rm) == hazard_raw);  // [50,60) overlaps the right slice
    CHECK(g.edge_hazards(wr, rt) == hazard_raw);
    CHECK_FALSE(g.has_edge(wl, rt));
    CHECK(g.has_edge(wl, rall));
    CHECK(g.has_edge(wr, rall));
    CHECK_FALSE(g.has_edge(rm, rall));  // read-read
    CHECK(g.buffer(right_half).root == cat);
    CHECK(g.buffer(right_half).root_offset_bytes == 75);
}

TEST_CASE("strided views: channel slices of an NCHW tensor") {
    // 2 images x 4 channels x 8 bytes per channel plane: image n starts at n*32.
    OpGraphBuilder b;
    BufferId t = b.add_buffer("concat_out", 64);
    BufferId ch01 = b.add_strided_view("branch_a", t, 0, 16, 32, 2);   // channels 0-1 of both images
    BufferId ch23 = b.add_strided_view("branch_b", t, 16, 16, 32, 2);  // channels 2-3
    BufferId img1 = b.add_view("image1", t, 32, 32);
    OpId wa = b.add_op(op("write_a", {}, {ch01}));
    OpId wb = b.add_op(op("write_b", {}, {ch23}));
    OpId r1 = b.add_op(op("read_image1", {img1}, {}));
    OpId rb = b.add_op(op("read_b", {ch23}, {}));
    OpGraph g = b.finalize();
    CHECK_FALSE(g.has_edge(wa, wb));  // interleaved but disjoint
    CHECK(g.has_edge(wa, r1));        // image 1's channels 0-1
    CHECK(g.has_edge(wb, r1));
    CHECK(g.has_edge(wb, rb));
    CHECK_FALSE(g.has_edge(wa, rb));
    CHECK(g.buffer(ch23).total_bytes() == 32);

    OpGraphBuilder bad;
    BufferId p = bad.add_buffer("p", 64);
    CHECK_NOTHROW(bad.add_strided_view("s", p, 16, 16, 32, 2));  // last chunk ends exactly at byte 64
    CHECK(error_of([&] { bad.add_strided_view("s2", p, 40, 16, 32, 2); }) ==
          "view 's2' covers bytes [40, 88) but its parent 'p' has only 64 bytes");
    CHECK(error_of([&] { bad.add_strided_view("s3", p, 0, 16, 8, 2); }).find("overlap") != std::string::npos);
    BufferId s = bad.add_strided_view("s4", p, 0, 8, 32, 2);
    CHECK(error_of([&] { bad.add_view("inner", s, 0, 4); }).find("strided view 's4' as parent") != std::string::npos);
}

TEST_CASE("partial overlap of a write and a later wider write") {
    OpGraphBuilder b;
    BufferId buf = b.add_buffer("buf", 16);
    BufferId lo = b.add_view("lo", buf, 0, 8);
    OpId a = b.add_op(op("write_lo", {}, {lo}));
    OpId r = b.add_op(op("read_buf", {buf}, {}));
    OpId c = b.add_op(op("write_buf", {}, {buf}));
    OpGraph g = b.finalize();
    CHECK(g.edge_hazards(a, r) == hazard_raw);
    CHECK(g.edge_hazards(r, c) == hazard_war);
    CHECK((g.edge_hazards(a, c) & hazard_waw) != 0);
}

TEST_CASE("in-place ops (read and write the same buffer) chain correctly") {
    OpGraphBuilder b;
    BufferId w = b.add_buffer("w", 32);
    BufferId gw = b.add_buffer("grad_w", 32);
    OpId fwd = b.add_op(op("fwd", {w}, {}));
    OpId bw = b.add_op(op("bwd_w", {}, {gw}, OpKind::backward_weight));
    OpId upd = b.add_op(op("sgd", {w, gw}, {w}, OpKind::update));
    OpId fwd2 = b.add_op(op("fwd_next", {w}, {}));
    OpGraph g = b.finalize();
    CHECK(g.edge_hazards(fwd, upd) == hazard_war);
    CHECK(g.edge_hazards(bw, upd) == hazard_raw);
    CHECK(g.edge_hazards(upd, fwd2) == hazard_raw);
    CHECK_FALSE(g.has_edge(upd, upd));
}

TEST_CASE("explicit edges and their combination with hazards") {
    OpGraphBuilder b;
    BufferId x = b.add_buffer("x", 4);
    OpId a = b.add_op(op("a", {}, {x}));
    OpId c = b.add_op(op("c", {}, {}));
    OpId d = b.add_op(op("d", {x}, {}));
    b.add_edge(a, c);
    b.add_edge(a, d);
    OpGraph g = b.finalize();
    CHECK(g.edge_hazards(a, c) == hazard_explicit);
    CHECK(g.edge_hazards(a, d) == (hazard_raw | hazard_explicit));
    CHECK(hazard_names(g.edge_hazards(a, d)) == "read-after-write+explicit");
}

TEST_CASE("a cycle is reported with the ops on it") {
    OpGraphBuilder b;
    BufferId x = b.add_buffer("x", 4);
    BufferId y = b.add_buffer("y", 4);
    b.add_op(op("start", {}, {}));
    OpId p = b.add_op(op("produce", {}, {x}));
    OpId q = b.add_op(op("consume", {x}, {y}));
    OpId r = b.add_op(op("finish", {y}, {}));
    b.add_edge(r, p);  // backwards: produce -> consume -> finish -> produce
    (void)q;
    std::string msg = error_of([&] { (void)b.finalize(); });
    CHECK(msg.find("cycle") != std::string::npos);
    CHECK(msg.find("'produce' -> 'consume' -> 'finish' -> 'produce'") != std::string::npos);
    CHECK(msg.find("start") == std::string::npos);
}

TEST_CASE("topological order prefers program order and respects explicit edges") {
    OpGraphBuilder b;
    OpId a = b.add_op(op("a", {}, {}));
    OpId c = b.add_op(op("b", {}, {}));
    OpId d = b.add_op(op("c", {}, {}));
    b.add_edge(d, a);
    OpGraph g = b.finalize();
    auto order = g.topological_order();
    CHECK(std::vector<OpId>(order.begin(), order.end()) == std::vector<OpId>{c, d, a});
    CHECK(g.topological_position()[a] == 2);
}

TEST_CASE("transitive reduction of a known graph") {
    // a -> b -> c, a -> c (redundant), a -> d, d -> c, b -> e
    OpGraphBuilder b;
    std::vector<OpId> id;
    for (const char* n : {"a", "b", "c", "d", "e"}) id.push_back(b.add_op(op(n, {}, {})));
    auto E = [&](int u, int v) { b.add_edge(id[u], id[v]); };
    E(0, 1);
    E(1, 2);
    E(0, 2);
    E(0, 3);
    E(3, 2);
    E(1, 4);
    OpGraph g = b.finalize();
    std::vector<std::pair<OpId, OpId>> kept;
    for (const Edge& e : g.transitive_reduction()) kept.emplace_back(e.from, e.to);
    CHECK(kept == std::vector<std::pair<OpId, OpId>>{{0, 1}, {0, 3}, {1, 2}, {1, 4}, {3, 2}});

    auto reach = g.descendants();
    CHECK(reach.test(0, 4));
    CHECK_FALSE(reach.test(3, 4));
    CHECK(reach.count(0) == 4);
}

TEST_CASE("transitive reduction keeps reachability and removes every implied edge (random graphs)") {
    std::mt19937 rng(7);
    for (int trial = 0; trial < 40; ++trial) {
        OpGraphBuilder b;
        const int n = 2 + static_cast<int>(rng() % 30);
        for (int i = 0; i < n; ++i) b.add_op(op("op" + std::to_string(i), {}, {}));
        for (int i = 0; i < n; ++i)
            for (int j = i + 1; j < n; ++j)
                if (rng() % 5 == 0) b.add_edge(static_cast<OpId>(i), static_cast<OpId>(j));
        OpGraph g = b.finalize();
        auto red = g.transitive_reduction();
        // reachability through reduced edges, by brute force (Floyd–Warshall on booleans)
        std::vector<std::vector<bool>> r(n, std::vector<bool>(n));
        for (const Edge& e : red) r[e.from][e.to] = true;
        for (int k = 0; k < n; ++k)
            for (int i = 0; i < n; ++i)
                for (int j = 0; j < n; ++j)
                    if (r[i][k] && r[k][j]) r[i][j] = true;
        auto full = g.descendants();
        for (int i = 0; i < n; ++i)
            for (int j = 0; j < n; ++j) REQUIRE(r[i][j] == full.test(i, j));
        // no kept edge is implied by a two-step path of kept edges
        for (const Edge& e : red)
            for (const Edge& f : red)
                if (f.from == e.from && f.to != e.to) REQUIRE_FALSE(full.test(f.to, e.to));
    }
}

TEST_CASE("predecessors, successors and edges agree and are sorted by op id (random graphs)") {
    std::mt19937 rng(11);
    for (int trial = 0; trial < 40; ++trial) {
        const int n = 2 + static_cast<int>(rng() % 40);
        std::vector<std::pair<OpId, OpId>> added;
        for (int i = 0; i < n; ++i)
            for (int j = i + 1; j < n; ++j)
                if (rng() % 4 == 0) added.emplace_back(static_cast<OpId>(i), static_cast<OpId>(j));
        std::shuffle(added.begin(), added.end(), rng);  // the store must not keep insertion order
        OpGraphBuilder b;
        for (int i = 0; i < n; ++i) b.add_op(op("op" + std::to_string(i), {}, {}));
        for (auto [from, to] : added) b.add_edge(from, to);
        const OpGraph g = b.finalize();

        std::vector<std::vector<OpId>> preds(n), succs(n);
        std::sort(added.begin(), added.end());
        for (auto [from, to] : added) {
            succs[from].push_back(to);
            preds[to].push_back(from);
        }
        REQUIRE(g.edge_count() == added.size());
        std::vector<std::pair<OpId, OpId>> listed;
        for (const Edge& e : g.edges()) {
            listed.emplace_back(e.from, e.to);
            CHECK(e.hazards == hazard_explicit);
        }
        CHECK(listed == added);
        for (OpId v = 0; v < static_cast<OpId>(n); ++v) {
            const auto p = g.predecessors(v), s = g.successors(v);
            CHECK(std::vector<OpId>(p.begin(), p.end()) == preds[v]);
            CHECK(std::vector<OpId>(s.begin(), s.end()) == succs[v]);
            for (OpId w = 0; w < static_cast<OpId>(n); ++w)
                CHECK(g.has_edge(v, w) == std::binary_search(succs[v].begin(), succs[v].end(), w));
        }
        CHECK_THROWS_AS(g.predecessors(static_cast<OpId>(n)), std::out_of_range);
        CHECK_THROWS_AS(g.successors(static_cast<OpId>(n)), std::out_of_range);
    }
}

TEST_CASE("graphs are equal when ops, buffers and edges with their hazards are") {
    auto build = [](std::uint64_t bytes, bool declare_edge) {
        OpGraphBuilder b;
        const BufferId x = b.add_buffer("x", bytes);
        const OpId w = b.add_op(op("w", {}, {x}));
        const OpId r = b.add_op(op("r", {x}, {}));
        if (declare_edge) b.add_edge(w, r);
        return b.finalize();
    };
    const OpGraph g = build(64, false);
    const OpGraph copy = g;
    CHECK(copy == g);
    CHECK(build(64, false) == g);
    // Same fingerprint, yet other graphs: another buffer size, or the edge
    // declared as well as derived.
    CHECK(build(128, false).fingerprint() == g.fingerprint());
    CHECK(build(128, false) != g);
    CHECK(build(64, true).fingerprint() == g.fingerprint());
    CHECK(build(64, true) != g);
}

TEST_CASE("levels, widths and the critical path of a diamond") {
    OpGraphBuilder b;
    BufferId in = b.add_buffer("in", 8), l = b.add_buffer("l", 8), r = b.add_buffer("r", 8), out = b.add_buffer("out", 8);
    OpId src = b.add_op(op("src", {}, {in}));
    OpId left = b.add_op(op("left", {in}, {l}));
    OpId right = b.add_op(op("right", {in}, {r}));
    OpId join = b.add_op(op("join", {l, r}, {out}));
    OpGraph g = b.finalize();
    CHECK(g.levels() == std::vector<std::uint32_t>{0, 1, 1, 2});
    CHECK(g.level_widths() == std::vector<std::uint32_t>{1, 2, 1});

    std::vector<double> cost{1.0, 5.0, 7.0, 2.0};
    CriticalPath cp = g.critical_path(cost);
    CHECK(cp.length_ns == doctest::Approx(10.0));
    CHECK(cp.ops == std::vector<OpId>{src, right, join});
    auto rank = g.upward_ranks(cost);
    CHECK(rank[src] == doctest::Approx(10.0));
    CHECK(rank[left] == doctest::Approx(7.0));
    CHECK(rank[join] == doctest::Approx(2.0));
    (void)left;
}

TEST_CASE("fingerprint is stable and changes with names, kinds, splits and edges") {
    auto build = [](const char* second, OpKind kind, std::uint32_t split, bool extra_edge) {
        OpGraphBuilder b;
        BufferId x = b.add_buffer("x", 8);
        OpSpec first = op("first", {}, {x});
        first.split_batch = split;
        b.add_op(first);
        OpId s = b.add_op(op(second, {x}, {}, kind));
        OpId t = b.add_op(op("third", {}, {}));
        if (extra_edge) b.add_edge(s, t);
        return b.finalize().fingerprint();
    };
    const std::string base = build("second", OpKind::forward, 0, false);
    CHECK(base.rfind("fnv1a64:", 0) == 0);
    CHECK(base.size() == 8 + 16);
    CHECK(base == build("second", OpKind::forward, 0, false));
    CHECK(base != build("second2", OpKind::forward, 0, false));
    CHECK(base != build("second", OpKind::backward_data, 0, false));
    CHECK(base != build("second", OpKind::forward, 8, false));
    CHECK(base != build("second", OpKind::forward, 0, true));
}

TEST_CASE("bad input gets errors that name the thing") {
    SUBCASE("view outside its parent") {
        OpGraphBuilder b;
        BufferId p = b.add_buffer("parent", 10);
        std::string msg = error_of([&] { b.add_view("slice", p, 8, 4); });
        CHECK(msg.find("'slice'") != std::string::npos);
        CHECK(msg.find("'parent'") != std::string::npos);
        CHECK(msg.find("[8, 12)") != std::string::npos);
    }
    SUBCASE("op naming an unknown buffer") {
        OpGraphBuilder b;
        b.add_buffer("x", 4);
        std::string msg = error_of([&] { b.add_op(op("conv1", {0, 7}, {})); });
        CHECK(msg == "op 'conv1' reads unknown buffer id 7");
        msg = error_of([&] { b.add_op(op("conv2", {}, {3})); });
        CHECK(msg == "op 'conv2' writes unknown buffer id 3");
    }
    SUBCASE("duplicate names") {
        OpGraphBuilder b;
        b.add_buffer("x", 4);
        CHECK(error_of([&] { b.add_buffer("x", 8); }) == "duplicate buffer name 'x'");
        b.add_op(op("relu", {}, {}));
        CHECK(error_of([&] { b.add_op(op("relu", {}, {})); }) == "duplicate op name 'relu'");
    }
    SUBCASE("unknown buffer name") {
        OpGraphBuilder b;
        CHECK(error_of([&] { (void)b.buffer_id("nope"); }) == "no buffer named 'nope'");
    }
    SUBCASE("empty graph") {
        OpGraphBuilder b;
        CHECK(error_of([&] { (void)b.finalize(); }).find("empty graph") != std::string::npos);
    }
    SUBCASE("costs missing or invalid") {
        OpGraphBuilder b;
        b.add_op(op("a", {}, {}));
        b.add_op(op("b", {}, {}));
        OpGraph g = b.finalize();
        std::vector<double> one{1.0};
        CHECK(error_of([&] { (void)g.critical_path(one); }) ==
              "costs are missing for 1 op(s), the first being 'b'");
        std::vector<double> neg{1.0, -2.0};
        CHECK(error_of([&] { (void)g.critical_path(neg); }).find("op 'b' has cost") != std::string::npos);
    }
    SUBCASE("zero-byte buffer and self edge") {
        OpGraphBuilder b;
        CHECK(error_of([&] { b.add_buffer("empty", 0); }) == "buffer 'empty' has 0 bytes");
        OpId a = b.add_op(op("a", {}, {}));
        CHECK(error_of([&] { b.add_edge(a, a); }) == "explicit edge from op 'a' to itself");
        CHECK(error_of([&] { b.add_edge(a, 9); }) == "explicit edge names unknown op id 9");
    }
    SUBCASE("lookup of an unknown op") {
        OpGraphBuilder b;
        b.add_op(op("a", {}, {}));
        OpGraph g = b.finalize();
        CHECK(error_of([&] { (void)g.op_id("zzz"); }) == "no op named 'zzz'");
    }
}

TEST_CASE("a training-shaped graph of 2000 ops finalizes with program order as topological order") {
    OpGraphBuilder b;
    const int layers = 500;
    std::vector<BufferId> act, w, gw, ga;
    for (int l = 0; l <= layers; ++l) act.push_back(b.add_buffer("act" + std::to_string(l), 1024));
    for (int l = 0; l < layers; ++l) {
        w.push_back(b.add_buffer("w" + std::to_string(l), 256));
        gw.push_back(b.add_buffer("gw" + std::to_string(l), 256));
        ga.push_back(b.add_buffer("ga" + std::to_string(l), 1024));
    }
    for (int l = 0; l < layers; ++l) b.add_op(op("fwd" + std::to_string(l), {act[l], w[l]}, {act[l + 1]}));
    for (int l = layers - 1; l >= 0; --l) {
        std::vector<BufferId> in{w[l]};
        if (l + 1 < layers) in.push_back(ga[l + 1]);
        b.add_op(op("bwd_data" + std::to_string(l), in, {ga[l]}, OpKind::backward_data));
        std::vector<BufferId> in2{act[l]};
        if (l + 1 < layers) in2.push_back(ga[l + 1]);
        b.add_op(op("bwd_weight" + std::to_string(l), in2, {gw[l]}, OpKind::backward_weight));
        b.add_op(op("update" + std::to_string(l), {gw[l], w[l]}, {w[l]}, OpKind::update));
    }
    OpGraph g = b.finalize();
    CHECK(g.op_count() == 2000);
    auto order = g.topological_order();
    CHECK(std::is_sorted(order.begin(), order.end()));
    CHECK(g.transitive_reduction().size() <= g.edge_count());
}
