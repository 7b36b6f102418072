// Plans: validation, minimal waits, JSON, and the baseline strategies
// (serial, glp4nn, nimble) on hand-made and random graphs.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "braid/graph/graph_json.hpp"
#include "braid/plan/compiled_plan.hpp"
#include "braid/plan/plan_json.hpp"
#include "braid/plan/validate.hpp"
#include "braid/planner/make_plan.hpp"
#include "braid/planner/strategies/glp4nn.hpp"
#include "braid/planner/strategies/nimble.hpp"
#include "braid/planner/strategies/serial.hpp"
#include "test_graphs.hpp"

#include "error_of.hpp"

using namespace braid;
using braid::testing::error_of;
using braid::testing::TestGraph;

namespace {

// Reachability between steps through stream order and waits, by plain
// breadth-first search: an independent check of validate()'s bitsets.
std::vector<std::vector<bool>> step_order(const Plan& p) {
    const std::size_t n = p.steps.size();
    std::vector<std::vector<std::size_t>> next(n);
    std::vector<std::size_t> last(p.stream_count(), n);
    for (std::size_t s = 0; s < n; ++s) {
        if (last[p.steps[s].stream] != n) next[last[p.steps[s].stream]].push_back(s);
        last[p.steps[s].stream] = s;
    }
    for (const PlanWait& w : p.waits) next[w.after].push_back(w.step);
    std::vector<std::vector<bool>> reach(n, std::vector<bool>(n, false));
    for (std::size_t s = 0; s < n; ++s) {
        std::vector<std::size_t> todo{s};
        while (!todo.empty()) {
            std::size_t u = todo.back();
            todo.pop_back();
            for (std::size_t v : next[u])
                if (!reach[s][v]) {
                    reach[s][v] = true;
                    todo.push_back(v);
                }
        }
    }
    return reach;
}

bool edges_ordered(const Plan& p, const OpGraph& g) {
    auto reach = step_order(p);
    for (const Edge& e : g.edges())
        for (std::size_t a = 0; a < p.steps.size(); ++a)
            for (std::size_t b = 0; b < p.steps.size(); ++b)
                if (p.steps[a].op == e.from && p.steps[b].op == e.to && !reach[a][b]) return false;
    return true;
}

// Brute force: the largest set of mutually unreachable ops.
std::uint32_t brute_force_width(const OpGraph& g) {
    const std::size_t n = g.op_count();
    REQUIRE(n <= 20);
    auto reach = g.descendants();
    std::uint32_t best = 0;
    for (std::uint32_t mask = 1; mask < (1u << n); ++mask) {
        const auto size = static_cast<std::uint32_t>(std::popcount(mask));
        if (size <= best) continue;
        bool antichain = true;
        for (std::size_t i = 0; i < n && antichain; ++i)
            for (std::size_t j = 0; j < n && antichain; ++j)
                if (((mask >> i) & 1u) && ((mask >> j) & 1u) && reach.test(i, j)) antichain = false;
        if (antichain) best = size;
    }
    return best;
}

Plan random_plan(const OpGraph& g, std::mt19937_64& rng, std::uint32_t streams) {
    std::vector<strategy::Placement> order;
    for (OpId op : g.topological_order()) {
        strategy::Placement p{op, {}};
        const std::uint32_t parts =
            g.op(op).splittable() && rng() % 2 ? 1 + static_cast<std::uint32_t>(rng() % std::min<std::uint32_t>(4, g.op(op).split_batch)) : 1;
        for (std::uint32_t i = 0; i < parts; ++i) p.part_streams.push_back(static_cast<std::uint32_t>(rng() % streams));
        order.push_back(p);
    }
    return strategy::assemble(g, "random", {}, "", std::vector<int>(streams, 0), order);
}

}  // namespace

