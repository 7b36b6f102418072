// braid-train: trains a sample network (GoogLeNet, ResNet-18..152,
// Inception-v3) or a Caffe prototxt's on seeded synthetic data and reports
// loss, time and images per second. The host backend runs the reference CPU
// layers on braid's executor, the cuda backend the cuDNN/cuBLAS layers (eager
// or as a replayed CUDA graph), in the plan a strategy makes from roofline
// estimates for --device (or a plan.json); --check trains a second model
// serially and compares every weight bit for bit.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "braid/error.hpp"
#include "braid/exec/executor.hpp"
#include "braid/exec/host.hpp"
#include "braid/exec/timing.hpp"
#include "braid/model/device_json.hpp"
#include "braid/model/device_table.hpp"
#include "braid/model/estimate.hpp"
#include "braid/plan/plan_json.hpp"
#include "braid/plan/validate.hpp"
#include "braid/planner/calibration_table.hpp"
#include "braid/planner/make_plan.hpp"
#include "braid/planner/tune_cache.hpp"
#include "braid/profiler/profile_json.hpp"
#include "braid/profiler/report.hpp"
#include "braid/sim/hardware_queues.hpp"
#include "caffe/prototxt.hpp"
#include "nets/zoo.hpp"
#include "progress.hpp"
#include "train/host_model.hpp"
#include "train/net_settings.hpp"
#include "train/summary.hpp"
#include "train/training_graph.hpp"
#include "train/training_loop.hpp"
#include "train/tuning.hpp"
#include "vocabulary.hpp"
#if BRAID_SAMPLES_WITH_CUDA
#include "cuda/cuda_model.hpp"
#include "cuda/cuda_trainer.hpp"
#endif

