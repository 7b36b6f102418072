#include <doctest/doctest.h>

#include <string>

#include "braid/graph/graph_json.hpp"
#include "test_graphs.hpp"

#include "error_of.hpp"

using namespace braid;
using braid::testing::error_of;

TEST_CASE("graphs round-trip through JSON with the same fingerprint, edges and access sets") {
    for (const auto& t : braid::testing::planner_test_graphs()) {
        CAPTURE(t.name);
        const nlohmann::json j = to_json(t.graph);
        const OpGraph back = graph_from_json(nlohmann::json::parse(j.dump()));
        CHECK(back.fingerprint() == t.graph.fingerprint());
        CHECK(back == t.graph);
    }
    // Strided views and explicit edges survive too.
    OpGraphBuilder b;
    BufferId cat = b.add_buffer("cat", 64);
    BufferId s = b.add_strided_view("cat.c0", cat, 0, 16, 32, 2);
    OpId a = b.add_op({"a", OpKind::forward, "l", {}, {s}, 2});
    OpId c = b.add_op({"c", OpKind::update, "", {}, {}, 0});
    b.add_edge(a, c);
    const OpGraph g = b.finalize();
    const OpGraph back = graph_from_json(to_json(g));
    CHECK(back.fingerprint() == g.fingerprint());
    CHECK(back == g);
    CHECK(back.buffer(1).chunks == 2);
    CHECK(back.buffer(1).stride_bytes == 32);
    CHECK(back.edge_hazards(0, 1) == hazard_explicit);
}

TEST_CASE("malformed graph documents name the field") {
    const OpGraph g = braid::testing::diamond().graph;
    const nlohmann::json good = to_json(g);
    auto load = [&](nlohmann::json j) { return error_of([&] { (void)graph_from_json(j, "g.json"); }); };
    nlohmann::json j = good;
    j["ops"][1]["reads"][0] = "nowhere";
    CHECK(load(j) == "g.json: $.ops[1].reads[0]: op 'left' names unknown buffer 'nowhere'");
    j = good;
    j["ops"][2]["kind"] = "sideways";
    CHECK(load(j) == "g.json: $.ops[2].kind: unknown op kind 'sideways'");
    j = good;
    j["ops"][3]["name"] = "src";
    CHECK(load(j) == "g.json: $.ops[3]: duplicate op name 'src'");
    j = good;
    j["fingerprint"] = "fnv1a64:0000000000000000";
    CHECK(load(j).find("g.json: $.fingerprint: the rebuilt graph is " + g.fingerprint()) == 0);
    j = good;
    j["explicit_edges"] = nlohmann::json::array({nlohmann::json::array({"join", "src"})});
    CHECK(load(j).find("g.json: $: the graph has a cycle") == 0);
    j = good;
    j["ops"][0]["split"] = 4;
    CHECK(load(j) == "g.json: $.ops[0].split: unknown field (expected one of: name, kind, layer, reads, writes, split_batch)");
    j = good;
    j["buffers"][0]["chunks"] = 4;  // chunks only make sense for a view
    CHECK(load(j) == "g.json: $.buffers[0].chunks: unknown field (expected one of: name, bytes)");
    j = good;
    j["buffers"][1]["parent"] = "missing";
    CHECK(load(j) == "g.json: $.buffers[1].parent: no earlier buffer named 'missing'");
}