TEST_CASE("serial, glp4nn and nimble plans are valid with minimal waits on every test graph") {
    const DeviceSpec& dev = find_device("h200");
    for (const TestGraph& t : braid::testing::planner_test_graphs()) {
        CAPTURE(t.name);
        Plan s = strategy::serial(t.graph, "h200");
        CHECK(first_violation(s, t.graph) == "");
        CHECK(s.stream_count() == 1);
        CHECK(s.waits.empty());
        CHECK(s.steps.size() == t.graph.op_count());

        Plan n = strategy::nimble(t.graph, "h200");
        CHECK(first_violation(n, t.graph) == "");

        for (std::uint32_t k : {1u, 4u, 8u}) {
            Plan g = strategy::glp4nn(t.graph, dev, t.costs, k, "h200");
            CHECK(first_violation(g, t.graph) == "");
            CHECK(g.stream_count() <= k);
            for (const PlanStep& st : g.steps)
                if (st.parts > 1) CHECK(t.graph.op(st.op).splittable());
        }
    }
}

TEST_CASE("nimble uses exactly as many streams as the graph is wide (brute force on small graphs)") {
    std::vector<TestGraph> small;
    small.push_back(braid::testing::diamond());
    small.push_back(braid::testing::residual_chain(3));
    for (std::uint64_t seed = 0; seed < 30; ++seed) {
        small.push_back(braid::testing::random_dag(100 + seed, 4 + static_cast<int>(seed % 13), 1 + static_cast<int>(seed % 7),
                                                   1 + static_cast<int>(seed % 3), "r" + std::to_string(seed)));
        small.push_back(braid::testing::layered_dag(200 + seed, 2 + static_cast<int>(seed % 4), 4, "l" + std::to_string(seed)));
    }
    int checked = 0;
    for (const TestGraph& t : small) {
        if (t.graph.op_count() > 18) continue;
        CAPTURE(t.name);
        const std::uint32_t width = brute_force_width(t.graph);
        auto cover = strategy::minimum_chain_cover(t.graph);
        CHECK(cover.chains == width);
        // Every chain is totally ordered by reachability.
        auto reach = t.graph.descendants();
        for (OpId a = 0; a < t.graph.op_count(); ++a)
            for (OpId b = a + 1; b < t.graph.op_count(); ++b)
                if (cover.chain_of[a] == cover.chain_of[b]) CHECK((reach.test(a, b) || reach.test(b, a)));
        CHECK(strategy::nimble(t.graph).stream_count() == width);
        ++checked;
    }
    CHECK(checked > 40);
}

TEST_CASE("nimble_critical_path: nimble's steps and waits, the chains of the critical path urgent") {
    for (const TestGraph& t : braid::testing::planner_test_graphs()) {
        CAPTURE(t.name);
        const Plan plain = strategy::nimble(t.graph, "h200");
        const Plan urgent = strategy::nimble_critical_path(t.graph, t.costs, "h200");
        CHECK(first_violation(urgent, t.graph) == "");
        CHECK(urgent.steps == plain.steps);
        CHECK(urgent.waits == plain.waits);
        // Independently: the streams holding an op of the critical path, by the ops' kernel times.
        std::vector<double> d;
        for (const OpCost& c : t.costs) {
            double ns = 0.0;
            for (const KernelCost& k : c.kernels) ns += k.duration_ns;
            d.push_back(ns);
        }
        std::vector<int> want(plain.stream_count(), 0);
        for (OpId op : t.graph.critical_path(d).ops)
            for (const PlanStep& st : plain.steps)
                if (st.op == op) want[st.stream] = -1;
        CHECK(urgent.stream_priorities == want);
        CHECK(std::count(want.begin(), want.end(), -1) >= 1);
    }
    const TestGraph d = braid::testing::diamond();
    CHECK(error_of([&] { (void)strategy::nimble_critical_path(d.graph, std::span(d.costs).first(1)); }) ==
          "nimble_critical_path: got costs for 1 ops, the graph has " + std::to_string(d.graph.op_count()));
}

