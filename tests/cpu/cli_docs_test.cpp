// docs/cli.md is the option reference of braid's tools: every built tool's
// --help must list exactly the options of its column there, and the old
// spellings must still work while saying what replaced them.
#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "run_command.hpp"

namespace {

using Run = braid::testing::CommandRun;
using braid::testing::run_command;

// Tool name -> the options docs/cli.md marks for it.
std::map<std::string, std::set<std::string>> documented() {
    std::ifstream in(BRAID_SOURCE_DIR "/docs/cli.md");
    REQUIRE(in);
    std::map<std::string, std::set<std::string>> out;
    std::vector<std::string> columns;
    std::string line;
    auto cells = [](const std::string& row) {
        std::vector<std::string> c;
        std::stringstream ss(row);
        std::string cell;
        std::getline(ss, cell, '|');  // before the first bar
        while (std::getline(ss, cell, '|')) {
            const auto b = cell.find_first_not_of(' '), e = cell.find_last_not_of(' ');
            c.push_back(b == std::string::npos ? "" : cell.substr(b, e - b + 1));
        }
        return c;
    };
    while (std::getline(in, line)) {
        if (line.rfind("| option |", 0) == 0) {
            columns = cells(line);
            continue;
        }
        if (columns.empty()) continue;
        if (line.rfind("|", 0) != 0) break;  // the table ended
        const std::vector<std::string> c = cells(line);
        if (c.empty() || c[0].rfind("`--", 0) != 0) continue;  // the |---| row
        const std::string option = c[0].substr(1, c[0].find('`', 1) - 1);
        for (std::size_t i = 1; i < c.size() && i < columns.size(); ++i)
            if (c[i] == "x") out[columns[i]].insert(option);
    }
    return out;
}

// The options a CLI11 --help lists ("  --max-streams UINT ...", "  -h,--help").
std::set<std::string> listed(const std::string& help) {
    std::set<std::string> out;
    static const std::regex option(R"(^\s+(?:-\w,)?(--[a-z0-9-]+))");
    std::stringstream ss(help);
    std::string line;
    bool in_options = false;
    while (std::getline(ss, line)) {
        if (line.rfind("Options:", 0) == 0) in_options = true;
        std::smatch m;
        if (in_options && std::regex_search(line, m, option)) out.insert(m[1]);
    }
    return out;
}

const std::map<std::string, std::string>& tools() {
    static const std::map<std::string, std::string> t = {
#ifdef BRAID_PLAN_PATH
        {"braid-plan", BRAID_PLAN_PATH},
#endif
#ifdef BRAID_TRAIN_PATH
        {"braid-train", BRAID_TRAIN_PATH},
#endif
#ifdef BRAID_PROFILE_PATH
        {"braid-profile", BRAID_PROFILE_PATH},
#endif
#ifdef BRAID_DEVICES_PATH
        {"braid-devices", BRAID_DEVICES_PATH},
#endif
#ifdef BRAID_CALIBRATE_PATH
        {"braid-calibrate", BRAID_CALIBRATE_PATH},
#endif
#ifdef BRAID_MEASURE_PATH
        {"braid-measure", BRAID_MEASURE_PATH},
#endif
    };
    return t;
}

}  // namespace

TEST_CASE("every tool's --help lists exactly its options in docs/cli.md") {
    const auto docs = documented();
    REQUIRE(docs.size() == 6);
    REQUIRE(!tools().empty());
    for (const auto& tool : tools()) {
        const std::string& name = tool.first;  // a binding CAPTURE's lambda could not use before clang 16
        CAPTURE(name);
        const Run r = run_command(tool.second + " --help");
        CHECK(r.status == 0);
        REQUIRE(docs.count(name) == 1);
        CHECK(listed(r.output) == docs.at(name));
    }
}

