// braid-plan as a user runs it: JSON output that agrees with the library,
// plans that validate, well-formed SVG, and clear errors for bad arguments.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "braid/braid.hpp"
#include "braid/graph/graph_json.hpp"
#include "braid/planner/calibration_table.hpp"
#include "braid/profiler/profile_json.hpp"
#include "run_command.hpp"
#include "train/training_graph.hpp"

using namespace braid;

namespace {

using Run = braid::testing::CommandRun;

Run run_tool(const std::string& args) { return braid::testing::run_command(std::string(BRAID_PLAN_EXE) + " " + args); }

std::string read(const std::filesystem::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// Minimal XML well-formedness: balanced and properly nested elements, quoted
// attributes, known entities, one root element.
std::string xml_problem(const std::string& x) {
    std::vector<std::string> open;
    std::size_t i = 0, roots = 0;
    if (x.rfind("<?xml", 0) == 0) i = x.find("?>") + 2;
    while (i < x.size()) {
        if (x[i] == '<') {
            const std::size_t end = x.find('>', i);
            if (end == std::string::npos) return "unterminated tag at " + std::to_string(i);
            std::string tag = x.substr(i + 1, end - i - 1);
            if (tag.empty()) return "empty tag at " + std::to_string(i);
            if (tag[0] == '/') {
                const std::string name = tag.substr(1);
                if (open.empty() || open.back() != name) return "closing </" + name + "> does not match";
                open.pop_back();
            } else {
                const bool self_closing = tag.back() == '/';
                const std::string name = tag.substr(0, tag.find_first_of(" /\n\t"));
                // attributes: name="value" pairs with no raw '<' inside values
                std::size_t q = 0;
                for (char c : tag)
                    if (c == '"') ++q;
                if (q % 2) return "unbalanced quotes in <" + name + ">";
                if (open.empty()) ++roots;
                if (!self_closing) open.push_back(name);
            }
            i = end + 1;
        } else if (x[i] == '&') {
            const std::size_t semi = x.find(';', i);
            const std::string ent = semi == std::string::npos ? "" : x.substr(i, semi - i + 1);
            if (ent != "&amp;" && ent != "&lt;" && ent != "&gt;" && ent != "&quot;" && ent != "&apos;")
                return "bad entity at " + std::to_string(i);
            i = semi + 1;
        } else {
            ++i;
        }
    }
    if (!open.empty()) return "<" + open.back() + "> is never closed";
    if (roots != 1) return "expected one root element, found " + std::to_string(roots);
    return "";
}

}  // namespace

TEST_CASE("braid-plan --format json agrees with the library and writes a valid plan, trace and SVG") {
    const std::filesystem::path dir = std::filesystem::temp_directory_path() / "braid-plan-test";
    std::filesystem::remove_all(dir);
    const Run r = run_tool("--net resnet18 --batch 8 --image 64 --classes 10 --device a100 --max-streams 4 --format json --out " +
                           dir.string());
    REQUIRE_MESSAGE(r.status == 0, r.output);
    const nlohmann::json j = nlohmann::json::parse(r.output);
    REQUIRE(j["strategies"].size() == strategy_names().size());

    // The same inputs through the library.
    samples::TrainConfig tc;
    tc.model.net = "resnet18";
    tc.model.batch = 8;
    tc.model.image = 64;
    tc.model.classes = 10;
    const samples::TrainingGraph tg = samples::build_training_graph(tc);
    const DeviceSpec& dev = find_device("a100");
    const OpCosts costs = estimate_costs(dev, samples::op_estimates(tg));
    ComparisonOptions co;
    co.max_streams = 4;
    const Comparison c = compare_strategies(tg.graph, dev, costs, co);
    for (const nlohmann::json& s : j["strategies"]) {
        const StrategyRow& row = c.row(s["name"].get<std::string>());
        CAPTURE(row.name);
        CHECK(s["predicted_ms"].get<double>() == doctest::Approx(row.predicted_ns / 1e6).epsilon(1e-12));
        CHECK(s["speedup_vs_serial"].get<double>() == doctest::Approx(row.speedup_vs_serial).epsilon(1e-12));
        CHECK(s["speedup_vs_serial_graph"].get<double>() == doctest::Approx(row.speedup_vs_serial_graph).epsilon(1e-12));
        CHECK(s["streams"].get<std::uint32_t>() == row.streams);
        CHECK(s["waits"].get<std::size_t>() == row.waits);
        CHECK(s["lb_ratio"].get<double>() == doctest::Approx(row.lb_ratio).epsilon(1e-12));
    }
    CHECK(j["lower_bound_ms"].get<double>() == doctest::Approx(c.bound.bound_ns / 1e6));
    CHECK(j["chosen"] == "braid");

    const Plan p = load_plan(j["files"]["plan"].get<std::string>(), tg.graph);
    CHECK(first_violation(p, tg.graph) == "");
    CHECK(p.strategy == "braid");
    CHECK(p == c.row("braid").plan);

    const nlohmann::json trace = nlohmann::json::parse(read(j["files"]["trace"].get<std::string>()));
    CHECK(trace.contains("traceEvents"));
    CHECK(xml_problem(read(j["files"]["svg"].get<std::string>())) == "");
    std::filesystem::remove_all(dir);
}

TEST_CASE("braid-plan writes the strategy asked for, and the table names the files") {
    const std::filesystem::path dir = std::filesystem::temp_directory_path() / "braid-plan-test-table";
    const Run r = run_tool("--net googlenet --batch 4 --image 96 --classes 10 --no-aux --strategy nimble --mode eager --out " +
                           dir.string());
    REQUIRE_MESSAGE(r.status == 0, r.output);
    CHECK(r.output.find("nimble") != std::string::npos);
    CHECK(r.output.find("<- written") != std::string::npos);
    CHECK(r.output.find((dir / "plan.json").string()) != std::string::npos);
    samples::TrainConfig tc;
    tc.model.net = "googlenet";
    tc.model.batch = 4;
    tc.model.image = 96;
    tc.model.classes = 10;
    tc.model.aux_classifiers = false;
    const samples::TrainingGraph tg = samples::build_training_graph(tc);
    const Plan p = load_plan((dir / "plan.json").string(), tg.graph);
    CHECK(p.strategy == "nimble");
    CHECK(first_violation(p, tg.graph) == "");
    // The table explains itself: what every column means and where the numbers come from.
    CHECK(r.output.find("Predicted by braid's GPU simulator for the h200 from estimated, calibrated costs (built-in "
                        "calibration for h200).") != std::string::npos);
    CHECK(r.output.find("vs serial: the serial plan's time in eager mode divided by the row's.") != std::string::npos);
    CHECK(r.output.find("/ lower bnd: the row's time over the lower bound") != std::string::npos);
    CHECK(r.output.find("waits: cross-stream event waits in the plan.") != std::string::npos);

    // --calibration none: the roofline, said so.
    const Run raw = run_tool("--net googlenet --batch 4 --image 96 --classes 10 --no-aux --calibration none --out " +
                             dir.string());
    REQUIRE_MESSAGE(raw.status == 0, raw.output);
    CHECK(raw.output.find("from roofline-estimated costs (no calibration).") != std::string::npos);

    // In graph mode "vs serial" already is against the serial graph: no second column.
    const Run g = run_tool("--net googlenet --batch 4 --image 96 --classes 10 --no-aux --out " + dir.string());
    REQUIRE_MESSAGE(g.status == 0, g.output);
    CHECK(g.output.find("plans run in graph mode") != std::string::npos);
    CHECK(g.output.find("vs serial graph") == std::string::npos);

    // A plan given where a profile belongs is named as such, with the file.
    const Run wrong = run_tool("--profile " + (dir / "plan.json").string());
    CHECK(wrong.status != 0);
    CHECK(wrong.output.find((dir / "plan.json").string() + ": $: this is a braid.plan, not a braid.profile") !=
          std::string::npos);
    std::filesystem::remove_all(dir);
}

TEST_CASE("braid-plan --max-connections: eager plans for a process with that many hardware queues, as the library makes them") {
    const std::filesystem::path dir = std::filesystem::temp_directory_path() / "braid-plan-test-queues";
    samples::TrainConfig tc;
    tc.model.net = "resnet50";
    const samples::TrainingGraph tg = samples::build_training_graph(tc);
    const DeviceSpec& dev = find_device("h200");
    const std::optional<Calibration> calibration = builtin_calibration(dev);
    REQUIRE(calibration);
    for (const int queues : {1, 32}) {
        CAPTURE(queues);
        const Run r = run_tool("--net resnet50 --mode eager --max-connections " + std::to_string(queues) +
                               " --format json --out " + dir.string());
        REQUIRE_MESSAGE(r.status == 0, r.output);
        const nlohmann::json j = nlohmann::json::parse(r.output);
        CHECK(j["eager_hardware_queues"] == queues);
        ComparisonOptions co;
        co.mode = LaunchMode::eager;
        co.sim = calibration->sim;
        co.sim.eager_hardware_queues = queues;
        const Comparison c =
            compare_strategies(tg.graph, dev, calibrated_costs(dev, samples::op_estimates(tg), *calibration, co.mode), co);
        for (const nlohmann::json& row : j["strategies"]) {
            CAPTURE(row["name"].get<std::string>());
            CHECK(row["predicted_ms"].get<double>() ==
                  doctest::Approx(c.row(row["name"].get<std::string>()).predicted_ns / 1e6).epsilon(1e-12));
        }
        const std::uint32_t streams = c.row("braid").streams;
        // One queue runs every stream's kernels in launch order: braid keeps to one stream;
        // 32 leave room for more streams than the default 8 queues do.
        if (queues == 1) CHECK(streams == 1);
        else CHECK(streams > 8);
    }
    // Not given: the calibration's 8, said in the table.
    const Run table = run_tool("--net resnet50 --mode eager --out " + dir.string());
    REQUIRE_MESSAGE(table.status == 0, table.output);
    CHECK(table.output.find("plans run in eager mode over 8 hardware queues:") != std::string::npos);
    const Run given = run_tool("--net resnet50 --mode eager --max-connections 4 --out " + dir.string());
    CHECK(given.output.find("plans run in eager mode over 4 hardware queues (--max-connections):") != std::string::npos);
    const Run bad = run_tool("--max-connections 33");
    CHECK(bad.status != 0);
    CHECK(bad.output.find("--max-connections: expected a whole number from 1 to 32, got '33'") != std::string::npos);
    std::filesystem::remove_all(dir);
}

TEST_CASE("braid-plan: bad arguments give clear errors and a non-zero exit") {
    Run r = run_tool("--net alexnet");
    CHECK(r.status != 0);
    CHECK(r.output.find("unknown network 'alexnet'; known networks: googlenet") != std::string::npos);
    r = run_tool("--device v100");
    CHECK(r.status != 0);
    CHECK(r.output.find("unknown device 'v100'; known devices: a100, h100, h200, l40s, rtx4090") != std::string::npos);
    r = run_tool("--profile /nonexistent/profile.json");
    CHECK(r.status != 0);
    CHECK(r.output.find("cannot read profile '/nonexistent/profile.json'") != std::string::npos);
    r = run_tool("--batch 0");
    CHECK(r.status != 0);
    CHECK(r.output.find("--batch") != std::string::npos);
    // Outputs that cannot be written are refused before planning, naming the option.
    r = run_tool("--out /etc/passwd");
    CHECK(r.status != 0);
    CHECK(r.output.find("--out: cannot write '/etc/passwd/plan.json': '/etc/passwd' is not a folder") != std::string::npos);
    r = run_tool("--out /proc/x");
    CHECK(r.status != 0);
    CHECK(r.output.find("--out: cannot write '/proc/x/plan.json': cannot make folder '/proc/x'") != std::string::npos);
    r = run_tool("--strategy fastest");
    CHECK(r.status != 0);
    CHECK(r.output.find("unknown strategy 'fastest'") != std::string::npos);
    r = run_tool("--net googlenet --image 32");
    CHECK(r.status != 0);
    CHECK(r.output.find("smallest image") != std::string::npos);
    r = run_tool("--mode sideways");
    CHECK(r.status != 0);
    // An empty value (an unset shell variable) is refused: no plan of another net, no files written to the root.
    for (const char* option : {"--out", "--plan-out", "--trace-out", "--svg-out", "--profile", "--prototxt", "--device",
                               "--calibration"}) {
        CAPTURE(option);
        r = run_tool(std::string("--net resnet18 --batch 8 ") + option + " ''");
        CHECK(r.status != 0);
        CHECK(r.output.find(std::string(option) + ": must not be empty") != std::string::npos);
    }
    r = run_tool("--net resnet18 --width-scale 1e30");
    CHECK(r.status != 0);
    CHECK(r.output.find("--width-scale: expected a number from 1e-06 to 64, got '1e30'") != std::string::npos);
    // A profile carries its own graph: options that build or size one are refused beside it, not ignored.
    const std::string profile = std::string(BRAID_SOURCE_DIR) + "/tests/data/h200/resnet50-b8.profile.json";
    for (const char* option : {"--net googlenet", "--batch 64", "--image 32", "--classes 5", "--width-scale 0.5", "--no-aux"}) {
        CAPTURE(option);
        r = run_tool("--profile " + profile + " " + option);
        CHECK(r.status != 0);
        CHECK(r.output.find(std::string(option).substr(0, std::string(option).find(' ')) + " excludes --profile") !=
              std::string::npos);
    }
    // Two outputs in one file would leave only the last written.
    const std::string same = (std::filesystem::temp_directory_path() / "braid-plan-same.json").string();
    r = run_tool("--net resnet18 --batch 8 --plan-out " + same + " --trace-out " + same);
    CHECK(r.status != 0);
    CHECK(r.output.find("--plan-out and --trace-out are the same file ('" + same + "'): give each its own") !=
          std::string::npos);
    CHECK_FALSE(std::filesystem::exists(same));
    const std::string profile_copy = (std::filesystem::temp_directory_path() / "braid-plan-same.profile.json").string();
    std::filesystem::copy_file(profile, profile_copy, std::filesystem::copy_options::overwrite_existing);
    r = run_tool("--profile " + profile_copy + " --plan-out " + profile_copy);
    CHECK(r.status != 0);
    CHECK(r.output.find("--plan-out and --profile are the same file") != std::string::npos);
    CHECK(braid::detail::load_json_file(profile_copy).at("format") == "braid.profile");
    std::filesystem::remove(profile_copy);
    r = run_tool("--max-streams 129");
    CHECK(r.status != 0);
    CHECK(r.output.find("--max-streams: expected a whole number from 1 to 128, got '129'") != std::string::npos);
    r = run_tool("--help");
    CHECK(r.status == 0);
    CHECK(r.output.find("Examples:") != std::string::npos);
    CHECK(r.output.find("--profile") != std::string::npos);
}

TEST_CASE("braid-plan --prototxt plans a Caffe net like the bundled one it describes") {
    const std::string googlenet = BRAID_SOURCE_DIR "/samples/caffe/models/googlenet.prototxt";
    const std::string dir = (std::filesystem::temp_directory_path() / "braid-plan-prototxt").string();
    const Run r = run_tool("--prototxt " + googlenet + " --batch 8 --format json --out " + dir);
    CAPTURE(r.output);
#if BRAID_TOOLS_HAVE_CAFFE
    REQUIRE(r.status == 0);
    const nlohmann::json j = nlohmann::json::parse(r.output.substr(r.output.find('{')));
    CHECK(j["input"] == "GoogleNet from " + googlenet + ", batch 8, 224x224, 1000 classes");
    CHECK(j["notes"].size() > 3);
    const Run bundled = run_tool("--net googlenet --batch 8 --format json --out " + dir);
    const nlohmann::json b = nlohmann::json::parse(bundled.output);
    CHECK(j["ops"] == b["ops"]);
    CHECK(j["edges"] == b["edges"]);
    CHECK(j["serial_graph_ms"] == b["serial_graph_ms"]);
#else
    CHECK(r.status == 1);
    CHECK(r.output.find("this build has no Caffe prototxt reader") != std::string::npos);
#endif
    const Run both = run_tool("--prototxt " + googlenet + " --profile p.json");
    CHECK(both.status != 0);
    CHECK(both.output.find("--profile excludes --prototxt") != std::string::npos);
    std::filesystem::remove_all(dir);
}

TEST_CASE("braid-plan plans a graph embedded in a profile, on the profile's device unless told otherwise") {
    OpGraphBuilder b;
    BufferId in = b.add_buffer("in", 1 << 20), l = b.add_buffer("l", 1 << 20), r2 = b.add_buffer("r", 1 << 20),
             out = b.add_buffer("out", 1 << 20);
    b.add_op({"src", OpKind::forward, "src", {}, {in}, 0});
    b.add_op({"left", OpKind::forward, "left", {in}, {l}, 0});
    b.add_op({"right", OpKind::backward_weight, "right", {in}, {r2}, 0});
    b.add_op({"join", OpKind::forward, "join", {l, r2}, {out}, 0});
    const OpGraph g = b.finalize();

    Profile prof;
    prof.device = find_device("h100");
    prof.graph_fingerprint = g.fingerprint();
    prof.graph = g;
    prof.run.network = "hand-made";
    prof.run.measured_iterations = 3;
    for (const Op& op : g.ops()) {
        ProfiledOp po;
        po.name = op.name;
        po.layer = op.layer;
        po.kind = op.kind;
        ProfiledKernel k;
        k.shape = KernelShape{op.name + "_kernel", {40, 1, 1}, {256, 1, 1}, 32, 0, 0};
        k.duration = DurationStats{50000.0, 49000.0, 52000.0, 3};
        po.kernels.push_back(k);
        po.duration = k.duration;
        prof.ops.push_back(po);
    }
    const std::filesystem::path dir = std::filesystem::temp_directory_path() / "braid-plan-test-profile";
    std::filesystem::create_directories(dir);
    save_profile(prof, (dir / "profile.json").string());

    Run r = run_tool("--profile " + (dir / "profile.json").string() + " --format json --out " + dir.string());
    REQUIRE_MESSAGE(r.status == 0, r.output);
    nlohmann::json j = nlohmann::json::parse(r.output);
    CHECK(j["device"] == "h100");
    CHECK(j["ops"] == 4);
    const Plan p = load_plan((dir / "plan.json").string(), g);
    CHECK(first_violation(p, g) == "");
    // left and right are independent 40-block kernels: running them together saves one of them.
    const nlohmann::json& last = j["strategies"].back();  // braid's row
    REQUIRE(last["name"] == "braid");
    CHECK(last["speedup_vs_serial_graph"].get<double>() > 1.3);  // 200 us serial, 150 us with left and right together

    r = run_tool("--profile " + (dir / "profile.json").string() + " --device a100 --format json --out " + dir.string());
    REQUIRE_MESSAGE(r.status == 0, r.output);
    j = nlohmann::json::parse(r.output);
    CHECK(j["device"] == "a100");
    REQUIRE(j["warnings"].size() == 1);
    CHECK(j["warnings"][0].get<std::string>().find("H100") != std::string::npos);

    // A profile without its graph cannot be planned, and says why.
    prof.graph.reset();
    save_profile(prof, (dir / "old.json").string());
    r = run_tool("--profile " + (dir / "old.json").string());
    CHECK(r.status != 0);
    CHECK(r.output.find("has no embedded graph") != std::string::npos);
    std::filesystem::remove_all(dir);
}

#ifdef BRAID_CALIBRATE_EXE
TEST_CASE("braid-calibrate checks where it writes before it fits, and refuses empty values") {
    const auto calibrate = [](const std::string& args) {
        return braid::testing::run_command(std::string(BRAID_CALIBRATE_EXE) + " " + args);
    };
    const std::string data = std::string(BRAID_SOURCE_DIR) + "/tests/data/h200/measurements.json";
    // A fit of the whole data set takes minutes: these fail at once, before it.
    const std::vector<std::pair<std::string, std::string>> cases{
        {"-o /proc/x/c.json", "--calibration-out: cannot write '/proc/x/c.json': cannot make folder '/proc/x'"},
        {"-o /etc/passwd/c.json", "--calibration-out: cannot write '/etc/passwd/c.json'"},
        {"-o " + std::filesystem::temp_directory_path().string(), "' is a folder; give a file name"},
        {"--cpp-out /nonexistent/c.inc", "--cpp-out: cannot write '/nonexistent/c.inc': folder '/nonexistent' does not exist"},
        {"-o ''", "--calibration-out: must not be empty"},
        {"--hold-out ''", "--hold-out: must not be empty"},
        // The same file twice would weigh twice in the fit.
        {std::string(BRAID_SOURCE_DIR) + "/tests/data/h200/../h200/measurements.json", "' is given twice ("},
        {std::string(BRAID_SOURCE_DIR) + "/tests/data/h200", "cannot read '" + std::string(BRAID_SOURCE_DIR) + "/tests/data/h200': it is a folder, not a file"},
    };
    for (const auto& c : cases) {
        const std::string& args = c.first;  // not bindings: CAPTURE's lambda takes them before clang 16 too
        const std::string& expected = c.second;
        CAPTURE(args);
        const Run r = calibrate(data + " " + args);
        CAPTURE(r.output);
        CHECK(r.status != 0);
        CHECK(r.output.find(expected) != std::string::npos);
        CHECK(r.output.find("fitting on") == std::string::npos);
    }
    // An output that is an input, or another output, is refused before anything is read or written.
    const std::filesystem::path dir = std::filesystem::temp_directory_path() / "braid-calibrate-same-file";
    std::filesystem::create_directories(dir);
    const std::string copy = (dir / "measurements.json").string();
    std::filesystem::copy_file(data, copy, std::filesystem::copy_options::overwrite_existing);
    const Run over_input = calibrate(copy + " -o " + (dir / "." / "measurements.json").string());
    CAPTURE(over_input.output);
    CHECK(over_input.status != 0);
    CHECK(over_input.output.find("--calibration-out and input '" + copy + "' are the same file") != std::string::npos);
    CHECK(braid::detail::load_json_file(copy).at("format") == "braid.measurements");  // still the measurements
    // A hard link is the same file under another name.
    const std::string link = (dir / "linked.json").string();
    std::filesystem::remove(link);
    std::filesystem::create_hard_link(copy, link);
    const Run over_link = calibrate(copy + " -o " + link);
    CAPTURE(over_link.output);
    CHECK(over_link.status != 0);
    CHECK(over_link.output.find("are the same file") != std::string::npos);
    CHECK(braid::detail::load_json_file(copy).at("format") == "braid.measurements");
    const Run two_outputs = calibrate(copy + " -o " + (dir / "c.json").string() + " --cpp-out " + (dir / "c.json").string());
    CHECK(two_outputs.status != 0);
    CHECK(two_outputs.output.find("--calibration-out and --cpp-out are the same file") != std::string::npos);
    std::filesystem::remove_all(dir);
}
#endif