TEST_CASE("waits are minimal and sufficient (brute force over removing each wait)") {
    std::mt19937_64 rng(42);
    int waits_checked = 0;
    for (int trial = 0; trial < 60; ++trial) {
        TestGraph t = braid::testing::random_dag(300 + static_cast<std::uint64_t>(trial), 6 + trial % 10, 1 + trial % 5, 2,
                                                 "t" + std::to_string(trial));
        Plan p = random_plan(t.graph, rng, 1 + static_cast<std::uint32_t>(trial % 4));
        CAPTURE(t.name);
        REQUIRE(first_violation(p, t.graph) == "");
        CHECK(edges_ordered(p, t.graph));
        for (std::size_t i = 0; i < p.waits.size(); ++i) {
            Plan fewer = p;
            fewer.waits.erase(fewer.waits.begin() + static_cast<std::ptrdiff_t>(i));
            CHECK_FALSE(edges_ordered(fewer, t.graph));  // every wait is needed
            CHECK(first_violation(fewer, t.graph).find("is not respected") != std::string::npos);
            ++waits_checked;
        }
    }
    CHECK(waits_checked > 50);
}

TEST_CASE("validate reports the first violation precisely") {
    TestGraph t = braid::testing::diamond();  // src -> left, right -> join; left and right split over 8 images
    const OpGraph& g = t.graph;
    const OpId src = g.op_id("src"), left = g.op_id("left"), right = g.op_id("right"), join = g.op_id("join");
    auto base = [&] {
        return strategy::assemble(g, "hand", {}, "", {0, 0},
                                  {{src, {0}}, {left, {0}}, {right, {1}}, {join, {0}}});
    };
    Plan ok = base();
    REQUIRE(first_violation(ok, g) == "");
    REQUIRE(ok.waits == std::vector<PlanWait>{{2, 0}, {3, 2}});

    SUBCASE("a needed wait removed names the edge") {
        Plan p = ok;
        p.waits.erase(p.waits.begin() + 1);
        CHECK(first_violation(p, g) ==
              "edge 'right' -> 'join' (read-after-write) is not respected: step 3 'join' (stream 0) may start before "
              "step 2 'right' (stream 1) finishes (no chain of stream order and waits orders them)");
    }
    SUBCASE("a redundant wait") {
        Plan q = ok;
        q.steps[1].stream = 1;  // left on stream 1 too: right (stream 1) follows it
        q.waits = {{1, 0}, {2, 0}, {3, 2}};
        CHECK(first_violation(q, g).find("the wait of step 2 'right' (stream 1) for step 0 'src' (stream 0) is implied by stream order") !=
              std::string::npos);
    }
    SUBCASE("a wait for a later step, and on its own stream") {
        Plan p = ok;
        p.waits.push_back({1, 2});
        CHECK(first_violation(p, g).find("not issued before it") != std::string::npos);
        Plan q = ok;
        q.waits.push_back({3, 1});
        CHECK(first_violation(q, g).find("on its own stream") != std::string::npos);
    }
    SUBCASE("missing, repeated and misplaced ops") {
        Plan p = ok;
        p.steps.pop_back();
        p.waits.pop_back();
        CHECK(first_violation(p, g) == "op 'join' is missing from the plan");
        Plan q = ok;
        q.steps.push_back(q.steps[0]);
        CHECK(first_violation(q, g) == "op 'src' appears more than once (again at step 4)");
        Plan r = ok;
        r.steps[0].stream = 5;
        CHECK(first_violation(r, g) == "step 0 'src' (stream 5) uses stream 5 but the plan has 2 streams");
    }
    SUBCASE("splits") {
        Plan p = strategy::assemble(g, "hand", {}, "", {0, 0}, {{src, {0}}, {left, {0, 1}}, {right, {1}}, {join, {0}}});
        CHECK(first_violation(p, g) == "");
        Plan q = strategy::assemble(g, "hand", {}, "", {0, 0}, {{src, {0, 1}}, {left, {0}}, {right, {1}}, {join, {0}}});
        CHECK(first_violation(q, g).find("splits op 'src' which is not marked splittable") != std::string::npos);
        Plan r = p;
        r.steps.erase(r.steps.begin() + 2);  // drop part 2 of left
        r.waits.clear();
        CHECK(first_violation(r, g) == "op 'left' is split into 2 parts but only 1 are in the plan");
        std::vector<strategy::Placement> nine{{src, {0}}, {left, std::vector<std::uint32_t>(9, 0)}, {right, {1}}, {join, {0}}};
        Plan s = strategy::assemble(g, "hand", {}, "", {0, 0}, nine);
        CHECK(first_violation(s, g).find("into 9 parts but its batch has only 8 images") != std::string::npos);
    }
    SUBCASE("a plan for another graph") {
        TestGraph other = braid::testing::residual_chain(1);
        CHECK(error_of([&] { validate(ok, other.graph); }).find("the plan was made for graph " + g.fingerprint()) !=
              std::string::npos);
    }
    SUBCASE("issue order against a dependency") {
        Plan p = ok;
        std::swap(p.steps[0], p.steps[1]);  // left issued before src
        p.waits = {};
        CHECK(first_violation(p, g).find("edge 'src' -> 'left' (read-after-write) is not respected") != std::string::npos);
        CHECK(error_of([&] {
                  Plan q = p;
                  assign_minimal_waits(q, g);
              }).find("is issued before step 1 'src'") != std::string::npos);
    }
}