namespace {

using namespace braid::samples;
using braid::cli::at_least;
using braid::cli::between;
using braid::cli::finite_number;
using braid::cli::positive;
using Clock = std::chrono::steady_clock;

static_assert(max_input_batch == braid::cli::max_batch && max_input_side == braid::cli::max_image,
              "a prototxt's input and --batch/--image share their limits");

struct Options {
    TrainConfig train;
    std::uint32_t iterations = 10;
    bool summary = false;
    bool check = false;
    bool no_aux = false;
    std::uint64_t update_bucket_mib = 0;
    bool net_given = false;
    std::string prototxt;
    PrototxtOptions prototxt_options;  // what the command line sets over the prototxt
    std::string backend = "host";
    std::string strategy = "serial";
    std::string mode;  // empty: graph where CUDA graphs exist (--backend cuda), else eager
    std::string device = "h200";
    std::string calibration;  // "": built-in for the device; "none"; or a file
    std::uint32_t max_streams = 8;
    bool deterministic = false;  // cuda: deterministic cuDNN algorithms without --check too
    bool no_tf32 = false;        // cuda: FP32 convolutions and GEMMs
    bool heuristic_algorithms = false;
    std::string conv_api = "legacy";  // cuda: legacy cuDNN calls, graph-API engines, or auto (measured here)
    std::string batch_norm = "own";   // cuda: own kernels, cuDNN's, or auto (measured here)
    std::string layout = "nchw";      // cuda: NCHW or NHWC activations, or auto (measured here)
    std::string pdl = "off";          // cuda: own kernels launched programmatically, or auto (measured here)
    std::uint32_t max_connections = 0;  // cuda: CUDA_DEVICE_MAX_CONNECTIONS for this process; 0: the environment's
    // cuda: the hardware work queues this process asks for its eager launches
    // (braid::sim::process_hardware_queues); none: the driver's default.
    std::optional<int> hardware_queues;
    bool strategy_given = false;
    bool tune = false;             // measure braid's best plans here and train with the fastest
    std::uint32_t tune_top = 6;
    double tune_budget_s = 60.0;
    std::string tune_cache = braid::default_tune_cache_dir().string();
    bool no_tune_cache = false;
    std::string plan_out;          // write the plan the run uses
    std::string profile_out;       // cuda: profile the training step (serial, eager) into this file first
    bool dry_run = false;          // make (or load) and check the plan, then exit
};

#if BRAID_SAMPLES_WITH_CUDA
// The CUDA settings every trainer of the run shares, launch mode included.
CudaRunOptions cuda_run_options(const Options& o) {
    CudaRunOptions run;
    run.deterministic = o.deterministic || o.check;
    run.tf32 = !o.no_tf32;
    run.heuristic_algorithms = o.heuristic_algorithms;
    run.conv_graph_api = o.conv_api == "graph";
    run.cudnn_batch_norm = o.batch_norm == "cudnn";
    run.channels_last = o.layout == "nhwc";
    run.programmatic_launch = o.pdl == "on";
    run.graph_mode = o.mode == "graph";
    return run;
}
#endif

// A usage error: message, exit status 2.
struct UsageError {
    std::string message;
};

void validate(Options& o) {
    if (!o.net_given && o.prototxt.empty())
        throw UsageError{"which network? Give --net (" + fmt::format("{}", fmt::join(network_names(), ", ")) +
                         ") or --prototxt FILE"};
    const std::vector<std::string>& strategies = braid::strategy_names();
    const bool named = std::find(strategies.begin(), strategies.end(), o.strategy) != strategies.end();
    if (!named) {
        if (std::filesystem::path(o.strategy).extension() != ".json")
            throw UsageError{"--strategy '" + o.strategy + "' is neither a strategy (" +
                             fmt::format("{}", fmt::join(strategies, ", ")) + ") nor a plan file (*.json)"};
        if (!std::filesystem::is_regular_file(o.strategy))
            throw UsageError{"--strategy: plan file '" + o.strategy + "' does not exist"};
    }
#if !BRAID_SAMPLES_WITH_CUDA
    if (o.backend == "cuda")
        throw UsageError{"--backend cuda: this build of braid-train has no CUDA part (configure with CUDA, or use "
                         "--backend host)"};
#endif
    if (o.tune) {
        if (o.strategy_given && o.strategy != "braid")
            throw UsageError{"--tune measures braid's candidate plans and cannot tune --strategy " + o.strategy +
                             " (leave --strategy out, or give braid)"};
        o.strategy = "braid";
    }
    if (!o.profile_out.empty() && o.backend != "cuda")
        throw UsageError{"--profile-out profiles the training step on the GPU: give --backend cuda"};
    if (o.backend != "cuda" && (o.conv_api != "legacy" || o.batch_norm != "own"))
        throw UsageError{std::string(o.conv_api != "legacy" ? "--conv-api" : "--batch-norm") +
                         " chooses cuDNN's kernels for --backend cuda; the host backend runs the reference layers"};
    if (o.backend != "cuda" && o.layout != "nchw")
        throw UsageError{"--layout " + o.layout +
                         " lays out the GPU's activations for --backend cuda; the host backend runs the reference "
                         "layers on NCHW"};
    if (o.backend != "cuda" && o.pdl != "off")
        throw UsageError{"--pdl " + o.pdl +
                         " launches the GPU's own kernels programmatically for --backend cuda; the host backend "
                         "launches no kernels"};
    if (o.dry_run && (o.tune || !o.profile_out.empty()))
        throw UsageError{std::string("--dry-run only makes and checks the plan; ") +
                         (o.tune ? "--tune measures plans" : "--profile-out runs the step on the GPU") +
                         ": leave one of them out"};
    if (o.mode.empty()) o.mode = o.backend == "cuda" ? braid::cli::default_mode : "eager";
    if (o.max_connections != 0 && o.backend != "cuda")
        throw UsageError{"--max-connections sets the hardware work queues of a CUDA context (--backend cuda); the host "
                         "backend has none"};
    if (o.backend == "cuda") {
        // Before anything starts CUDA: the driver reads the variable when it makes the context.
        if (o.max_connections != 0 &&
            setenv(braid::sim::max_connections_variable, std::to_string(o.max_connections).c_str(), 1) != 0)
            throw braid::Error(std::string("--max-connections: cannot set ") + braid::sim::max_connections_variable);
        o.hardware_queues = braid::sim::process_hardware_queues();
    }
    for (const auto& [option, path] : {std::pair{"--plan-out", &o.plan_out}, std::pair{"--profile-out", &o.profile_out}})
        if (!path->empty())
            if (const std::string why = braid::cli::output_path_problem(option, *path); !why.empty())
                throw UsageError{why};
    if (o.mode == "graph" && o.backend != "cuda")
        throw UsageError{"--mode graph replays a captured CUDA graph and needs --backend cuda; the host backend runs "
                         "eagerly"};
}

// Redraws "op i/n" on stderr while an iteration runs, when stderr is a
// terminal. Bodies finish on the executor's worker threads: it counts them
// as a profiling hook and draws from whichever thread finishes one.
class Progress : public braid::ProfilingHook {
public:
    Progress(bool enabled, std::size_t ops_per_iteration) : enabled_(enabled), total_(ops_per_iteration) {}
    void begin(std::uint32_t iteration, std::uint32_t iterations) {
        std::lock_guard lock(mutex_);
        iteration_ = iteration;
        iterations_ = iterations;
        done_ = 0;
        last_ = Clock::now();
    }
    void op_begin(const braid::OpContext&) override {}
    void op_end(const braid::OpContext& ctx) override {
        if (!enabled_ || ctx.part + 1 != ctx.parts) return;  // an op is done with its last part
        std::lock_guard lock(mutex_);
        ++done_;
        const auto now = Clock::now();
        if (now - last_ < std::chrono::milliseconds(200)) return;
        last_ = now;
        drawn_ = true;
        fmt::print(stderr, "\r  iteration {}/{}: op {}/{} ({:.0f}%)   ", iteration_, iterations_, done_, total_,
                   100.0 * static_cast<double>(done_) / static_cast<double>(total_));
        std::fflush(stderr);
    }
    void clear() {
        std::lock_guard lock(mutex_);
        if (!drawn_) return;
        fmt::print(stderr, "\r{:60}\r", "");
        std::fflush(stderr);
        drawn_ = false;
    }

private:
    bool enabled_;
    std::size_t total_;
    std::mutex mutex_;
    bool drawn_ = false;
    std::size_t done_ = 0;
    std::uint32_t iteration_ = 0, iterations_ = 0;
    Clock::time_point last_;
};

// The calibration plans are made with (--calibration), saying which on stdout.
std::optional<braid::Calibration> training_calibration(const Options& o, const braid::DeviceSpec& device) {
    std::vector<std::string> warnings;
    std::optional<braid::Calibration> c = braid::select_calibration(o.calibration, device, warnings);
    for (const std::string& w : warnings) fmt::print(stderr, "warning: {}\n", w);
    return c;
}

bool plan_from_file(const Options& o) { return std::filesystem::path(o.strategy).extension() == ".json"; }

// Whether the plan is made on the estimated costs: --tune, or a strategy
// that plans on the model (ooo, serial and nimble look at the graph only).
bool plans_on_costs(const Options& o) {
    return o.tune || o.strategy == "braid" || o.strategy == "glp4nn" || o.strategy == "opara" || o.strategy == "ios";
}

// The plan the executor runs: a strategy's, made from the estimates of the
// graph's kernels on `device` (calibrated when a calibration applies; its
// engine fits price the convolutions `engines` names, by OpId), or one
// loaded from a file.
braid::Plan make_training_plan(const Options& o, const TrainingGraph& tg, const braid::DeviceSpec& device,
                               const std::optional<braid::Calibration>& calibration,
                               std::span<const braid::ConvEngineFamily> engines = {}) {
    if (plan_from_file(o)) return braid::load_plan(o.strategy, tg.graph);
    braid::PlanOptions options;
    options.strategy = o.strategy;
    options.max_streams = o.max_streams;
    options.mode = o.mode == "graph" ? braid::LaunchMode::graph : braid::LaunchMode::eager;
    PlanningModel model = planning_model(tg, device, calibration, options.mode, engines, o.hardware_queues);
    options.sim = model.sim;
    return braid::make_plan(tg.graph, device, model.costs, options);
}

std::vector<braid::Executor<braid::HostBackend>::Body> host_bodies(const HostModel& model) {
    std::vector<braid::Executor<braid::HostBackend>::Body> bodies;
    for (const HostBody& body : model.bodies())
        bodies.push_back([body](braid::HostLane&, const braid::OpContext& ctx) { body(ctx); });
    return bodies;
}

// --tune: braid's best plans by the model and the baselines, measured
// interleaved where the run trains (a model of their own, so the training
// run still starts from the initial weights), or the cached winner.
braid::Plan tuned_training_plan(const Options& o, const TrainingGraph& tg, const braid::DeviceSpec& device,
                                const std::optional<braid::Calibration>& calibration, const std::string& label,
                                std::vector<braid::ConvEngineFamily> engines) {
    // What the cache must match besides the machine: the net as sized here,
    // and the settings that change its kernels or its plans.
    std::string settings = fmt::format("{}; at most {} streams; planned for {}", label, o.max_streams, device.key);
    if (o.backend == "cuda")
        settings += fmt::format("; {}, {} algorithms by {}{}{}", o.no_tf32 ? "FP32" : "TF32",
                                o.deterministic || o.check ? "deterministic" : "fastest",
                                o.heuristic_algorithms ? "heuristics" : "cudnnFind",
                                o.conv_api == "graph" ? ", convolutions on graph-API engines" : "",
                                o.batch_norm == "cudnn" ? ", cuDNN batch norm" : "");
    if (o.backend == "cuda" && o.layout == "nhwc") settings += ", NHWC activations";
    if (o.backend == "cuda" && o.pdl == "on") settings += ", programmatic launches";
    if (o.mode == "eager" && o.hardware_queues)
        settings += fmt::format(", {}={}", braid::sim::max_connections_variable, *o.hardware_queues);
    TuningRequest request;
    request.top = o.tune_top;
    request.budget_s = o.tune_budget_s;
    request.max_streams = o.max_streams;
    request.mode = o.mode == "graph" ? braid::LaunchMode::graph : braid::LaunchMode::eager;
    request.calibration = calibration;
    request.engines = std::move(engines);
    request.eager_hardware_queues = o.hardware_queues;
    if (!o.no_tune_cache) request.cache_dir = o.tune_cache;
    const auto log = [](const std::string& line) {
        fmt::print("tune: {}\n", line);
        std::fflush(stdout);
    };
    std::optional<TuningOutcome> outcome;
#if BRAID_SAMPLES_WITH_CUDA
    if (o.backend == "cuda") {
        const CudaRunOptions run = cuda_run_options(o);
        CudaTrainerTiming source(tg, run);
        braid::MeasuredOn on = cuda_measured_on(tg.batch(), run.graph_mode);
        on.settings = settings;
        outcome = tune_training_plan(tg, device, on, source, request, log);
    }
#endif
    if (!outcome) {
        const HostModel model(tg);
        braid::HostBackend backend;
        braid::ExecutorTiming<braid::HostBackend> source(tg.graph, backend, host_bodies(model));
        braid::MeasuredOn on;
        on.device = fmt::format("host ({} threads)", std::thread::hardware_concurrency());
        on.backend = "host";
        on.mode = braid::LaunchMode::eager;
        on.batch = tg.batch();
        on.settings = settings;
        outcome = tune_training_plan(tg, device, on, source, request, log);
    }
    if (outcome->result) fmt::print("{}", format_tune_report(*outcome->result));
    return std::move(outcome->plan);
}

// For an eager run on the GPU: the queues its streams share, and where the
// number comes from.
std::string describe_hardware_queues(const Options& o, const braid::Plan& plan) {
    const int queues = o.hardware_queues.value_or(braid::sim::Params{}.eager_hardware_queues);
    const std::string from = o.hardware_queues
                                 ? fmt::format("{}={}", braid::sim::max_connections_variable, queues)
                                 : fmt::format("{} not set: the driver's default", braid::sim::max_connections_variable);
    std::string out = fmt::format("eager launches: {} hardware queue{} ({})", queues, queues == 1 ? "" : "s", from);
    if (plan.stream_count() > static_cast<std::size_t>(queues))
        out += fmt::format("; the plan's {} streams share them, stream s with s + {}, in launch order",
                           plan.stream_count(), queues);
    return out;
}

// --dry-run: the plan the run would use (a file's, loaded against the graph
// built here, or a strategy's), checked, described and, with --plan-out,
// written; nothing runs. Needs no GPU, whatever the backend.
int dry_run(const Options& o, const TrainingGraph& tg, const std::string& label) {
    fmt::print("{}, {} parameters; {} backend, {} strategy; dry run: nothing is trained\n", label,
               tg.network.parameter_count(), o.backend, o.strategy);
    const braid::DeviceSpec device = braid::load_device(o.device);
    const std::optional<braid::Calibration> calibration = training_calibration(o, device);
    const braid::Plan plan = make_training_plan(o, tg, device, calibration);
    braid::validate(plan, tg.graph);  // a file's plan was validated on load; a strategy's is checked the same way
    if (!o.plan_out.empty()) braid::save_plan(plan, tg.graph, o.plan_out, "--plan-out");
    std::size_t parts = 0;
    for (const braid::PlanStep& step : plan.steps) parts += step.parts > 1 ? 1 : 0;
    fmt::print("plan '{}' ({}) fits graph {} ({} ops): every dependency ordered; {} streams, {} steps ({} batch "
               "parts), {} waits\n",
               plan.strategy, plan.device.empty() ? std::string("no device") : "for " + plan.device,
               tg.graph.fingerprint(), tg.graph.op_count(), plan.stream_count(), plan.steps.size(), parts,
               plan.waits.size());
    if (o.backend == "cuda" && o.mode == "eager") fmt::print("{}\n", describe_hardware_queues(o, plan));
    return 0;
}

#if BRAID_SAMPLES_WITH_CUDA
// --profile-out: the training step profiled as braid-profile --net does it
// (profile_cuda_training: serial plan, eager, CUPTI or CUDA events), with
// this run's algorithms and math, written to the file before training.
void profile_training_step(const Options& o, const TrainingGraph& tg, const std::string& label) {
    CudaRunOptions run = cuda_run_options(o);
    run.programmatic_launch = false;  // each op's kernels timed alone, as every profile's are
    TrainingProfileRequest request;
    request.progress = braid::cli::ProgressBar();
    request.run.tool = "braid-train --profile-out";
    if (o.prototxt.empty()) {
        NetConfig config = o.train.model;
        config.aux_classifiers = !o.no_aux;
        request.run.network = describe_network(config);
        request.run.settings = net_settings(config);
    } else {
        request.run.network = label;
        request.run.settings = {{"prototxt", o.prototxt}};
    }
    fmt::print("profiling the training step (serial plan, eager, {} warm-up + {} measured iterations)\n",
               request.warmup, request.iterations);
    std::fflush(stdout);
    const TrainingProfile result = profile_cuda_training(tg, request, run);
    for (const std::string& w : result.warnings) fmt::print(stderr, "warning: {}\n", w);
    if (!result.cupti_library.empty()) fmt::print("traced with CUPTI ({})\n", result.cupti_library);
    braid::save_profile(result.profile, o.profile_out);
    fmt::print("wrote {} ({}{}); plan from it: braid-plan --profile {}\n", o.profile_out,
               braid::to_string(result.profile.timing), result.profile.durations_only ? ", durations only" : "",
               o.profile_out);
    fmt::print("{}", braid::profiler::format_layer_table(result.profile, tg.graph, result.profile.device));
    std::fflush(stdout);
}
#endif

// The training step of a bundled net or of a prototxt (whose notes go to
// stderr), and the line that names it.
TrainingGraph make_training_graph(const Options& o, std::string& label) {
    TrainConfig config = o.train;
    if (!o.prototxt.empty()) {
        PrototxtNet net = read_prototxt_if_built(o.prototxt, o.prototxt_options);
        for (const std::string& n : net.notes) fmt::print(stderr, "note: {}\n", n);
        const Shape4 in = net.network.input_shape();
        NetConfig variants;
        variants.update_bucket_bytes = o.update_bucket_mib << 20;
        label = fmt::format("{} ({}): batch {}, {}x{} images, {} classes{}", net.network.name(), o.prototxt, in.n,
                            in.h, in.w, net.network.classes(), net_variants(variants));
        return build_training_graph(std::move(net.network), config.optimizer, config.seed, config.data_batches,
                                    o.update_bucket_mib << 20);
    }
    config.model.aux_classifiers = !o.no_aux;
    config.model.update_bucket_bytes = o.update_bucket_mib << 20;
    const NetConfig& m = config.model;
    label = fmt::format("{}: batch {}, {}x{} images, {} classes, width scale {}{}", m.net, m.batch, m.image, m.image,
                        m.classes, m.width_scale, net_variants(m));
    return build_training_graph(config);
}

#if BRAID_SAMPLES_WITH_CUDA
// --conv-api auto, --batch-norm auto, --layout auto, --pdl auto: the serial plan run on this GPU
// in the run's launch mode with `base` and with `variant` (one setting changed), in alternation;
// true when the variant's paired median is faster by more than tuning's
// equivalence margin.
bool measure_variant(const TrainingGraph& tg, const std::string& device, const CudaRunOptions& base,
                     const CudaRunOptions& variant, const char* what, const char* base_name,
                     const char* variant_name) {
    fmt::print("{}: timing the serial plan, {}, with {} and {}, in alternation\n", what,
               base.graph_mode ? "replayed as a CUDA graph" : "launched eagerly", base_name, variant_name);
    std::fflush(stdout);
    const RunComparison c = compare_runs(tg, braid::strategy::serial(tg.graph, device), base, variant);
    const bool faster = c.speedup > 1.0 + braid::TuneOptions{}.equivalence;
    fmt::print("{}: {} {:.2f} ms, {} {:.2f} ms (medians of {} rounds; paired ratio {:.3f}): {}\n", what, base_name,
               c.base_median_ms, variant_name, c.variant_median_ms, c.rounds, c.speedup,
               faster ? variant_name : base_name);
    std::fflush(stdout);
    return faster;
}

// Settles --conv-api auto, then --batch-norm auto, then --layout auto, then
// --pdl auto by measure_variant;
// while one is measured, a later one still auto counts as its first value.
void settle_auto_settings(Options& o, const TrainingGraph& tg, const std::string& device) {
    if (o.pdl == "auto")
        if (const std::string why = programmatic_launch_unavailable_reason(); !why.empty()) {
            fmt::print("launches: plain ({})\n", why);
            o.pdl = "off";
        }
    struct AutoSetting {
        std::string Options::*option;
        bool CudaRunOptions::*flag;      // what the second value sets
        std::array<const char*, 2> values;  // off, on
        const char* what;
        std::array<const char*, 2> names;   // of the two values, for the messages
    };
    static const std::array<AutoSetting, 4> settings{{
        {&Options::conv_api, &CudaRunOptions::conv_graph_api, {"legacy", "graph"}, "conv API",
         {"legacy calls", "graph-API engines"}},
        {&Options::batch_norm, &CudaRunOptions::cudnn_batch_norm, {"own", "cudnn"}, "batch norm",
         {"own kernels", "cuDNN's kernels"}},
        {&Options::layout, &CudaRunOptions::channels_last, {"nchw", "nhwc"}, "layout",
         {"NCHW activations", "NHWC activations"}},
        {&Options::pdl, &CudaRunOptions::programmatic_launch, {"off", "on"}, "launches",
         {"plain launches", "programmatic launches"}},
    }};
    for (std::size_t i = 0; i < settings.size(); ++i) {
        const AutoSetting& s = settings[i];
        if (o.*s.option != "auto") continue;
        Options base = o;
        for (std::size_t j = i; j < settings.size(); ++j)
            if (base.*settings[j].option == "auto") base.*settings[j].option = settings[j].values[0];
        CudaRunOptions variant = cuda_run_options(base);
        variant.*s.flag = true;
        const bool on = measure_variant(tg, device, cuda_run_options(base), variant, s.what, s.names[0], s.names[1]);
        o.*s.option = s.values[on ? 1 : 0];
    }
}
#endif

int train(Options o) {
    std::string label;
    const TrainingGraph tg = make_training_graph(o, label);
#if BRAID_SAMPLES_WITH_CUDA
    if (o.layout != "nchw")
        if (const std::string why = channels_last_unfit(tg.network); !why.empty()) {
            if (o.layout == "nhwc") throw UsageError{"--layout nhwc: " + why + "; give --layout nchw"};
            fmt::print("layout: NCHW activations ({})\n", why);  // auto
            o.layout = "nchw";
        }
#endif

    if (o.summary) {
        const braid::DeviceSpec device = braid::load_device(o.device);
        fmt::print("{}", format_layer_table(tg.network));
        fmt::print("{}", format_graph_summary(tg, &device));
        return 0;
    }
    if (o.dry_run) return dry_run(o, tg, label);

    // The files the run reads, read before a GPU is looked for: a bad one is
    // an error on any machine, not a skip where there is no GPU.
    const braid::DeviceSpec device = braid::load_device(o.device);
    const std::optional<braid::Calibration> calibration = training_calibration(o, device);
    if (plan_from_file(o)) (void)braid::load_plan(o.strategy, tg.graph);
#if BRAID_SAMPLES_WITH_CUDA
    if (o.backend == "cuda") {
        const std::string reason = cuda_unavailable_reason();
        if (!reason.empty()) {
            fmt::print(stderr, "braid-train: {}\n", reason);
            return 77;
        }
    }
#endif

    fmt::print("{}, {} parameters; {} backend, {} strategy, seed {}\n", label, tg.network.parameter_count(), o.backend,
               o.strategy, o.train.seed);
    std::fflush(stdout);

#if BRAID_SAMPLES_WITH_CUDA
    if (o.backend == "cuda") settle_auto_settings(o, tg, device.key);
#endif
    if (plans_on_costs(o)) fmt::print("planned with {}\n", braid::describe_calibration(calibration, o.calibration));
    // cuDNN's engine for each convolution, chosen before planning, so that
    // the calibration's engine fits price it.
    std::vector<braid::ConvEngineFamily> engines;
#if BRAID_SAMPLES_WITH_CUDA
    if (o.backend == "cuda" && calibration && plans_on_costs(o) && !plan_from_file(o)) {
        engines = probe_conv_engines(tg, cuda_run_options(o));
        fmt::print("convolution engines cuDNN chose: {}\n", describe_conv_engines(tg, engines));
        std::fflush(stdout);
    }
#endif
    const braid::Plan plan = o.tune ? tuned_training_plan(o, tg, device, calibration, label, engines)
                                    : make_training_plan(o, tg, device, calibration, engines);
    if (!o.plan_out.empty()) braid::save_plan(plan, tg.graph, o.plan_out, "--plan-out");
    std::size_t split_steps = 0;
    for (const braid::PlanStep& s : plan.steps) split_steps += s.parts > 1 ? 1 : 0;
    fmt::print("plan: {} ({}), {} streams, {} steps ({} batch parts), {} waits\n", plan.strategy,
               plan.device.empty() ? std::string("no device") : "for " + plan.device, plan.stream_count(),
               plan.steps.size(), split_steps, plan.waits.size());
    if (o.backend == "cuda" && o.mode == "eager") fmt::print("{}\n", describe_hardware_queues(o, plan));
    std::fflush(stdout);

#if BRAID_SAMPLES_WITH_CUDA
    if (!o.profile_out.empty()) profile_training_step(o, tg, label);
#endif

#if BRAID_SAMPLES_WITH_CUDA
    if (o.backend == "cuda") {
        CudaTrainRequest request;
        request.iterations = o.iterations;
        request.check = o.check;
        request.run = cuda_run_options(o);  // --check makes it deterministic either way
        return run_cuda_training(tg, plan, request);
    }
#endif

    HostModel model(tg);
    braid::HostBackend backend;
    braid::Executor<braid::HostBackend> executor(tg.graph, plan, backend, host_bodies(model));
    Progress progress(isatty(fileno(stderr)) != 0, tg.graph.op_count());
    executor.set_profiling_hook(&progress);
    TrainingLoop loop;
    loop.iterations = o.iterations;
    loop.batch = tg.batch();
    std::uint32_t it = 0;
    loop.iterate_ms = [&] {
        progress.begin(++it, o.iterations);
        const auto start = Clock::now();
        executor.run();
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
        progress.clear();
        return ms;
    };
    loop.loss = [&] { return model.loss(); };
    if (o.check)
        loop.check = [&] {
            HostModel reference(tg);
            for (std::uint32_t i = 0; i < o.iterations; ++i) reference.run_serial_iteration();
            return compare_weights(model, reference);
        };
    return run_training_loop(loop);
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    NetConfig& m = o.train.model;
    CLI::App app{"Trains GoogLeNet, ResNet or Inception-v3 on seeded synthetic data with braid, reporting loss and speed.",
                 "braid-train"};
    CLI::Option* net = app.add_option("--net", m.net, "network (or --prototxt)")->check(CLI::IsMember(network_names()));
    CLI::Option* batch = app.add_option("--batch", m.batch, "images per iteration")
                               ->check(between(1, braid::cli::max_batch))
                               ->capture_default_str();
    CLI::Option* image = app.add_option("--image", m.image,
                                        "image height and width in pixels [default: the net's own, 299 for "
                                        "inception_v3, 224 for the others]")
                             ->check(between(1, braid::cli::max_image));
    CLI::Option* classes =
        app.add_option("--classes", m.classes, "number of classes")
            ->check(between(2, braid::cli::max_classes))
            ->capture_default_str();
    app.add_option("--iters", o.iterations, "training iterations")->check(at_least(1))->capture_default_str();
    app.add_option("--seed", o.train.seed, "seed of parameters, data and dropout")
        ->check(braid::cli::unsigned_64())
        ->capture_default_str();
    app.add_option("--data-batches", o.train.data_batches,
                   "cycle through this many fixed synthetic batches (0: a fresh batch every iteration)")
        ->check(braid::cli::range(std::uint64_t{0}, std::uint64_t{1} << 32))
        ->capture_default_str();
    CLI::Option* width = app.add_option("--width-scale", m.width_scale, "multiplies every hidden channel count")
        ->check(between(braid::cli::min_width_scale, braid::cli::max_width_scale))
        ->capture_default_str();
    CLI::Option* no_aux =
        app.add_flag("--no-aux", o.no_aux, "GoogLeNet without its two auxiliary classifiers, Inception-v3 without AuxLogits");
    CLI::Option* fuse = app.add_flag("--fuse-relu", m.fuse_relu, fuse_relu_help);
    CLI::Option* share = app.add_flag("--share-bn-sums", m.share_batch_norm_sums, share_batch_norm_sums_help);
    app.add_option("--update-bucket-mib", o.update_bucket_mib, update_bucket_help)
        ->check(braid::cli::range(std::uint64_t{0}, std::uint64_t{1} << 30))
        ->capture_default_str();
    app.add_option("--prototxt", o.prototxt,
                   "train a Caffe net definition instead of --net (docs/caffe.md); --batch, --image and --classes, "
                   "when given, override the file's")
        ->excludes(net, width, no_aux, fuse, share);
    // Upper bounds far above any schedule (large-batch SGD peaks near 10):
    // past them the first update already overflows the weights.
    app.add_option("--lr", o.train.optimizer.learning_rate, "SGD learning rate")
        ->check(between(0, 100))
        ->capture_default_str();
    app.add_option("--momentum", o.train.optimizer.momentum, "SGD momentum")
        ->check(finite_number([](double v) { return v >= 0.0 && v < 1.0; }, "a number of at least 0 and below 1",
                              "[0 - 1)"))
        ->capture_default_str();
    app.add_option("--weight-decay", o.train.optimizer.weight_decay, "L2 weight decay of weights")
        ->check(between(0, 1))
        ->capture_default_str();
    app.add_flag("--summary", o.summary, "print the layers and the training graph, then exit");
    app.add_option("--device", o.device,
                   std::string(braid::cli::device_help) + "; the plan and --summary's estimate are made for it")
        ->capture_default_str();
    app.add_option("--calibration", o.calibration, std::string(braid::cli::calibration_help));
    app.add_option("--backend", o.backend, "where the layers run")
        ->check(CLI::IsMember({"host", "cuda"}))
        ->capture_default_str();
    app.add_option("--strategy", o.strategy, fmt::format("{} or a plan.json", fmt::join(braid::strategy_names(), ", ")))
        ->capture_default_str();
    CLI::Option* max_streams =
        app.add_option("--max-streams", o.max_streams, "most streams (host worker threads) a glp4nn, ios or braid plan may use")
            ->check(between(1, braid::cli::max_streams))
            ->capture_default_str();
    braid::cli::add_deprecated(app, "--streams", o.max_streams, "--max-streams", max_streams,
                               between(1, braid::cli::max_streams));
    app.add_option("--mode", o.mode,
                   "graph (one replayed CUDA graph; the default with --backend cuda) or eager (launch by launch; the "
                   "host backend's only mode, so its default)")
        ->check(CLI::IsMember({"eager", "graph"}));
    CLI::Option* tune = app.add_flag("--tune", o.tune,
                 "measure braid's best plans and the baselines here, interleaved, and train with the fastest "
                 "(docs/tuning.md); the winner is cached");
    app.add_option("--tune-top", o.tune_top, "--tune: how many of braid's plans to measure")
        ->check(at_least(1))
        ->capture_default_str()
        ->needs(tune);
    app.add_option("--tune-budget", o.tune_budget_s, "--tune: seconds the measurements may take")
        ->check(positive())
        ->capture_default_str()
        ->needs(tune);
    CLI::Option* cache = app.add_option("--tune-cache", o.tune_cache, "--tune: folder of tuned plans")
                             ->capture_default_str()
                             ->needs(tune);
    app.add_flag("--no-tune-cache", o.no_tune_cache, "--tune: neither read nor write the cache")->needs(tune)->excludes(cache);
    app.add_option("--plan-out", o.plan_out, "write the plan the run uses (plan.json; with --tune, what was measured)");
    app.add_option("--profile-out", o.profile_out,
                   "cuda: first profile the training step (serial plan, eager, CUPTI) into this file, as braid-profile "
                   "--net does; then train");
    app.add_flag("--dry-run", o.dry_run,
                 "make (or load) the plan and check it against the graph built here, print it, then exit without "
                 "training (no GPU needed)");
    app.add_flag("--check", o.check, "train a second model serially and compare every weight bitwise");
    app.add_flag("--deterministic", o.deterministic,
                 "cuda: deterministic cuDNN algorithms only (always with --check)");
    app.add_flag("--no-tf32", o.no_tf32, "cuda: FP32 products in convolutions and GEMMs instead of TF32");
    app.add_flag("--heuristic-algorithms", o.heuristic_algorithms,
                 "cuda: cuDNN's heuristics choose convolution algorithms instead of timing them (cudnnFind)");
    app.add_option("--conv-api", o.conv_api,
                   "cuda: convolutions through cuDNN's legacy calls, its graph API's engines, or auto: the faster of "
                   "the two on this GPU, measured first (docs/samples.md)")
        ->check(CLI::IsMember({"legacy", "graph", "auto"}))
        ->capture_default_str();
    app.add_option("--batch-norm", o.batch_norm,
                   "cuda: batch norm on the own kernels, on cuDNN's, or auto: the faster of the two on this GPU, "
                   "measured first (docs/samples.md)")
        ->check(CLI::IsMember({"own", "cudnn", "auto"}))
        ->capture_default_str();
    app.add_option("--layout", o.layout,
                   "cuda: activations NCHW, or NHWC with KRSC filters (networks without concat branches ending in a "
                   "convolution: every bundled net), or auto: the faster of the two on this GPU, measured first "
                   "(docs/samples.md)")
        ->check(CLI::IsMember({"nchw", "nhwc", "auto"}))
        ->capture_default_str();
    app.add_option("--pdl", o.pdl,
                   "cuda: launch the own kernels programmatically (programmatic dependent launch, compute capability "
                   "9.0 or newer: a kernel starts while the one before it on its stream finishes; same results), or "
                   "auto: on when faster on this GPU, measured first (docs/samples.md)")
        ->check(CLI::IsMember({"off", "on", "auto"}))
        ->capture_default_str();
    app.add_option("--max-connections", o.max_connections,
                   "cuda: hardware work queues the process asks the driver for (sets CUDA_DEVICE_MAX_CONNECTIONS, "
                   "1 to 32; by default the environment's, else the driver's 8); eager launches of streams beyond "
                   "them share queues, and plans are simulated so")
        ->check(between(1, braid::sim::max_hardware_queues));
    braid::cli::refuse_empty_values(app);
    CLI11_PARSE(app, argc, argv);
    o.net_given = net->count() > 0;
    if (o.net_given && image->count() == 0) m.image = default_image(m.net);
    o.strategy_given = app.get_option("--strategy")->count() > 0;
    if (batch->count() > 0) o.prototxt_options.batch = m.batch;
    if (image->count() > 0) o.prototxt_options.image = m.image;
    if (classes->count() > 0) o.prototxt_options.classes = m.classes;

    try {
        validate(o);
        return train(o);
    } catch (const UsageError& e) {
        fmt::print(stderr, "braid-train: error: {}\n", e.message);
        return 2;
    } catch (const ShapeError& e) {
        fmt::print(stderr, "braid-train: error: {}\n", e.what());
        return 2;
    } catch (const braid::Error& e) {
        fmt::print(stderr, "braid-train: error: {}\n", e.what());
        return 1;
    } catch (const std::exception& e) {
        fmt::print(stderr, "braid-train: error: {}\n", e.what());
        return 1;
    }
}
