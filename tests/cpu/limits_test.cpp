// Hostile and mistaken input: every loader refuses what no braid document
// is (empty, binary, too deep, too long, another kind of document) with an
// error that names the file and place, and whatever it accepts the model
// and simulator finish on in bounded work.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include "braid/braid.hpp"
#include "error_of.hpp"
#include "targets.hpp"

using namespace braid;
using braid::testing::error_of;

namespace {

std::string parse_error(const std::string& text) {
    return error_of([&] { (void)detail::parse_json(text, "in.json"); });
}

nlohmann::json profile_seed() { return nlohmann::json::parse(fuzz::seeds("profile").at(0).bytes); }

}  // namespace

TEST_CASE("what is not a JSON document is named as such, with line and column") {
    CHECK(parse_error("") == "in.json: the file is empty, not a JSON document");
    CHECK(parse_error(" \n\t ") == "in.json: the file holds only white space, not a JSON document");
    // 50 MB of NUL bytes: binary data, found at its first byte.
    CHECK(parse_error(std::string(50u << 20, '\0')) == "in.json: binary data (a NUL byte at offset 0), not a JSON document");
    CHECK(parse_error(std::string("{\"a\": 1}\n\x7f" "ELF\0x", 14)) == "in.json: binary data (a NUL byte at offset 13), not a JSON document");
    // Syntax errors in braid's words: where, and what was found there.
    CHECK(parse_error("{\n  \"a\": [1, 2,\n}") == "in.json:3:1: not valid JSON: unexpected '}'");
    CHECK(parse_error("{\"a\": tru}") == "in.json:1:7: not valid JSON: unexpected 'tru}'");
    CHECK(parse_error("{\"a\": 1,\n \"b\": nul }") == "in.json:2:7: not valid JSON: unexpected 'nul '");
    CHECK(parse_error("{\"a\": [1, 2") == "in.json:1:12: not valid JSON: the document ends too early");
    CHECK(parse_error("{\"a\": \"\xff\"}") == "in.json:1:8: not valid JSON: unexpected byte 0xff");
    CHECK(parse_error("[1e99999]") == "in.json: not valid JSON: a number too large for a 64-bit floating-point value");
}

TEST_CASE("a key given twice in one object is refused, naming the object; the same key in two objects is not") {
    CHECK(parse_error("{\"version\": 7, \"version\": 1}") ==
          "in.json: $: the key 'version' appears twice in one object; give it once");
    CHECK(parse_error("{\"ops\": [{\"name\": \"a\"}, [1, {}], {\"name\": \"b\", \"kernels\": {\"x\": 1, \"x\": 2}}]}") ==
          "in.json: $.ops[2].kernels: the key 'x' appears twice in one object; give it once");
    CHECK(parse_error("{\"a\": {\"b\": [0, 1, {\"c\": 1, \"c\": 1}]}}") ==
          "in.json: $.a.b[2]: the key 'c' appears twice in one object; give it once");
    CHECK_NOTHROW((void)detail::parse_json("{\"a\": {\"x\": 1}, \"b\": {\"x\": 1}, \"c\": [{\"x\": 1}, {\"x\": 2}]}", "in.json"));
    const nlohmann::json kept = detail::parse_json("{\"a\": [1, {\"b\": 2}], \"c\": \"d\"}", "in.json");
    CHECK(kept == nlohmann::json{{"a", {1, {{"b", 2}}}}, {"c", "d"}});
}