TEST_CASE("compiled plans: one event per waited-on step, batch ranges per part") {
    TestGraph t = braid::testing::diamond();
    const OpGraph& g = t.graph;
    Plan p = strategy::assemble(g, "hand", {}, "", {0, -1},
                                {{g.op_id("src"), {0}}, {g.op_id("left"), {0, 1, 1}}, {g.op_id("right"), {1}}, {g.op_id("join"), {0}}});
    CompiledPlan c = compile(p, g);
    REQUIRE(c.steps.size() == 6);
    CHECK(c.stream_count() == 2);
    // left is split 3 ways over 8 images: 3 + 3 + 2
    CHECK(c.steps[1].batch.begin == 0);
    CHECK(c.steps[1].batch.end == 3);
    CHECK(c.steps[2].batch.begin == 3);
    CHECK(c.steps[3].batch.end == 8);
    CHECK(c.steps[0].batch.end == 0);  // src is not splittable
    // every wait refers to a recorded event of an earlier step
    std::vector<bool> recorded(c.event_count, false);
    std::uint32_t waits = 0;
    for (const CompiledStep& s : c.steps) {
        for (std::uint32_t e : s.wait_events) {
            CHECK(e < c.event_count);
            CHECK(recorded[e]);
            ++waits;
        }
        if (s.record_event != no_event) recorded[s.record_event] = true;
    }
    CHECK(waits == p.waits.size());
}

