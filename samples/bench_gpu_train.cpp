// bench-gpu-train: training iterations of GoogLeNet and ResNet-50 (or any
// bundled net: --nets inception_v3) on the GPU (batch 8 and 32, each net's
// default image size: 224x224, Inception-v3 299x299; 1000 classes unless
// told otherwise) in four configurations — serial eager, serial graph,
// nimble (graph), braid (graph) — with the fastest cuDNN algorithms; then
// braid's best plans and the baselines tuned on the GPU (graph mode,
// interleaved rounds, docs/tuning.md); then a bitwise check of braid's plan
// and the tuned one against serial (graph mode, deterministic algorithms).
// Prints `key: value` lines for tools/gpu-check; times are means over
// --iters iterations after a warm-up iteration and (graph mode) the capture,
// and tuned times medians of the tuning rounds (--tune-budget 0: no tuning;
// a budget that preparing the candidates spends prints no tuned medians).
//
//   bench-gpu-train [--nets googlenet,resnet50] [--batches 8,32] [--image S]
//                   [--classes 1000] [--width-scale 1] [--iters 5] [--check-iters 2]
//                   [--tune-top 6] [--tune-budget 45] [--fuse-relu 0|1]
//                   [--share-bn-sums 0|1] [--update-bucket-mib N] [--conv-api legacy|graph]
//                   [--batch-norm own|cudnn] [--layout nchw|nhwc] [--pdl off|on]
// With --fuse-relu 1 the nets fold each ReLU after a batch norm or an add
// into it and every key names the net <net>_fused; with --share-bn-sums 1
// each batch norm has one backward op for dx and its weight gradient
// (<net>_shared, both: <net>_fused_shared); with --update-bucket-mib N > 0
// SGD updates run in multi-tensor buckets of N MiB (<net>..._bucketN); with
// --conv-api graph convolutions run on cuDNN graph-API engines
// (cuda/conv_engines.hpp; <net>..._graphapi), and the serial and braid plans
// are then replayed with legacy calls and with engines in alternation, 15
// rounds (<net>_graphapi_b<batch>_graphapi_speedup_{serial,braid}_graph:,
// the median of the per-round ratios). --batch-norm cudnn, --layout nhwc
// and --pdl on (the own kernels launched programmatically; <net>..._pdl)
// are compared the same way (..._{cudnnbn,nhwc,pdl}_speedup_...).
//
// Exit status: 0; 1 when a check differs or a run fails; 77 without a GPU;
// non-zero with the option named for a bad command line, checked first.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "braid/cuda/device.hpp"
#include "braid/model/device_table.hpp"
#include "braid/model/estimate.hpp"
#include "braid/planner/calibration_table.hpp"
#include "braid/planner/make_plan.hpp"
#include "braid/planner/strategies/serial.hpp"
#include "cuda/cuda_model.hpp"
#include "cuda/cuda_trainer.hpp"
#include "cuda/gpu_program.hpp"
#include "nets/zoo.hpp"
#include "train/training_graph.hpp"
#include "train/tuning.hpp"

