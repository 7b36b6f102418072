// braid-profile's planning half, which needs no GPU (tool::report): from a
// profile measured on the H200 it writes the plan braid-plan --profile
// writes for the same profile, strategy, stream limit, mode and calibration.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "braid/plan/plan_json.hpp"
#include "braid/profiler/profile_json.hpp"
#include "profile_tool.hpp"
#include "run_command.hpp"

TEST_CASE("braid-profile's plan is braid-plan --profile's for the same profile and options") {
    const std::string profile_path = std::string(BRAID_SOURCE_DIR) + "/tests/data/h200/googlenet-noaux-b8.profile.json";
    const braid::Profile profile = braid::load_profile(profile_path);
    REQUIRE(profile.graph);
    const std::filesystem::path dir = std::filesystem::temp_directory_path() / "braid-profile-tool-test";
    std::filesystem::create_directories(dir);
    struct Case {
        std::string mode, calibration, strategy;
        std::uint32_t max_streams;
    };
    for (const Case& c : {Case{"graph", "", "braid", 8}, Case{"eager", "none", "braid", 4}, Case{"graph", "", "glp4nn", 6}}) {
        CAPTURE(c.mode);
        CAPTURE(c.calibration);
        CAPTURE(c.strategy);
        braid::tool::ProfileToolOptions o;
        o.out_profile = profile_path;
        o.out_plan = (dir / "tool.plan.json").string();
        o.strategy = c.strategy;
        o.max_streams = c.max_streams;
        o.mode = c.mode;
        o.calibration = c.calibration;
        braid::tool::report(profile, *profile.graph, profile.device, o);

        const std::string planned = (dir / "braid-plan.plan.json").string();
        const braid::testing::CommandRun r = braid::testing::run_command(
            std::string(BRAID_PLAN_PATH) + " --profile " + profile_path + " --strategy " + c.strategy +
            " --max-streams " + std::to_string(c.max_streams) + " --mode " + c.mode +
            (c.calibration.empty() ? "" : " --calibration " + c.calibration) + " --out " + (dir / "out").string() +
            " --plan-out " + planned);
        CAPTURE(r.output);
        REQUIRE(r.status == 0);
        const braid::Plan from_tool = braid::load_plan(o.out_plan, *profile.graph);
        const braid::Plan from_plan = braid::load_plan(planned, *profile.graph);
        CHECK(from_tool.strategy == c.strategy);
        CHECK(from_tool == from_plan);
    }
    std::filesystem::remove_all(dir);
}