TEST_CASE("plans round-trip through JSON; malformed and stale plans are rejected") {
    const DeviceSpec& dev = find_device("a100");
    for (const TestGraph& t : braid::testing::planner_test_graphs()) {
        CAPTURE(t.name);
        for (const Plan& p : {strategy::serial(t.graph), strategy::nimble(t.graph), strategy::glp4nn(t.graph, dev, t.costs, 4)}) {
            nlohmann::json j = to_json(p, t.graph);
            Plan back = plan_from_json(nlohmann::json::parse(j.dump()), t.graph);
            CHECK(back == p);
        }
    }
    TestGraph t = braid::testing::diamond();
    Plan p = strategy::glp4nn(t.graph, dev, t.costs, 4);
    const nlohmann::json good = to_json(p, t.graph);
    auto load = [&](nlohmann::json j) { return error_of([&] { (void)plan_from_json(j, t.graph, "plan.json"); }); };
    nlohmann::json j = good;
    j["format"] = "braid.profile";
    CHECK(load(j) == "plan.json: $: this is a braid.profile, not a braid.plan");
    j = good;
    j["version"] = 7;
    CHECK(load(j) == "plan.json: $.version: this braid reads plan version 1, not 7");
    j = good;
    j["steps"][2]["op"] = "nope";
    CHECK(load(j) == "plan.json: $.steps[2].op: no op named 'nope' in the graph");
    j = good;
    j["steps"][1]["stream"] = 9;
    CHECK(load(j).find("plan.json: $.steps[1].stream: stream 9 does not exist") == 0);
    j = good;
    j["steps"][1]["stream"] = "zero";
    CHECK(load(j) == "plan.json: $.steps[1].stream: expected an integer, got a string");
    j = good;
    j.erase("waits");
    CHECK(load(j) == "plan.json: $.waits: required field is missing");
    j = good;
    j["waits"][0]["after"] = 99;
    CHECK(load(j) == "plan.json: $.waits[0].after: no step 99");
    j = good;
    j["steps"][1]["prts"] = 2;  // a typo must not fall back to a default
    CHECK(load(j) == "plan.json: $.steps[1].prts: unknown field (expected one of: op, stream, part, parts)");
    j = good;
    j["extra"] = true;
    CHECK(load(j).find("plan.json: $.extra: unknown field") == 0);
    j = good;
    j["streams"] = nlohmann::json::array();
    CHECK(load(j) == "plan.json: $.streams: a plan needs at least one stream");

    TestGraph other = braid::testing::residual_chain(2);
    CHECK(error_of([&] { (void)plan_from_json(good, other.graph, "plan.json"); })
              .find("plan.json: $.graph_fingerprint: this plan was made for graph " + t.graph.fingerprint() + " (4 ops)") == 0);
    CHECK(error_of([] { (void)detail::parse_json("{\"format\": \"braid.plan\",", "plan.json"); }).find("plan.json:1:") == 0);
}

TEST_CASE("both wait placements (vector clocks for few streams, step bits for many) give valid minimal waits") {
    std::mt19937_64 rng(9);
    for (int trial = 0; trial < 30; ++trial) {
        TestGraph t = braid::testing::random_dag(900 + static_cast<std::uint64_t>(trial), 150 + trial * 5, 1 + trial % 12, 3,
                                                 "big" + std::to_string(trial));
        const std::uint32_t streams = 1 + static_cast<std::uint32_t>(trial % 9);
        Plan clocks = random_plan(t.graph, rng, streams);  // 150+ steps >= 32 x streams for small counts: clocks
        CAPTURE(t.name);
        CHECK(first_violation(clocks, t.graph) == "");
        // The same steps with waits placed by step bits must give the same waits.
        Plan bits = clocks;
        bits.waits.clear();
        {
            StepIndex index(bits, t.graph.op_count());
            detail::place_waits<detail::StepBits>(bits, t.graph, reduced_predecessors(t.graph), index);
            std::sort(bits.waits.begin(), bits.waits.end(), [](const PlanWait& a, const PlanWait& b) {
                return std::pair(a.step, a.after) < std::pair(b.step, b.after);
            });
        }
        CHECK(bits.waits == clocks.waits);
        Plan via_clocks = clocks;
        via_clocks.waits.clear();
        {
            StepIndex index(via_clocks, t.graph.op_count());
            detail::place_waits<detail::StreamClocks>(via_clocks, t.graph, reduced_predecessors(t.graph), index);
            std::sort(via_clocks.waits.begin(), via_clocks.waits.end(), [](const PlanWait& a, const PlanWait& b) {
                return std::pair(a.step, a.after) < std::pair(b.step, b.after);
            });
        }
        CHECK(via_clocks.waits == clocks.waits);
    }
}