TEST_CASE("nesting, string length, array size and file size have limits") {
    const std::size_t depth = detail::DocumentLimits::max_depth;
    CHECK_NOTHROW((void)detail::parse_json(std::string(depth, '[') + std::string(depth, ']'), "in.json"));
    CHECK(parse_error(std::string(depth + 1, '[') + std::string(depth + 1, ']')) ==
          "in.json:1:65: nested more than 64 levels deep; no braid document is");
    // Brackets inside strings are text, not nesting.
    CHECK_NOTHROW((void)detail::parse_json("[\"" + std::string(1000, '[') + "\\\"\"]", "in.json"));

    const std::size_t longest = detail::DocumentLimits::max_string_bytes;
    CHECK_NOTHROW((void)detail::parse_json("[\"" + std::string(longest - 1, 'x') + "\"]", "in.json"));
    CHECK(parse_error("\n [\"" + std::string(longest + 1, 'x') + "\"]") ==
          "in.json:2:3: a string longer than 1048576 bytes; no braid document has one");

    nlohmann::json many = nlohmann::json::array();
    many.get_ref<nlohmann::json::array_t&>().resize(detail::DocumentLimits::max_array_items + 1, 0);
    const nlohmann::json doc{{"steps", std::move(many)}};
    CHECK(error_of([&] { (void)detail::JsonReader(doc, "$").at("steps").size(); }) ==
          "$.steps: an array of 4194305 items, more than the 4194304 braid reads");

    // A file beyond the size limit is refused before it is read (sparse here).
    const std::string big = (std::filesystem::temp_directory_path() / "braid-limits-big.json").string();
    std::ofstream(big) << "{}";
    std::filesystem::resize_file(big, detail::DocumentLimits::max_bytes + 1);
    CHECK(error_of([&] { (void)detail::load_json_file(big); }) ==
          big + ": the file has 268435457 bytes, more than the 268435456 braid reads");
    std::filesystem::remove(big);
    // An endless stream stops at the limit instead of filling memory.
    CHECK(error_of([&] { (void)detail::load_json_file("/dev/zero"); }) ==
          "/dev/zero: the file has over 268435456 bytes, more than the 268435456 braid reads");

    // An empty file and a folder are named as such.
    const std::string empty = (std::filesystem::temp_directory_path() / "braid-limits-empty.json").string();
    std::ofstream(empty).close();
    CHECK(error_of([&] { (void)detail::load_json_file(empty); }) == empty + ": the file is empty, not a JSON document");
    std::filesystem::remove(empty);
    const std::string folder = std::filesystem::temp_directory_path().string();
    CHECK(error_of([&] { (void)detail::load_json_file(folder); }) == "'" + folder + "' is a folder, not a file");
}

TEST_CASE("each loader recognises another braid document by its format") {
    const OpGraph graph = graph_from_json(nlohmann::json::parse(fuzz::seeds("graph").at(0).bytes));
    const nlohmann::json profile = profile_seed();
    const nlohmann::json plan = nlohmann::json::parse(fuzz::seeds("plan").at(0).bytes);
    const nlohmann::json device = to_json(find_device("h200"));
    CHECK(error_of([&] { (void)plan_from_json(profile, graph, "p.json"); }) == "p.json: $: this is a braid.profile, not a braid.plan");
    CHECK(error_of([&] { (void)profile_from_json(plan, "p.json: $"); }) == "p.json: $: this is a braid.plan, not a braid.profile");
    CHECK(error_of([&] { (void)graph_from_json(plan, "g.json"); }) == "g.json: $: this is a braid.plan, not a braid.graph");
    CHECK(error_of([&] { (void)device_from_json(plan); }) ==
          "$: this is a braid.plan, not a device description (docs/formats.md)");
    CHECK(error_of([&] { (void)profile_from_json(device, "d.json: $"); }) ==
          "d.json: $: no \"format\" field: not a braid.profile document");
    CHECK(error_of([&] { (void)profile_from_json(nlohmann::json::array(), "d.json: $"); }) ==
          "d.json: $: expected a braid.profile document (a JSON object), got an array");
    nlohmann::json other = plan;
    other["format"] = "caffe.NetParameter";
    CHECK(error_of([&] { (void)plan_from_json(other, graph, "p.json"); }) ==
          "p.json: $.format: expected \"braid.plan\", got \"caffe.NetParameter\"");
}