TEST_CASE("old spellings still work, say what replaced them, and conflicting options are refused") {
#ifdef BRAID_PLAN_PATH
    {
        const std::string dir = std::string(BRAID_BUILD_DIR) + "/cli-docs-test";
        const Run r = run_command(std::string(BRAID_PLAN_PATH) + " --net resnet18 --image 32 --width-scale 0.125 --batch 2 "
                                                        "--device-json " BRAID_SOURCE_DIR
                                                        "/tools/fuzz/corpus/device/h200-profiled.json --out " +
                          dir + " --format json");
        CHECK(r.status == 0);
        CHECK(r.output.find("braid-plan: --device-json is deprecated and goes away in the next release; use --device "
                            "FILE (docs/cli.md)") != std::string::npos);
        const Run both = run_command(std::string(BRAID_PLAN_PATH) + " --device h100 --device-json x.json");
        CHECK(both.status != 0);
        CHECK(both.output.find("--device-json is the old spelling of --device; give only one of them") !=
              std::string::npos);
        const Run file = run_command(std::string(BRAID_PLAN_PATH) + " --device " BRAID_SOURCE_DIR
                                                            "/tools/fuzz/corpus/device/h200-profiled.json --net resnet18 "
                                                            "--image 32 --width-scale 0.125 --batch 2 --out " +
                             dir);
        CHECK(file.status == 0);
        CHECK(file.output.find("NVIDIA H200") != std::string::npos);
        const Run plan_as_device = run_command(std::string(BRAID_PLAN_PATH) + " --device " + dir + "/plan.json");
        CHECK(plan_as_device.status != 0);
        CHECK(plan_as_device.output.find(dir + "/plan.json: $: this is a braid.plan, not a device description") !=
              std::string::npos);
    }
#endif
#ifdef BRAID_TRAIN_PATH
    {
        const Run r = run_command(std::string(BRAID_TRAIN_PATH) +
                          " --net resnet18 --image 32 --width-scale 0.125 --batch 2 --classes 4 --iters 1 "
                          "--strategy braid --streams 2");
        CHECK(r.status == 0);
        CHECK(r.output.find("braid-train: --streams is deprecated and goes away in the next release; use --max-streams") !=
              std::string::npos);
        const Run both = run_command(std::string(BRAID_TRAIN_PATH) + " --net resnet18 --streams 2 --max-streams 3");
        CHECK(both.status != 0);
        CHECK(both.output.find("--streams is the old spelling of --max-streams; give only one of them") !=
              std::string::npos);
        CHECK(both.output.find(": --streams") == std::string::npos);  // CLI11 names a hidden option ""
        // An old spelling's bad value is refused naming it, as the new spelling's would be.
        const Run zero = run_command(std::string(BRAID_TRAIN_PATH) + " --net resnet18 --streams 0");
        CAPTURE(zero.output);
        CHECK(zero.status != 0);
        CHECK(zero.output.rfind("--streams: ", 0) == 0);
        const Run empty = run_command(std::string(BRAID_TRAIN_PATH) + " --net resnet18 --streams ''");
        CHECK(empty.status != 0);
        CHECK(empty.output.rfind("--streams: must not be empty", 0) == 0);
    }
#endif
#ifdef BRAID_PROFILE_PATH
    {
        const Run abc = run_command(std::string(BRAID_PROFILE_PATH) + " --device abc");
        CAPTURE(abc.output);
        CHECK(abc.status != 0);
        CHECK(abc.output.rfind("--device: expected a whole number, got 'abc'", 0) == 0);
        const Run network = run_command(std::string(BRAID_PROFILE_PATH) + " --network vgg16");
        CAPTURE(network.output);
        CHECK(network.status != 0);
        CHECK(network.output.rfind("--network: vgg16 not in", 0) == 0);
    }
#endif
#ifdef BRAID_DEVICES_PATH
    {
        const Run one = run_command(std::string(BRAID_DEVICES_PATH) + " --device a100 --format json");
        CHECK(one.status == 0);
        CHECK(one.output.find("\"key\": \"a100\"") != std::string::npos);
        CHECK(one.output.find("\"key\": \"h200\"") == std::string::npos);
        // One device's JSON is a device file the tools read back.
        const std::string file = std::string(BRAID_BUILD_DIR) + "/cli-docs-test-a100.json";
        const Run saved = run_command(std::string(BRAID_DEVICES_PATH) + " --device a100 --format json > " + file);
        REQUIRE(saved.status == 0);
        const Run back = run_command(std::string(BRAID_DEVICES_PATH) + " --device " + file + " --format json");
        CHECK(back.status == 0);
        CHECK(nlohmann::json::parse(back.output) == nlohmann::json::parse(one.output));
        // A pipe is read like a file.
        const Run piped = run_command("cat " + file + " | " + std::string(BRAID_DEVICES_PATH) +
                                      " --device /dev/stdin --format json");
        CHECK(piped.status == 0);
        CHECK(nlohmann::json::parse(piped.output) == nlohmann::json::parse(one.output));
        std::remove(file.c_str());
        const Run all = run_command(std::string(BRAID_DEVICES_PATH) + " --format json");
        CHECK(all.status == 0);
        CHECK(nlohmann::json::parse(all.output).size() == 5);
        const Run bad = run_command(std::string(BRAID_DEVICES_PATH) + " --device b300");
        CHECK(bad.status == 1);
        CHECK(bad.output.find("unknown device 'b300'; known devices: a100, h100, h200, l40s, rtx4090") !=
              std::string::npos);
    }
#endif
}