TEST_CASE("strategy options are typed and round-trip through JSON; bad ones name their field") {
    const DeviceSpec& dev = find_device("h200");
    TestGraph t = braid::testing::training_dag(21, 6, 3, "training6");
    PlanOptions po;
    po.max_streams = 4;
    po.mode = sim::LaunchMode::graph;
    const Plan b = make_plan(t.graph, dev, t.costs, po);
    REQUIRE(b.options.chosen.has_value());
    const nlohmann::json good = to_json(b, t.graph);
    CHECK(good["options"]["chosen_description"] == b.options.chosen->describe());
    CHECK(good["options"]["mode"] == "graph");
    CHECK(plan_from_json(nlohmann::json::parse(good.dump()), t.graph) == b);
    CHECK(strategy::nimble(t.graph).options.chains == strategy::nimble(t.graph).stream_count());

    // Both kinds of choice survive the trip.
    REQUIRE(b.stream_count() >= 2);
    const ListSchedule schedule{b.stream_count() - 1, 1, 0.75, true, true, true, true};
    for (const PlanChoice& choice : {PlanChoice{"nimble", true, {}}, PlanChoice{"", false, schedule}}) {
        Plan p = b;
        p.options.chosen = choice;
        CHECK(plan_from_json(to_json(p, t.graph), t.graph).options.chosen == choice);
    }
    CHECK(PlanChoice{"nimble", true, {}}.describe() == "nimble chains with critical-path priorities");
    CHECK(PlanChoice{"serial", false, {}}.describe() == "serial baseline");

    auto load = [&](nlohmann::json j) { return error_of([&] { (void)plan_from_json(j, t.graph, "plan.json"); }); };
    nlohmann::json j = good;
    j["options"]["mode"] = "lazy";
    CHECK(load(j) == "plan.json: $.options.mode: expected \"graph\" or \"eager\", got \"lazy\"");
    j = good;
    j["options"]["notes"] = "hand-tuned";
    CHECK(load(j).find("plan.json: $.options.notes: unknown field") == 0);
    j = good;
    j["options"]["max_streams"] = -1;
    CHECK(load(j) == "plan.json: $.options.max_streams: must be >= 1, got -1");
    // Values no planner writes: a record that says them is broken.
    j = good;
    j["options"]["max_streams"] = 0;
    CHECK(load(j) == "plan.json: $.options.max_streams: must be >= 1, got 0");
    j = good;
    j["options"]["simulated"] = good["options"]["candidates"].get<std::uint32_t>() + 1;
    CHECK(load(j).find("plan.json: $.options.simulated: judged ") == 0);
    j = good;
    j["options"]["predicted_ms"] = -2.5;
    CHECK(load(j) == "plan.json: $.options.predicted_ms: must be a finite number > 0 and at most 10000000.0, got -2.5");
    j = good;
    j["op_count"] = -5;
    CHECK(load(j) == "plan.json: $.op_count: integer -5 is out of range (must be >= 0)");
    j["op_count"] = t.graph.op_count() + 1;
    CHECK(load(j) == "plan.json: $.op_count: says " + std::to_string(t.graph.op_count() + 1) + " ops, but graph " +
                         t.graph.fingerprint() + " has " + std::to_string(t.graph.op_count()));
    j = good;
    j["options"]["chosen"] = {{"base", "fastest"}};
    CHECK(load(j) == "plan.json: $.options.chosen.base: expected \"serial\", \"nimble\", \"glp4nn\", \"ooo\", \"opara\" "
                     "or \"ios\", got \"fastest\"");
    j["options"]["chosen"] = {{"base", "ios"}};  // every baseline braid weighs may be its choice
    CHECK(load(j) == "<no error>");
    j = good;
    j["options"]["chosen"] = {{"base", "nimble"}, {"priorities", "random"}};
    CHECK(load(j) == "plan.json: $.options.chosen.priorities: expected \"critical_path\", got \"random\"");
    j = good;
    j["options"]["chosen"].erase("issue_order");
    CHECK(load(j) == "plan.json: $.options.chosen.issue_order: required field is missing");
    j = good;
    j["options"].erase("chosen");
    CHECK(load(j) == "plan.json: $.options.chosen_description: a description without \"chosen\"");
    j = good;
    j["options"] = 3;
    CHECK(load(j) == "plan.json: $.options: expected an object, got an integer");

    // The record must describe its plan.
    const std::string n = std::to_string(b.stream_count());
    j = good;
    j["options"]["max_streams"] = b.stream_count() - 1;
    CHECK(load(j) == "plan.json: $.options.max_streams: says at most " + std::to_string(b.stream_count() - 1) +
                         (b.stream_count() == 2 ? " stream" : " streams") + ", but the plan has " + n);
    j = good;
    j["options"]["chains"] = b.stream_count() + 1;
    CHECK(load(j) == "plan.json: $.options.chains: says " + std::to_string(b.stream_count() + 1) +
                         " chains (one stream each), but the plan has " + n + " streams");
    j = good;
    j["options"]["chosen"]["main_streams"] = 4294967295u;
    CHECK(load(j).find("plan.json: $.options.chosen: says 4294967295 main + ") == 0);
    j = good;
    j["options"]["chosen"]["pin_footprint"] = -1.0;
    CHECK(load(j) == "plan.json: $.options.chosen.pin_footprint: must be a finite number >= 0 (a share of the GPU), "
                     "got -1.0");
    // A plan may not ask for more streams than braid runs.
    j = good;
    j["options"].erase("max_streams");
    j["options"].erase("chosen");
    j["options"].erase("chosen_description");
    j["streams"] = nlohmann::json::array();
    for (std::uint32_t s = 0; s <= Plan::max_stream_count; ++s) j["streams"].push_back({{"priority", 0}});
    CHECK(load(j) == "plan.json: $.streams: 4097 streams; braid runs at most 4096 (each is a CUDA stream or a host thread)");
    j["streams"].erase(j["streams"].size() - 1);
    CHECK(load(j) == "<no error>");

    // Options nested 100,000 levels deep (600 KB) are refused before the
    // JSON parser builds anything, at the bracket that goes too deep.
    std::string deep = good.dump();
    const std::string nest = std::string(100'000, '[') + std::string(100'000, ']');
    deep.insert(deep.find("\"options\":{") + 11, "\"deep\":" + nest + ",");
    const std::string deep_error = error_of([&] { (void)detail::parse_json(deep, "plan.json"); });
    CHECK(deep_error.find("plan.json:1:") == 0);
    CHECK(deep_error.find("nested more than 64 levels deep") != std::string::npos);
    // One level short of the limit, a nested option is still refused by name.
    std::string nested = good.dump();
    nested.insert(nested.find("\"options\":{") + 11, "\"deep\":" + std::string(60, '[') + std::string(60, ']') + ",");
    CHECK(error_of([&] { (void)plan_from_json(detail::parse_json(nested, "plan.json"), t.graph, "plan.json"); })
              .find("plan.json: $.options.deep: unknown field") == 0);
}

TEST_CASE("the braid plans measured on the H200 still load, with their choices typed") {
    const std::string dir = BRAID_SOURCE_DIR "/../shared/h200";
    const std::string profile = dir + "/resnet50-b32.profile.json";
    if (!std::ifstream(profile)) {
        MESSAGE("skipped: " << profile << " is not here");
        return;
    }
    const nlohmann::json prof = detail::load_json_file(profile);
    const OpGraph graph = graph_from_json(prof.at("graph"), profile);
    for (const char* mode : {"graph", "eager"}) {
        CAPTURE(mode);
        const std::string path = dir + "/plans/resnet50-b32-braid-profiled-" + mode + ".plan.json";
        const nlohmann::json raw = detail::load_json_file(path);
        const Plan plan = load_plan(path, graph);
        CHECK(first_violation(plan, graph) == "");
        REQUIRE(plan.options.chosen.has_value());
        CHECK(plan.options.chosen->describe() == raw["options"]["chosen_description"].get<std::string>());
        CHECK(plan.options.mode == (std::string(mode) == "graph" ? LaunchMode::graph : LaunchMode::eager));
        CHECK(plan.options.max_streams == raw["options"]["max_streams"].get<std::uint32_t>());
        CHECK(to_json(plan, graph)["options"] == raw["options"]);  // written back as it was read
    }
}
