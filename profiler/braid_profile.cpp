// braid-profile: runs a network's step (the built-in demo, or a bundled
// net's training step) on a serial plan under CUPTI (or, when CUPTI cannot
// start, with CUDA events), writes profile.json, plans it and writes
// plan.json, and prints what each layer's kernels do to the GPU. The work is
// profile_tool.cpp; this is the command line.
#include <cstdio>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "braid/planner/calibration_json.hpp"
#include "braid/planner/make_plan.hpp"
#include "nets/zoo.hpp"
#include "profile_tool.hpp"
#include "vocabulary.hpp"

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
                 "braid's planner and write plan.json",
                 "braid-profile"};
    std::vector<std::string> nets{"demo"};
    for (const std::string& n : braid::samples::network_names()) nets.push_back(n);
    CLI::Option* net = app.add_option("--net", opt.network,
                                      "network whose step is profiled: the built-in 'demo', or a bundled net's training "
                                      "step (as braid-train trains it)")
                           ->check(CLI::IsMember(nets))
                           ->capture_default_str();
    braid::cli::add_deprecated(app, "--network", opt.network, "--net", net, CLI::IsMember(nets));
    // A bundled net's size, with braid-train's options and defaults.
    braid::samples::NetConfig& m = opt.net;
    CLI::Option* batch =
        app.add_option("--batch", m.batch, "bundled net: images per iteration")->check(braid::cli::range(1u, braid::cli::max_batch))->capture_default_str();
    CLI::Option* image = app.add_option("--image", m.image,
                                        "bundled net: image height and width in pixels [default: the net's own, 299 "
                                        "for inception_v3, 224 for the others]")
                             ->check(braid::cli::range(1u, braid::cli::max_image));
    CLI::Option* classes = app.add_option("--classes", m.classes, "bundled net: number of classes")
                               ->check(braid::cli::range(2u, braid::cli::max_classes))
                               ->capture_default_str();
    CLI::Option* width = app.add_option("--width-scale", m.width_scale, "bundled net: multiplies every hidden channel count")
                             ->check(braid::cli::range(braid::cli::min_width_scale, braid::cli::max_width_scale))
                             ->capture_default_str();
    bool no_aux = false;
    CLI::Option* aux = app.add_flag("--no-aux", no_aux,
                                    "GoogLeNet without its two auxiliary classifiers, Inception-v3 without AuxLogits");
    CLI::Option* fuse = app.add_flag("--fuse-relu", m.fuse_relu, braid::samples::fuse_relu_help);
    CLI::Option* share =
        app.add_flag("--share-bn-sums", m.share_batch_norm_sums, braid::samples::share_batch_norm_sums_help);
    std::uint64_t bucket_mib = 0;
    CLI::Option* bucket = app.add_option("--update-bucket-mib", bucket_mib, braid::samples::update_bucket_help)
                              ->check(braid::cli::range(std::uint64_t{0}, std::uint64_t{1} << 30))
                              ->capture_default_str();
    CLI::Option* gpu = app.add_option("--gpu", opt.device, "CUDA device ordinal of the GPU to profile")
                           ->check(braid::cli::range(0, 1023))
                           ->capture_default_str();
    // --device names a GPU model in the other tools; here it was the ordinal.
    braid::cli::add_deprecated(app, "--device", opt.device, "--gpu (--device names a GPU model in the other tools)", gpu,
                               braid::cli::range(0, 1023));
    app.add_option("--warmup", opt.warmup, "warm-up iterations (not measured)")
        ->check(braid::cli::range(0u, 100000u))
        ->capture_default_str();
    app.add_option("--iters", opt.iters, "measured iterations")->check(braid::cli::range(1u, 100000u))->capture_default_str();
    CLI::Option* profile_out =
        app.add_option("--profile-out", opt.out_profile, "where to write the profile")->capture_default_str();
    CLI::Option* plan_out = app.add_option("--plan-out", opt.out_plan, "where to write the plan")->capture_default_str();
    braid::cli::add_deprecated(app, "--out-profile", opt.out_profile, "--profile-out", profile_out);
    braid::cli::add_deprecated(app, "--out-plan", opt.out_plan, "--plan-out", plan_out);
    app.add_option("--strategy", opt.strategy, "planning strategy")
        ->check(CLI::IsMember(braid::strategy_names()))
        ->capture_default_str();
    app.add_option("--max-streams", opt.max_streams, "most streams the plan may use")
        ->check(braid::cli::range(1u, braid::cli::max_streams))
        ->capture_default_str();
    app.add_option("--mode", opt.mode, "how the plan is to run: graph (one captured CUDA graph) or eager (launch by launch)")
        ->check(CLI::IsMember({"graph", "eager"}))
        ->capture_default_str();
    app.add_option("--calibration", opt.calibration, std::string(braid::cli::calibration_help));
    app.add_flag("--no-cupti", opt.no_cupti, "time ops with CUDA events instead of CUPTI (durations-only profile)");
    app.add_flag("--kernels", opt.kernels, "also print every kernel and transfer of every op");
    std::string conv_api = "legacy";
    CLI::Option* api = app.add_option("--conv-api", conv_api,
                                      "a bundled net's convolutions: cuDNN's legacy calls or its graph API's engines")
                           ->check(CLI::IsMember({"legacy", "graph"}))
                           ->capture_default_str();
    std::string batch_norm = "own";
    CLI::Option* bn = app.add_option("--batch-norm", batch_norm,
                                     "a bundled net's batch norms: the own kernels or cuDNN's")
                          ->check(CLI::IsMember({"own", "cudnn"}))
                          ->capture_default_str();
    std::string layout = "nchw";
    CLI::Option* layout_option =
        app.add_option("--layout", layout,
                       "a bundled net's activations: NCHW, or NHWC with KRSC filters")
            ->check(CLI::IsMember({"nchw", "nhwc"}))
            ->capture_default_str();
    app.footer(
        "Examples:\n"
        "  braid-profile --warmup 5 --iters 20 --profile-out demo.profile.json \\\n"
        "                --plan-out demo.plan.json --strategy braid --max-streams 4 --kernels\n"
        "  braid-profile --net googlenet --batch 32 --no-aux --profile-out googlenet.profile.json\n"
        "  (then: braid-plan --profile googlenet.profile.json --plan-out plan.json;\n"
        "         braid-train --net googlenet --batch 32 --no-aux --backend cuda --strategy plan.json)\n"
        "Without a CUDA device it prints \"no CUDA device\" and exits with 77. When CUPTI cannot start (no\n"
        "libcupti, insufficient privileges, another profiler attached) it says why and falls back to CUDA\n"
        "events: a durations-only profile. BRAID_CUPTI_LIBRARY names the libcupti to load.");
    braid::cli::refuse_empty_values(app);
    CLI11_PARSE(app, argc, argv);
    m.aux_classifiers = !no_aux;
    m.update_bucket_bytes = bucket_mib << 20;
    opt.conv_graph_api = conv_api == "graph";
    opt.cudnn_batch_norm = batch_norm == "cudnn";
    opt.channels_last = layout == "nhwc";
    if (image->count() == 0) m.image = braid::samples::default_image(opt.network);
    if (api->count() > 0 && opt.network == "demo") {
        std::fprintf(stderr, "braid-profile: --conv-api chooses how a bundled net's convolutions run; the demo has no "
                             "cuDNN convolutions (give --net NAME)\n");
        return 2;
    }
    if (bn->count() > 0 && opt.network == "demo") {
        std::fprintf(stderr, "braid-profile: --batch-norm chooses how a bundled net's batch norms run; the demo has "
                             "none (give --net NAME)\n");
        return 2;
    }
    if (layout_option->count() > 0 && opt.network == "demo") {
        std::fprintf(stderr, "braid-profile: --layout chooses how a bundled net's activations lie; the demo has no "
                             "cuDNN layers (give --net NAME)\n");
        return 2;
    }
    for (const CLI::Option* o : {batch, image, classes, width, aux, fuse, share, bucket})
        if (o->count() > 0 && opt.network == "demo") {
            std::fprintf(stderr, "braid-profile: %s sizes a bundled net; the demo has a fixed size (give --net NAME)\n",
                         o->get_name().c_str());
            return 2;
        }
    try {
        // The files it reads and writes, checked before a GPU is looked for: a bad one is an error on
        // any machine, not a skip where there is no GPU.
        for (const auto& [option, path] : {std::pair{"--profile-out", &opt.out_profile}, std::pair{"--plan-out", &opt.out_plan}})
            if (const std::string why = braid::cli::output_path_problem(option, *path); !why.empty())
                throw braid::Error(why);
        std::vector<std::pair<std::string, std::string>> files{{"--profile-out", opt.out_profile}, {"--plan-out", opt.out_plan}};
        if (!opt.calibration.empty() && opt.calibration != "none") files.emplace_back("--calibration", opt.calibration);
        if (const std::string why = braid::cli::same_file_problem(files); !why.empty()) throw braid::Error(why);
        if (!opt.calibration.empty() && opt.calibration != "none") (void)braid::load_calibration(opt.calibration);
        return braid::tool::run_profile_tool(opt);
    } catch (const std::exception& e) {
        print_error(e);
        return 1;
    }
}
