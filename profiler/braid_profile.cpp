// braid-profile: runs a network on a serial plan under CUPTI (or, when CUPTI
// cannot start, with CUDA events), writes profile.json, plans it and writes
// plan.json, and prints what each layer's kernels do to the GPU. The work is
// profile_tool.cpp; this is the command line.
#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>

#include "braid/planner/make_plan.hpp"
#include "profile_tool.hpp"

namespace {

void print_error(const std::exception& e, int depth = 0) {
    std::fprintf(stderr, "%s%s\n", depth == 0 ? "braid-profile: " : "  caused by: ", e.what());
    try {
        std::rethrow_if_nested(e);
    } catch (const std::exception& inner) {
        print_error(inner, depth + 1);
    } catch (...) {
    }
}

}  // namespace

int main(int argc, char** argv) {
    braid::tool::ProfileToolOptions opt;
    CLI::App app{"braid-profile: profile a network's kernels per op with CUPTI, write profile.json, plan it with "
                 "braid's planner and write plan.json"};
    app.add_option("--network", opt.network, "network to run (only the built-in 'demo' for now)")
        ->check(CLI::IsMember({"demo"}))
        ->capture_default_str();
    app.add_option("--device", opt.device, "CUDA device ordinal")->check(CLI::Range(0, 1023))->capture_default_str();
    app.add_option("--warmup", opt.warmup, "warm-up iterations (not measured)")->capture_default_str();
    app.add_option("--iters", opt.iters, "measured iterations")->check(CLI::Range(1u, 100000u))->capture_default_str();
    app.add_option("--out-profile", opt.out_profile, "where to write the profile")->capture_default_str();
    app.add_option("--out-plan", opt.out_plan, "where to write the plan")->capture_default_str();
    app.add_option("--strategy", opt.strategy, "planning strategy")
        ->check(CLI::IsMember(braid::strategy_names()))
        ->capture_default_str();
    app.add_option("--max-streams", opt.max_streams, "most streams the plan may use")
        ->check(CLI::Range(1u, 1024u))
        ->capture_default_str();
    app.add_flag("--no-cupti", opt.no_cupti, "time ops with CUDA events instead of CUPTI (durations-only profile)");
    app.add_flag("--kernels", opt.kernels, "also print every kernel and transfer of every op");
    app.footer(
        "Example:\n"
        "  braid-profile --warmup 5 --iters 20 --out-profile demo.profile.json \\\n"
        "                --out-plan demo.plan.json --strategy braid --max-streams 4 --kernels\n"
        "Without a CUDA device it prints \"no CUDA device\" and exits with 77. When CUPTI cannot start (no\n"
        "libcupti, insufficient privileges, another profiler attached) it says why and falls back to CUDA\n"
        "events: a durations-only profile. BRAID_CUPTI_LIBRARY names the libcupti to load.");
    CLI11_PARSE(app, argc, argv);
    try {
        return braid::tool::run_profile_tool(opt);
    } catch (const std::exception& e) {
        print_error(e);
        return 1;
    }
}
