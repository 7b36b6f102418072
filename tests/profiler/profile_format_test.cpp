// profile.json: round trip, and malformed documents rejected with the JSON
// path of the bad field.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "braid/model/device_table.hpp"
#include "braid/profiler/measurements.hpp"
#include "braid/profiler/profile_json.hpp"
#include "braid/profiler/report.hpp"
#include "profiler_fixtures.hpp"
#include "test_graphs.hpp"

using namespace braid;
using nlohmann::json;

namespace {

Profile sample_profile() {
    const OpGraph g = braid::testing::branch_graph();
    Profile p;
    p.device = find_device("h100");
    p.graph_fingerprint = g.fingerprint();
    p.graph = g;
    p.run.network = "demo";
    p.run.settings = {{"m", 1024}, {"scale", 2.0}, {"fp16", true}, {"variant", "b"}};
    p.run.warmup_iterations = 2;
    p.run.measured_iterations = 5;
    p.run.tool = "test";
    p.iteration = DurationStats{5000.5, 4000, 9000, 5};
    p.launch_api = DurationStats{2500, 2000, 4000, 12};
    p.dropped_records = 3;
    for (const Op& op : g.ops()) {
        ProfiledOp po;
        po.name = op.name;
        po.layer = op.layer;
        po.kind = op.kind;
        po.duration = {1000.0 + op.id, 900.0, 1200.0 + op.id, 5};
        if (op.id != 1) po.host = DurationStats{7000.0 + op.id, 6000.0, 9000.0, 5};  // op 1: not timed
        ProfiledKernel k;
        k.shape = KernelShape{"void gemm<128>(float const*, float*)", {64, 2, 1}, {256, 1, 1}, 96, 8192, 32768};
        k.duration = {800.0, 750.0, 950.0, 5};
        k.order = 1;
        po.kernels.push_back(k);
        po.transfers.push_back(ProfiledTransfer{TransferKind::memcpy_dtod, 1 << 20, {150.0, 140.0, 160.0, 5}, 0});
        p.ops.push_back(po);
    }
    p.unattributed.push_back(UnattributedWork{"kernel", "stray", 2, 300.0});
    return p;
}

// Loads `j` and returns the error, or "" when it loads.
std::string load_error(const json& j) {
    try {
        (void)profile_from_json(j);
    } catch (const FormatError& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("a profile survives a JSON round trip unchanged") {
    const Profile p = sample_profile();
    const json j = to_json(p);
    CHECK(j["format"] == "braid.profile");
    CHECK(j["version"] == 1);
    const Profile back = profile_from_json(json::parse(j.dump()));
    CHECK(back == p);
    CHECK(to_json(back) == j);
    // Host times are written where measured, and only there.
    CHECK(j["ops"][0]["host_ns"]["median"] == 7000.0);
    CHECK_FALSE(j["ops"][1].contains("host_ns"));

    SUBCASE("through a file") {
        const std::string path = "profiler-format-test.profile.json";
        save_profile(p, path);
        CHECK(load_profile(path) == p);
        std::remove(path.c_str());
    }
    SUBCASE("a durations-only profile, without optional statistics") {
        Profile d = p;
        d.timing = ProfileTiming::cuda_events;
        d.durations_only = true;
        d.launch_api.reset();
        d.iteration.reset();
        d.unattributed.clear();
        for (ProfiledOp& op : d.ops) {
            op.kernels.clear();
            op.transfers.clear();
        }
        CHECK(profile_from_json(to_json(d)) == d);
    }
}

TEST_CASE("malformed profiles are rejected with the path of the bad field") {
    const json good = to_json(sample_profile());
    auto broken = [&](auto&& edit) {
        json j = good;
        edit(j);
        return load_error(j);
    };
    CHECK(load_error(good).empty());
    CHECK(broken([](json& j) { j["format"] = "braid.plan"; }) == "$: this is a braid.plan, not a braid.profile");
    CHECK(broken([](json& j) { j["format"] = "other"; }).find("$.format: expected \"braid.profile\"") == 0);
    CHECK(broken([](json& j) { j["version"] = 2; }).find("$.version: this braid reads profile version 1") == 0);
    CHECK(broken([](json& j) { j.erase("graph_fingerprint"); }) == "$.graph_fingerprint: required field is missing");
    CHECK(broken([](json& j) { j["device"]["sm_count"] = "many"; }).find("$.device.sm_count: expected an integer") == 0);
    CHECK(broken([](json& j) { j["run"]["measured_iterations"] = 0; }) == "$.run.measured_iterations: must be >= 1, got 0");
    CHECK(broken([](json& j) { j["run"]["plan"] = ""; }) ==
          "$.run.plan: must name the plan the iterations ran on (\"serial\")");
    CHECK(broken([](json& j) { j["timing"] = "nvtx"; }).find("$.timing: expected \"cupti\" or \"cuda_events\"") == 0);
    CHECK(broken([](json& j) { j["timing"] = "cuda_events"; }).find("$.durations_only: must be true") == 0);
    CHECK(broken([](json& j) { j["ops"] = json::array(); }) == "$.ops: a profile needs at least one op");
    CHECK(broken([](json& j) { j["ops"][2]["name"] = j["ops"][0]["name"]; }) ==
          "$.ops[2].name: duplicate op 'load' (also at $.ops[0])");
    CHECK(broken([](json& j) { j["ops"][1]["kind"] = "sideways"; }) == "$.ops[1].kind: unknown op kind \"sideways\"");
    CHECK(broken([](json& j) { j["ops"][1]["duration_ns"]["count"] = 0; })
              .find("$.ops[1].duration_ns.count: must be >= 1, got 0") == 0);
    CHECK(broken([](json& j) { j["ops"][1]["duration_ns"]["min"] = 5000.0; })
              .find("$.ops[1].duration_ns: expected min <= median <= max") == 0);
    CHECK(broken([](json& j) { j["ops"][1]["duration_ns"]["max"] = -1.0; })
              .find("$.ops[1].duration_ns.max: must be a finite number >= 0") == 0);
    // A kernel that could not have run on the profile's device as recorded.
    CHECK(broken([](json& j) { j["ops"][3]["kernels"][0]["registers_per_thread"] = 300; }) ==
          "$.ops[3].kernels[0]: did not run on this profile's device as written: kernel 'void gemm<128>(float const*, "
          "float*)' on h100: registers: 300 registers per thread exceed the device's 255");
    // With its graph embedded, a profile measures every op of it and nothing else.
    CHECK(broken([](json& j) { j["ops"].erase(1); }) ==
          "$.ops: no measurements for 1 op(s) of the embedded graph: '" + good["ops"][1]["name"].get<std::string>() +
              "'");
    CHECK(broken([](json& j) {
              j["ops"].push_back(j["ops"][0]);
              j["ops"].back()["name"] = "extra";
          }) == "$.ops[" + std::to_string(good["ops"].size()) + "].name: 'extra' is not an op of the embedded graph");
    // Each measured op is the graph's op: same kind, same layer.
    CHECK(broken([](json& j) { j["ops"][1]["kind"] = "update"; }) ==
          "$.ops[1].kind: op '" + good["ops"][1]["name"].get<std::string>() + "' is \"update\" here, \"" +
              good["ops"][1]["kind"].get<std::string>() + "\" in the embedded graph");
    // Left out, both are the graph's (the fields are optional).
    json bare = good;
    bare["ops"][1].erase("kind");
    bare["ops"][1].erase("layer");
    const Profile from_graph = profile_from_json(bare);
    CHECK(to_string(from_graph.ops[1].kind) == good["ops"][1]["kind"].get<std::string>());
    CHECK(from_graph.ops[1].layer == good["ops"][1]["layer"].get<std::string>());
    CHECK(broken([](json& j) { j["ops"][1]["layer"] = "elsewhere"; }) ==
          "$.ops[1].layer: op '" + good["ops"][1]["name"].get<std::string>() + "' is of layer 'elsewhere' here, of layer '" +
              good["ops"][1]["layer"].get<std::string>() + "' in the embedded graph");
    CHECK(broken([](json& j) { j["unattributed"][0]["total_ns"] = -1.0; }) ==
          "$.unattributed[0].total_ns: must be a finite number from 0 to 1e12 ns, got -1.0");
    CHECK(broken([](json& j) { j["ops"][3]["kernels"][0]["duration_ns"]["max"] = 1e300; }) ==
          "$.ops[3].kernels[0].duration_ns.max: must be at most 1e12 ns (1000 s), got 1e+300");
    CHECK(broken([](json& j) { j["ops"][2]["host_ns"]["median"] = -3.0; })
              .find("$.ops[2].host_ns.median: must be a finite number >= 0") == 0);
    CHECK(broken([](json& j) { j["ops"][0]["host_ns"] = 12; }).find("$.ops[0].host_ns") == 0);
    CHECK(broken([](json& j) { j["ops"][0]["host_time"] = 12; }).find("$.ops[0]") == 0);
    CHECK(broken([](json& j) { j["ops"][3]["kernels"][0]["grid"] = json::array({1, 2}); }) ==
          "$.ops[3].kernels[0].grid: expected [x, y, z], got 2 values");
    CHECK(broken([](json& j) { j["ops"][3]["kernels"][0]["block"][1] = 0; }) ==
          "$.ops[3].kernels[0].block[1]: must be >= 1, got 0");
    CHECK(broken([](json& j) { j["ops"][3]["kernels"][0]["block"][2] = -4; })
              == "$.ops[3].kernels[0].block[2]: must be >= 1, got -4");
    CHECK(broken([](json& j) { j["ops"][0]["kernels"][0].erase("registers_per_thread"); }) ==
          "$.ops[0].kernels[0].registers_per_thread: required field is missing");
    CHECK(broken([](json& j) { j["ops"][0]["kernels"][0]["name"] = ""; }) == "$.ops[0].kernels[0].name: must not be empty");
    CHECK(broken([](json& j) { j["ops"][0]["kernels"][0]["order"] = 0; }) ==
          "$.ops[0].transfers[0].order: order 0 is used twice");
    CHECK(broken([](json& j) { j["ops"][0]["kernels"][0]["order"] = 2; }) ==
          "$.ops[0].kernels[0].order: must be below 2 (the op's kernels and transfers together)");
    CHECK(broken([](json& j) { j["ops"][0]["transfers"][0]["kind"] = "teleport"; }) ==
          "$.ops[0].transfers[0].kind: unknown transfer kind \"teleport\"");
    CHECK(broken([](json& j) { j["ops"][0]["transfers"][0]["bytes"] = "lots"; })
              .find("$.ops[0].transfers[0].bytes: expected an integer") == 0);
    CHECK(broken([](json& j) { j["durations_only"] = true; })
              .find("$.ops[0]: a durations-only profile lists no kernels or transfers") == 0);
    CHECK(broken([](json& j) { j["ops"][0] = 3; }) == "$.ops[0]: expected an object, got an integer");
    CHECK(broken([](json& j) { j["run"]["settings"]["m"] = json::object(); }) ==
          "$.run.settings.m: expected a number, string or bool, got an object");
    CHECK(broken([](json& j) { j["run"]["settings"]["m"] = json::array({1}); }) ==
          "$.run.settings.m: expected a number, string or bool, got an array");
    CHECK(broken([](json& j) { j["run"]["settings"]["m"] = nullptr; }) ==
          "$.run.settings.m: expected a number, string or bool, got null");
    CHECK(broken([](json& j) { j["run"]["settings"]["m"] = std::numeric_limits<std::uint64_t>::max(); }) ==
          "$.run.settings.m: integer 18446744073709551615 is too large");
    CHECK(broken([](json& j) { j["run"]["settings"] = 3; }) == "$.run.settings: expected an object, got an integer");
    CHECK(broken([](json& j) { j["graph"]["ops"][1]["kind"] = "sideways"; }) ==
          "$.graph.ops[1].kind: unknown op kind 'sideways'");
    CHECK(broken([](json& j) { j["graph"]["fingerprint"] = "fnv1a64:0000000000000000"; })
              .find("$.graph.fingerprint: the rebuilt graph is ") == 0);
    CHECK(broken([](json& j) { j["graph"] = to_json(braid::testing::diamond().graph); })
              .find("$.graph: the embedded graph is " + braid::testing::diamond().graph.fingerprint() +
                    " but the profile is for ") == 0);
}

TEST_CASE("settings keep their types through a round trip") {
    const Profile p = sample_profile();
    const Profile back = profile_from_json(json::parse(to_json(p).dump()));
    CHECK(std::get<std::int64_t>(back.run.settings.at("m")) == 1024);
    CHECK(std::get<double>(back.run.settings.at("scale")) == 2.0);  // a whole number, still a double
    CHECK(std::get<bool>(back.run.settings.at("fp16")));
    CHECK(std::get<std::string>(back.run.settings.at("variant")) == "b");
}

// nlohmann parses and destroys deep documents without recursion but copies
// them recursively: a nested setting must be refused before any copy.
TEST_CASE("settings nested 100,000 levels deep are refused, not a crash") {
    json j = to_json(sample_profile());
    j["run"]["settings"] = "DEEP";
    std::string text = j.dump();
    std::string deep;
    for (int i = 0; i < 100000; ++i) deep += "{\"m\": ";
    deep += "1" + std::string(100000, '}');
    text.replace(text.find("\"DEEP\""), 6, deep);
    CHECK(load_error(json::parse(text)) == "$.run.settings.m: expected a number, string or bool, got an object");
}

TEST_CASE("a malformed profile file is named in the error") {
    const std::string path = "profiler-format-test.bad.json";
    {
        std::ofstream out(path);
        out << "{\n  \"format\": \"braid.profile\",\n  \"version\": 1,\n  oops\n}\n";
    }
    const std::string syntax = path + ":4:";
    CHECK_THROWS_WITH_AS(load_profile(path), doctest::Contains(syntax.c_str()), FormatError);
    {
        json j = to_json(sample_profile());
        j["ops"][1]["kernels"][0]["grid"][0] = 0;
        std::ofstream out(path);
        out << j.dump(2);
    }
    CHECK_THROWS_WITH_AS(load_profile(path), (path + ": $.ops[1].kernels[0].grid[0]: must be >= 1, got 0").c_str(),
                         FormatError);
    {
        json j = to_json(sample_profile());
        j["graph"]["ops"][2]["reads"][0] = "nowhere";
        std::ofstream out(path);
        out << j.dump(2);
    }
    CHECK_THROWS_WITH_AS(load_profile(path),
                         (path + ": $.graph.ops[2].reads[0]: op 'right' names unknown buffer 'nowhere'").c_str(),
                         FormatError);
    std::remove(path.c_str());
    CHECK_THROWS_WITH_AS(load_profile("no-such-profile.json"), doctest::Contains("no-such-profile.json"), Error);
}

// ../shared/h200 holds the only real GPU profiles; outside CI it may be absent.
TEST_CASE("the H200 profiles load with their embedded graphs and survive a round trip") {
    const std::filesystem::path dir = std::filesystem::path(BRAID_SOURCE_DIR) / ".." / "shared" / "h200";
    std::vector<std::filesystem::path> files;
    if (std::filesystem::is_directory(dir))
        for (const auto& entry : std::filesystem::directory_iterator(dir))
            if (entry.path().string().ends_with(".profile.json")) files.push_back(entry.path());
    if (files.empty()) {
        MESSAGE("no *.profile.json under " << dir.string() << ": skipped");
        return;
    }
    for (const std::filesystem::path& file : files) {
        CAPTURE(file.string());
        const Profile p = load_profile(file.string());
        REQUIRE(p.graph);
        CHECK(p.graph->fingerprint() == p.graph_fingerprint);
        CHECK(profile_from_json(json::parse(to_json(p).dump())) == p);
    }
}

TEST_CASE("the per-layer and per-kernel tables of an H200 profile: every layer once, totals, occupancy") {
    const Profile p = load_profile(std::string(BRAID_SOURCE_DIR) + "/tests/data/h200/resnet50-b8.profile.json");
    REQUIRE(p.graph);
    const OpGraph& graph = *p.graph;
    const DeviceSpec& h200 = find_device("h200");
    const std::string layers = profiler::format_layer_table(p, graph, h200);
    CAPTURE(layers.substr(0, 2000));
    // One row per layer: layer1.0.conv1 has forward, backward-data, -weight and update ops.
    std::size_t rows = 0;
    for (std::size_t at = layers.find("\nlayer1.0.conv1 "); at != std::string::npos;
         at = layers.find("\nlayer1.0.conv1 ", at + 1))
        ++rows;
    CHECK(rows == 1);
    CHECK(layers.find("\nlayer ") != std::string::npos);  // the header
    CHECK(layers.find("limiter") != std::string::npos);
    CHECK(layers.find("blk/SM") != std::string::npos);
    CHECK(layers.find("/132 ") != std::string::npos);  // SMs covered, of the H200's 132
    double total_ns = 0.0;
    for (const ProfiledOp& op : p.ops) total_ns += op.duration.median_ns;
    char total[64];
    std::snprintf(total, sizeof total, " %4zu", graph.op_count());
    CHECK(layers.find("\ntotal ") != std::string::npos);
    CHECK(layers.find(total, layers.find("\ntotal ")) != std::string::npos);
    // Columns line up: every row's ops count ends where the header's "ops" ends.
    const std::size_t header = layers.find("\nlayer ") + 1;
    const std::size_t ops_end = layers.find(" ops ", header) + 4 - header;
    const std::size_t row = layers.find("\nlayer1.0.conv1 ") + 1;
    CHECK(layers.substr(row + ops_end - 4, 4) == "   4");
    std::snprintf(total, sizeof total, "%11.1f\n", total_ns / 1000.0);
    CHECK(layers.find(total) != std::string::npos);
    CHECK(layers.find("durations-only") == std::string::npos);
    CHECK(layers.find("host (us)") == std::string::npos);  // a profile from before timed bodies

    // Timed bodies add a host column: per layer the sum, "*" where one of its
    // bodies was not timed, and the total.
    Profile timed = p;
    double host_total_ns = 0.0;
    for (ProfiledOp& op : timed.ops) {
        if (op.name == "layer1.0.conv1.update") continue;
        op.host = DurationStats{5000.0, 4000.0, 9000.0, 5};
        host_total_ns += 5000.0;
    }
    const std::string with_host = profiler::format_layer_table(timed, graph, h200);
    CAPTURE(with_host.substr(0, 2000));
    CHECK(with_host.find("host (us)\n") != std::string::npos);
    const std::size_t conv = with_host.find("\nlayer1.0.conv1 ");
    CHECK(with_host.substr(conv, with_host.find('\n', conv + 1) - conv).find(" 15.0*") != std::string::npos);
    std::snprintf(total, sizeof total, "%10.1f\n", host_total_ns / 1000.0);
    CHECK(with_host.find(total, with_host.find("\ntotal ")) != std::string::npos);

    const std::string kernels = profiler::format_kernel_table(p, h200);
    std::size_t kernel_rows = 0, expected = 0;
    for (const ProfiledOp& op : p.ops) expected += op.kernels.size() + op.transfers.size();
    for (char c : kernels) kernel_rows += c == '\n' ? 1 : 0;
    CHECK(kernel_rows == expected + 2);  // a blank line and the header first
    CHECK(profiler::short_kernel_name("void braid::samples::cuda::(anonymous namespace)::relu_forward_kernel("
                                      "braid::samples::cuda::ConstDeviceImages, float*)") == "relu_forward_kernel");
    CHECK(profiler::short_kernel_name("void cutlass::Kernel<foo<1, 2>>(Params)") == "Kernel<foo<1, 2>>");
}

TEST_CASE("measurements: written and read back unchanged; the rows a fresh data set measures for a profile") {
    const std::string path = std::string(BRAID_SOURCE_DIR) + "/tests/data/h200/measurements.json";
    const MeasurementSet m = load_measurements(path);
    const MeasurementSet back =
        measurements_from_json(detail::JsonReader(json::parse(measurements_to_json(m).dump(2)), "written: $"),
                               std::filesystem::path(path).parent_path());
    CHECK(back.device_name == m.device_name);
    CHECK(back.device_key == m.device_key);
    CHECK(back.driver == m.driver);
    CHECK(back.cudnn == m.cudnn);
    CHECK(back.cublas == m.cublas);
    CHECK(back.source == m.source);
    REQUIRE(back.rows.size() == m.rows.size());
    for (std::size_t i = 0; i < m.rows.size(); ++i) {
        CAPTURE(i);
        CHECK(back.rows[i].label == m.rows[i].label);
        CHECK(back.rows[i].profile == m.rows[i].profile);
        CHECK(back.rows[i].plan == m.rows[i].plan);
        CHECK(back.rows[i].mode == m.rows[i].mode);
        CHECK(back.rows[i].ms == m.rows[i].ms);
        CHECK(back.rows[i].network == m.rows[i].network);
    }

    // What the reader would refuse is not written either.
    MeasurementSet unmeasured = m;
    unmeasured.rows[3].ms.clear();
    CHECK_THROWS_WITH_AS(measurements_to_json(unmeasured), doctest::Contains("measurements row 3 ('"), Error);
    MeasurementSet nowhere = m;
    nowhere.device_name.clear();
    nowhere.device_key.clear();
    CHECK_THROWS_WITH_AS(measurements_to_json(nowhere), doctest::Contains("needs a name or a key"), Error);
    MeasurementSet empty = m;
    empty.rows.clear();
    CHECK_THROWS_WITH_AS(measurements_to_json(empty), doctest::Contains("no rows"), Error);

    Profile p = load_profile(std::string(BRAID_SOURCE_DIR) + "/tests/data/h200/resnet50-b8.profile.json");
    // Its run predates the settings: no network to rebuild, so no rows.
    CHECK_THROWS_WITH_AS(rows_to_measure("r.profile.json", p, std::nullopt),
                         doctest::Contains("profile 'r.profile.json' (run 'resnet50, batch 8"), Error);
    p.run.settings = {{"net", std::string("resnet50")}, {"batch", std::int64_t{8}}, {"conv_api", std::string("graph")}};
    const std::vector<MeasuredRow> two = rows_to_measure("r.profile.json", p, std::nullopt);
    REQUIRE(two.size() == 4);  // serial and nimble, graph and eager
    const std::vector<MeasuredRow> rows = rows_to_measure("r.profile.json", p, std::string("r.plan.json"));
    REQUIRE(rows.size() == 6);
    for (std::size_t i = 0; i < rows.size(); ++i) {
        CAPTURE(i);
        CHECK(rows[i].profile == "r.profile.json");
        CHECK(rows[i].network == p.run.settings);  // the kernel settings too: the rows run what was profiled
        CHECK(rows[i].ms.empty());
        CHECK(rows[i].mode == (i < 3 ? LaunchMode::graph : LaunchMode::eager));
        CHECK(rows[i].plan == std::vector<std::string>{"serial", "nimble", "r.plan.json"}[i % 3]);
        CHECK(rows[i].label == std::vector<std::string>{"serial", "nimble", "braid-profile"}[i % 3]);
    }
}