TEST_CASE("launch shapes beyond CUDA's limits are refused where they are read") {
    CHECK(Dim3{4294967295u, 4294967295u, 4294967295u}.count() == std::numeric_limits<std::uint64_t>::max());
    CHECK(Dim3{2147483647u, 65535u, 65535u}.count() == 2147483647ull * 65535ull * 65535ull);
    CHECK(launch_problem(KernelShape{"k", {2147483648u, 1, 1}, {32, 1, 1}}) ==
          "grid dimension 0 is 2147483648, CUDA allows at most 2147483647");
    CHECK(launch_problem(KernelShape{"k", {1, 65536, 1}, {32, 1, 1}}) == "grid dimension 1 is 65536, CUDA allows at most 65535");
    CHECK(launch_problem(KernelShape{"k", {1, 1, 1}, {1, 1, 65}}) == "block dimension 2 has 65 threads, CUDA allows at most 64");
    CHECK(launch_problem(KernelShape{"k", {1, 1, 1}, {32, 32, 2}}) ==
          "a block of 32x32x2 = 2048 threads, CUDA allows at most 1024");
    CHECK(launch_problem(KernelShape{"k", {1, 0, 1}, {32, 1, 1}}) == "grid dimension 1 is 0 (an empty grid)");

    nlohmann::json p = profile_seed();
    auto set_grid = [&](nlohmann::json grid) {
        nlohmann::json q = p;
        q["ops"][0]["kernels"][0]["grid"] = std::move(grid);
        return error_of([&] { (void)profile_from_json(q, "p.json: $"); });
    };
    CHECK(set_grid({4294967295u, 4294967295u, 4294967295u}) ==
          "p.json: $.ops[0].kernels[0].grid[0]: must be <= 2147483647 (CUDA's grid limit), got 4294967295");
    CHECK(set_grid({2147483648u, 2147483648u, 4}) ==
          "p.json: $.ops[0].kernels[0].grid[0]: must be <= 2147483647 (CUDA's grid limit), got 2147483648");
    CHECK(set_grid({1, 65536, 1}) == "p.json: $.ops[0].kernels[0].grid[1]: must be <= 65535 (CUDA's grid limit), got 65536");
    nlohmann::json q = p;
    q["ops"][0]["kernels"][0]["block"] = {32, 32, 2};
    CHECK(error_of([&] { (void)profile_from_json(q, "p.json: $"); }) ==
          "p.json: $.ops[0].kernels[0].block: a block of 32x32x2 = 2048 threads, CUDA allows at most 1024");
}

TEST_CASE("the largest launchable grid is simulated in bounded work and keeps its duration") {
    const DeviceSpec& dev = find_device("h200");
    KernelCost k;
    k.shape = KernelShape{"huge", {2147483647u, 65535u, 65535u}, {128, 1, 1}, 32, 0, 0};
    k.duration_ns = 5000.0;
    const KernelWork w = kernel_work(dev, k);
    CHECK(w.merged > 1);
    CHECK(w.waves <= max_simulated_waves);

    sim::Program p;
    p.stream_priorities = {0, 0};
    KernelCost small = k;
    small.shape.grid = {264, 1, 1};
    p.kernels = {sim::Kernel{k, sim::no_op, "huge"}, sim::Kernel{small, sim::no_op, "small"}};
    p.actions = {{sim::ActionKind::launch, 0, 0}, {sim::ActionKind::launch, 1, 1}};
    const sim::Result r = sim::simulate(dev, p);
    // Alone it would take exactly its duration; beside a small kernel, a
    // little longer, and the simulator's work stays bounded.
    CHECK(r.kernels[0].end_ns - r.kernels[0].start_ns >= 5000.0);
    CHECK(r.kernels[0].end_ns - r.kernels[0].start_ns <= 5000.0 * 1.01);
    CHECK(r.block_events <= 4 * max_simulated_waves * w.blocks_per_wave);

    sim::Program alone;
    alone.stream_priorities = {0};
    alone.kernels = {sim::Kernel{k, sim::no_op, "huge"}};
    alone.actions = {{sim::ActionKind::launch, 0, 0}};
    const sim::Result a = sim::simulate(dev, alone);
    CHECK(a.kernels[0].end_ns - a.kernels[0].start_ns == doctest::Approx(5000.0));
}