namespace {

using namespace braid::samples;
using Clock = std::chrono::steady_clock;

struct Options {
    std::vector<std::string> nets{"googlenet", "resnet50"};
    std::vector<std::uint32_t> batches{8, 32};
    std::optional<std::uint32_t> image;  // none: each net's default_image
    std::uint32_t classes = 1000;
    double width_scale = 1.0;
    std::uint32_t iterations = 5, check_iterations = 2;
    std::uint32_t tune_top = 6;
    // Preparing the candidates counts: up to 9 trainers built, warmed up and captured.
    double tune_budget_s = 45.0;
    bool fuse_relu = false;
    bool share_batch_norm_sums = false;
    std::uint64_t update_bucket_mib = 0;
    std::string conv_api = "legacy";  // cuda::ConvApi by name
    std::string batch_norm = "own";   // cuda::BatchNormKernels by name
    std::string layout = "nchw";      // cuda::TensorLayout by name
    std::string pdl = "off";          // the own kernels launched programmatically
};

// What every CudaTrainer of the run starts from: the convolution API, the
// batch-norm kernels, the layout and how the own kernels are launched.
CudaRunOptions run_options(const Options& o) {
    CudaRunOptions run;
    run.conv_graph_api = o.conv_api == "graph";
    run.cudnn_batch_norm = o.batch_norm == "cudnn";
    run.channels_last = o.layout == "nhwc";
    run.programmatic_launch = o.pdl == "on";
    return run;
}

// The net as keys name it: <net>, <net>_fused, <net>_shared or <net>_fused_shared,
// then _bucketN, _graphapi, _cudnnbn, _nhwc and _pdl as those options say.
std::string key_name(const Options& o, const std::string& net) {
    return net + (o.fuse_relu ? "_fused" : "") + (o.share_batch_norm_sums ? "_shared" : "") +
           (o.update_bucket_mib > 0 ? "_bucket" + std::to_string(o.update_bucket_mib) : "") +
           (o.conv_api == "graph" ? "_graphapi" : "") + (o.batch_norm == "cudnn" ? "_cudnnbn" : "") +
           (o.layout == "nhwc" ? "_nhwc" : "") + (o.pdl == "on" ? "_pdl" : "");
}

// The command line, checked in full before anything asks for a GPU, so a
// mistyped option says so on any machine.
void add_options(CLI::App& app, Options& o) {
    app.add_option("--nets", o.nets, "bundled networks to train, comma-separated")
        ->delimiter(',')
        ->check(CLI::IsMember(network_names()))
        ->capture_default_str();
    app.add_option("--batches,--batch", o.batches, "batch sizes, comma-separated")
        ->delimiter(',')
        ->check(braid::cli::range(1u, 65536u))
        ->capture_default_str();
    app.add_option("--image", o.image, "square image size (default: each net's own)")->check(braid::cli::range(1u, 4096u));
    app.add_option("--classes", o.classes, "classes of the classifier")->check(braid::cli::range(1u, 1u << 20))->capture_default_str();
    app.add_option("--width-scale", o.width_scale, "channel-count multiplier")
        ->check(braid::cli::between(1e-3, 16.0))
        ->capture_default_str();
    app.add_option("--iters", o.iterations, "timed iterations per configuration")
        ->check(braid::cli::range(1u, 100000u))
        ->capture_default_str();
    app.add_option("--check-iters", o.check_iterations, "iterations of each bitwise check")
        ->check(braid::cli::range(1u, 100000u))
        ->capture_default_str();
    app.add_option("--tune-top", o.tune_top, "braid's best plans by the model that tuning measures")
        ->check(braid::cli::range(1u, 1000u))
        ->capture_default_str();
    app.add_option("--tune-budget", o.tune_budget_s,
                   "seconds of tuning per net and batch, preparation included (0: no tuning)")
        ->check(braid::cli::between(0.0, 86400.0))
        ->capture_default_str();
    app.add_option("--fuse-relu", o.fuse_relu, "1: fold ReLUs into batch norms and adds (keys <net>_fused)")
        ->check(CLI::IsMember({0, 1}));
    app.add_option("--share-bn-sums", o.share_batch_norm_sums,
                   "1: one backward op per batch norm (keys <net>_shared)")
        ->check(CLI::IsMember({0, 1}));
    app.add_option("--update-bucket-mib", o.update_bucket_mib,
                   "multi-tensor SGD buckets of this many MiB (keys <net>_bucketN; 0: per layer)")
        ->check(braid::cli::range(std::uint64_t{0}, std::uint64_t{1} << 30));
    app.add_option("--conv-api", o.conv_api,
                   "cuDNN API of the convolutions: legacy calls or graph-API engines (keys <net>_graphapi)")
        ->check(CLI::IsMember({"legacy", "graph"}))
        ->capture_default_str();
    app.add_option("--batch-norm", o.batch_norm, "batch-norm kernels: the own ones or cuDNN's (keys <net>_cudnnbn)")
        ->check(CLI::IsMember({"own", "cudnn"}))
        ->capture_default_str();
    app.add_option("--layout", o.layout,
                   "activations NCHW, or NHWC with KRSC filters (keys <net>_nhwc; networks without concat branches "
                   "ending in a convolution: every bundled net)")
        ->check(CLI::IsMember({"nchw", "nhwc"}))
        ->capture_default_str();
    app.add_option("--pdl", o.pdl,
                   "on: launch the own kernels programmatically (programmatic dependent launch; compute capability "
                   "9.0 or newer; keys <net>_pdl)")
        ->check(CLI::IsMember({"off", "on"}))
        ->capture_default_str();
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Config {
    const char* strategy;
    bool graph;
};

// Mean iteration time (ms) of `plan` after a warm-up and one untimed iteration.
double time_plan(const Options& o, const TrainingGraph& tg, const braid::Plan& plan, bool graph,
                 const std::string& key) {
    const std::uint32_t iterations = o.iterations;
    const auto t0 = Clock::now();
    CudaRunOptions run = run_options(o);
    run.graph_mode = graph;
    CudaTrainer trainer(tg, plan, run);
    trainer.warm_up();
    (void)trainer.iterate();  // graph mode: capture and instantiate
    double sum = 0.0;
    for (std::uint32_t i = 0; i < iterations; ++i) sum += trainer.iterate();
    const double ms = sum / iterations;
    fmt::print("{}_ms: {:.3f}\n", key, ms);
    fmt::print("{}_loss: {:.6f}\n", key, trainer.loss());
    fmt::print("{}_setup_s: {:.1f}\n", key, seconds_since(t0) - (sum + ms) * 1e-3);
    if (run.programmatic_launch && graph) fmt::print("{}_programmatic_edges: {}\n", key, trainer.programmatic_edges());
    if (run.cudnn_batch_norm) {
        const CudaTrainer::BatchNormUse b = trainer.batch_norm_use();
        fmt::print("{}_bn_cudnn_passes: {}\n", key, b.cudnn_passes);
        fmt::print("{}_bn_own_passes: {}\n", key, b.own_passes);
        for (const std::string& r : b.declined) fmt::print("{}: batch norm on own kernels: {}\n", key, r);
    }
    std::fflush(stdout);
    return ms;
}

// Trains `plan` and serial side by side (graph mode, deterministic
// algorithms) and compares every weight bit.
bool check_bitwise(const Options& o, const TrainingGraph& tg, const braid::Plan& plan, const braid::Plan& serial,
                   const std::string& key) {
    const std::uint32_t iterations = o.check_iterations;
    CudaRunOptions check = run_options(o);
    check.graph_mode = true;
    check.deterministic = true;
    check.split_granule = split_granule(plan, tg.graph);
    // The serial twin launches plainly: with --pdl on, the plan's programmatic launches are held to plain ones.
    CudaRunOptions plain = check;
    plain.programmatic_launch = false;
    WeightComparison cmp;
    {
        CudaTrainer a(tg, plan, check);
        CudaTrainer b(tg, serial, plain);
        a.warm_up();
        b.warm_up();
        for (std::uint32_t i = 0; i < iterations; ++i) {
            (void)a.iterate();
            (void)b.iterate();
        }
        cmp = compare_weights(a.weights(), b.weights());
    }
    const std::string what = plan.options.chosen ? plan.options.chosen->describe() : plan.strategy;
    fmt::print("{}: {} vs serial (graph) after {} iterations: {}\n", key, what, iterations, cmp.describe());
    fmt::print("{}_bitwise_identical: {}\n", key, cmp.identical ? 1 : 0);
    std::fflush(stdout);
    return cmp.identical;
}

// For each setting this run changes (--conv-api graph, --batch-norm cudnn, --layout nhwc, --pdl on):
// `plan` replayed without and with it, the run's other settings alike, in
// alternation (compare_runs). Prints both medians and
// <prefix>_<tag>_speedup_<name>_graph: (the median without over the median with).
void print_setting_comparisons(const Options& o, const TrainingGraph& tg, const braid::Plan& plan,
                               const std::string& name, const std::string& prefix) {
    struct Setting {
        bool on;
        const char* tag;
        const char* without;  // median keys
        const char* with;
        void (*clear)(CudaRunOptions&);
    };
    const Setting settings[] = {
        {o.conv_api == "graph", "graphapi", "legacy_calls", "graph_api", [](CudaRunOptions& r) { r.conv_graph_api = false; }},
        {o.batch_norm == "cudnn", "cudnnbn", "own_bn", "cudnn_bn", [](CudaRunOptions& r) { r.cudnn_batch_norm = false; }},
        {o.layout == "nhwc", "nhwc", "nchw", "nhwc", [](CudaRunOptions& r) { r.channels_last = false; }},
        {o.pdl == "on", "pdl", "plain_launch", "programmatic_launch",
         [](CudaRunOptions& r) { r.programmatic_launch = false; }},
    };
    for (const Setting& s : settings) {
        if (!s.on) continue;
        CudaRunOptions base = run_options(o), with = run_options(o);
        base.graph_mode = with.graph_mode = true;
        s.clear(base);
        const RunComparison c = compare_runs(tg, plan, base, with);
        fmt::print("{}_{}_graph_{}_median_ms: {:.3f}\n", prefix, name, s.without, c.base_median_ms);
        fmt::print("{}_{}_graph_{}_median_ms: {:.3f}\n", prefix, name, s.with, c.variant_median_ms);
        fmt::print("{}_{}_speedup_{}_graph: {:.3f}\n", prefix, s.tag, name, c.speedup);
        std::fflush(stdout);
    }
}

// Tunes braid's best plans and the baselines on this GPU (graph mode) and
// prints the tuned plan's median against the best baseline's, both from the
// same interleaved rounds. Returns the tuned plan.
braid::Plan tune_net(const Options& o, const TrainingGraph& tg, const braid::DeviceSpec& device, const std::string& prefix) {
    TuningRequest request;
    request.top = o.tune_top;
    request.budget_s = o.tune_budget_s;
    request.max_streams = 16;
    request.mode = braid::LaunchMode::graph;
    request.calibration = braid::builtin_calibration(device);
    CudaRunOptions run = run_options(o);
    run.graph_mode = true;
    CudaTrainerTiming source(tg, run);
    const TuningOutcome t = tune_training_plan(tg, device, cuda_measured_on(tg.batch(), true), source, request,
                                               [&](const std::string& line) { fmt::print("{}: tune: {}\n", prefix, line); });
    const braid::TuneResult& r = *t.result;
    fmt::print("{}", format_tune_report(r));
    // Paired ratios to the model's choice, so that a baseline dropped after
    // a few rounds is compared on the rounds it ran in.
    double best_baseline_ratio = 0.0;
    for (std::size_t i = 0; i < t.candidates.size(); ++i) {
        const std::optional<braid::PlanChoice>& chosen = t.candidates[i].plan.options.chosen;
        if (!chosen || chosen->base.empty() || chosen->critical_path_priorities || r.timings[i].samples_ns.empty())
            continue;
        const double ratio = r.timings[i].ratio;
        if (best_baseline_ratio == 0.0 || ratio < best_baseline_ratio) best_baseline_ratio = ratio;
    }
    fmt::print("{}_braid_tuning_rounds: {}\n", prefix, r.rounds);
    fmt::print("{}_braid_tuning_s: {:.1f}\n", prefix, r.elapsed_s);
    fmt::print("{}_braid_tuning_prepare_s: {:.1f}\n", prefix, r.prepare_s);
    // The budget counts preparation too (every candidate's trainer, warmed up and
    // captured): one spent before the first round leaves no medians to print.
    if (r.rounds == 0) {
        fmt::print("{}: tune: no round was timed ({}); medians not printed\n", prefix, r.stopped_because);
        std::fflush(stdout);
        return t.plan;
    }
    fmt::print("{}_braid_model_choice_graph_median_ms: {:.3f}\n", prefix, r.timings[r.favourite].median_ns / 1e6);
    fmt::print("{}_braid_tuned_graph_median_ms: {:.3f}\n", prefix, r.chosen().median_ns / 1e6);
    fmt::print("{}_braid_tuned_switched_from_model: {}\n", prefix, r.switched() ? 1 : 0);
    if (best_baseline_ratio > 0.0)
        fmt::print("{}_braid_tuned_graph_speedup_vs_best_baseline: {:.3f}\n", prefix,
                   best_baseline_ratio / r.chosen().ratio);
    fmt::print("{}_braid_tuning_conclusive: {}\n", prefix, r.conclusive ? 1 : 0);
    // Candidates the GPU had no room for (baselines come last, so they go first): the
    // speedup above is then over the baselines that fit.
    fmt::print("{}_braid_tuning_declined_candidates: {}\n", prefix,
               std::count_if(r.timings.begin(), r.timings.end(), [](const auto& c) { return !c.declined.empty(); }));
    std::fflush(stdout);
    return t.plan;
}

// The training step of `net` at `batch` as the options size and vary it.
TrainingGraph training_graph(const Options& o, const std::string& net, std::uint32_t batch) {
    TrainConfig c;
    c.model.net = net;
    c.model.batch = batch;
    c.model.image = o.image.value_or(default_image(net));
    c.model.classes = o.classes;
    c.model.width_scale = o.width_scale;
    c.model.fuse_relu = o.fuse_relu;
    c.model.share_batch_norm_sums = o.share_batch_norm_sums;
    c.model.update_bucket_bytes = o.update_bucket_mib << 20;
    return build_training_graph(c);
}

bool bench_net(const Options& o, const std::string& net, std::uint32_t batch) {
    const TrainingGraph tg = training_graph(o, net, batch);
    braid::DeviceSpec device;
    try {
        device = braid::cuda::device_spec_from_cuda();
    } catch (const braid::Error& e) {
        device = braid::find_device("h200");
        fmt::print("{}: the live device gave no DeviceSpec ({}); planning for {}\n", net, e.what(), device.key);
    }
    const std::optional<braid::Calibration> calibration = braid::builtin_calibration(device);
    const std::string prefix = fmt::format("train_{}_b{}", key_name(o, net), batch);
    // cuDNN's engines for the convolutions, as braid-train plans with them.
    std::vector<braid::ConvEngineFamily> engines;
    if (calibration) engines = probe_conv_engines(tg, run_options(o));
    const PlanningModel model = planning_model(tg, device, calibration, braid::LaunchMode::graph, engines);
    const braid::OpCosts& costs = model.costs;
    fmt::print("{}: planned with {}\n", prefix, braid::describe_calibration(calibration, ""));
    if (!engines.empty())
        fmt::print("{}: convolution engines cuDNN chose: {}\n", prefix, describe_conv_engines(tg, engines));

    braid::PlanOptions nimble_options;
    nimble_options.strategy = "nimble";
    braid::PlanOptions braid_options;
    braid_options.strategy = "braid";
    braid_options.mode = braid::LaunchMode::graph;
    braid_options.sim = model.sim;
    const braid::Plan serial = braid::strategy::serial(tg.graph, device.key);
    const braid::Plan nimble = braid::make_plan(tg.graph, device, costs, nimble_options);
    const braid::Plan braid_plan = braid::make_plan(tg.graph, device, costs, braid_options);
    fmt::print("{}: {} ops; nimble {} streams, braid {} streams ({} waits, split granule {})\n", prefix,
               tg.graph.op_count(), nimble.stream_count(), braid_plan.stream_count(), braid_plan.waits.size(),
               split_granule(braid_plan, tg.graph));
    fmt::print("{}_braid_streams: {}\n", prefix, braid_plan.stream_count());
    std::fflush(stdout);

    const double serial_eager = time_plan(o, tg, serial, false, prefix + "_serial_eager");
    const double serial_graph = time_plan(o, tg, serial, true, prefix + "_serial_graph");
    const double nimble_graph = time_plan(o, tg, nimble, true, prefix + "_nimble_graph");
    const double braid_graph = time_plan(o, tg, braid_plan, true, prefix + "_braid_graph");
    fmt::print("{}_serial_graph_speedup_vs_serial_eager: {:.3f}\n", prefix, serial_eager / serial_graph);
    fmt::print("{}_nimble_graph_speedup_vs_serial_eager: {:.3f}\n", prefix, serial_eager / nimble_graph);
    fmt::print("{}_braid_graph_speedup_vs_serial_eager: {:.3f}\n", prefix, serial_eager / braid_graph);
    fmt::print("{}_braid_graph_speedup_vs_serial_graph: {:.3f}\n", prefix, serial_graph / braid_graph);
    fmt::print("{}_braid_graph_speedup_vs_nimble_graph: {:.3f}\n", prefix, nimble_graph / braid_graph);
    std::fflush(stdout);

    // --tune-budget 0: the rows that compare kernel settings tune nothing.
    const braid::Plan tuned = o.tune_budget_s > 0.0 ? tune_net(o, tg, device, prefix) : braid_plan;
    print_setting_comparisons(o, tg, serial, "serial", prefix);
    print_setting_comparisons(o, tg, braid_plan, "braid", prefix);

    // Bitwise: braid's plan and the tuned one against serial.
    bool identical = check_bitwise(o, tg, braid_plan, serial, prefix + "_braid_graph");
    if (tuned.steps != braid_plan.steps || tuned.waits != braid_plan.waits)
        identical = check_bitwise(o, tg, tuned, serial, prefix + "_braid_tuned_graph") && identical;
    return identical;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    CLI::App app{"bench-gpu-train: GPU training steps of bundled nets, serial, nimble, braid and tuned, timed and "
                 "checked bit for bit (tools/gpu-check runs it)",
                 "bench-gpu-train"};
    add_options(app, o);
    // --layout nhwc: every net must take NHWC activations, said before a GPU is looked for.
    const auto check = [&] {
        if (o.layout != "nhwc") return;
        for (const std::string& net : o.nets)
            if (const std::string why = channels_last_unfit(training_graph(o, net, 1).network); !why.empty())
                throw braid::Error("--layout nhwc: net " + net + ": " + why);
    };
    return gpu_program_main(app, argc, argv, "the GPU training benchmark", check, [&] {
        fmt::print("bench-gpu-train: {}\n", cuda_device_description());
        const auto t0 = Clock::now();
        bool ok = true;
        // A failing configuration (say, no deterministic algorithm within the
        // workspace limit) is reported and the others still run.
        for (const std::string& net : o.nets)
            for (std::uint32_t batch : o.batches) try {
                    ok = bench_net(o, net, batch) && ok;
                } catch (const std::exception& e) {
                    std::fprintf(stderr, "bench-gpu-train: %s at batch %u: error: %s\n", net.c_str(), batch, e.what());
                    fmt::print("train_{}_b{}_failed: 1\n", key_name(o, net), batch);
                    std::fflush(stdout);
                    ok = false;
                }
        if (o.conv_api == "graph") {
            const ConvChoiceSummary c = conv_choice_summary();
            fmt::print("train_conv_graph_api_engines: {}\n", c.engines);
            fmt::print("train_conv_legacy_algorithms: {}\n", c.legacy);
            fmt::print("train_conv_graph_api_fallbacks: {}\n", c.fallbacks);
            for (const std::string& r : c.reasons) fmt::print("conv fallback: {}\n", r);
        }
        fmt::print("train_bench_total_s: {:.1f}\n", seconds_since(t0));
        return ok ? 0 : 1;
    });
}
