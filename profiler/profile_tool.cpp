#include "profile_tool.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <fmt/ranges.h>

// device.hpp before cuda.hpp: device.hpp's unqualified detail::lowercase_alnum
// does not compile once braid::cuda::detail exists (resources.hpp).
#include "braid/config.hpp"
#include "braid/cuda/backend.hpp"
#include "braid/cuda/device.hpp"
#include "braid/cuda/error.hpp"
#include "braid/exec/executor.hpp"
#include "braid/plan/plan_json.hpp"
#include "braid/planner/make_plan.hpp"
#include "braid/planner/predict.hpp"
#include "braid/planner/strategies/serial.hpp"
#include "braid/planner/calibration_table.hpp"
#include "braid/profiler/cuda/profile_executor.hpp"
#include "braid/profiler/planning.hpp"
#include "braid/profiler/profile_json.hpp"
#include "braid/profiler/report.hpp"
#include "cuda/cuda_model.hpp"
#include "cuda/cuda_trainer.hpp"
#include "demo/demo_network.hpp"
#include "progress.hpp"
#include "train/net_settings.hpp"
#include "train/summary.hpp"
#include "train/training_graph.hpp"

namespace braid::tool {

namespace {

std::string tool_name() {
    return fmt::format("braid-profile {}.{}.{}", BRAID_VERSION_MAJOR, BRAID_VERSION_MINOR, BRAID_VERSION_PATCH);
}

double us(double ns) { return ns / 1000.0; }

void print_tracing(const std::vector<std::string>& warnings, const std::string& cupti_library) {
    for (const std::string& w : warnings) fmt::print(stderr, "warning: {}\n", w);
    if (!cupti_library.empty()) fmt::print("traced with CUPTI ({})\n", cupti_library);
}

// The built-in demo network on the CUDA backend, serial plan.
int profile_demo(const ProfileToolOptions& opt, const DeviceSpec& dev) {
    demo::DemoNetwork net;
    const OpGraph& graph = net.graph();
    CudaBackend backend;
    std::vector<Executor<CudaBackend>::Body> bodies;
    for (const demo::DemoNetwork::Body& b : net.bodies())
        bodies.push_back([b](CudaLane& lane, const OpContext& ctx) { b(lane.stream, ctx); });
    const Plan serial = strategy::serial(graph, dev.key);
    Executor<CudaBackend> executor(graph, serial, backend, std::move(bodies));

    fmt::print("{}: network '{}' ({} ops) on {} ({} SMs, cc {}.{}), serial plan, {} warm-up + {} measured iterations\n",
               tool_name(), opt.network, graph.op_count(), dev.name, dev.sm_count, dev.cc_major, dev.cc_minor,
               opt.warmup, opt.iters);

    profiler::CudaProfileOptions po;
    po.warmup_iterations = opt.warmup;
    po.measured_iterations = opt.iters;
    po.use_cupti = !opt.no_cupti;
    po.progress = cli::ProgressBar();
    ProfileRun run;
    run.network = opt.network;
    run.settings = net.config().settings();
    run.plan = "serial";
    run.tool = tool_name();
    if (opt.no_cupti) fmt::print("CUPTI off (--no-cupti): timing each op with CUDA events, durations only\n");

    const profiler::CudaProfileResult result = profiler::profile_executor(executor, dev, run, po);
    print_tracing(result.warnings, result.cupti_library);

    if (const std::string wrong = net.check(); !wrong.empty()) throw Error("the demo computed a wrong result: " + wrong);

    save_profile(result.profile, opt.out_profile);
    report(result.profile, graph, dev, opt);
    return 0;
}

// A bundled net's training step on the samples' CUDA model, serial plan:
// profile_cuda_training, as braid-train --profile-out runs it.
int profile_bundled_net(const ProfileToolOptions& opt, const samples::TrainConfig& config,
                        const samples::TrainingGraph& tg, const DeviceSpec& dev) {
    const std::string network = samples::describe_network(config.model);
    fmt::print("{}: {} ({} ops) on {} ({} SMs, cc {}.{}), serial plan, eager, {} warm-up + {} measured iterations\n",
               tool_name(), network, tg.graph.op_count(), dev.name, dev.sm_count, dev.cc_major, dev.cc_minor,
               opt.warmup, opt.iters);
    if (opt.no_cupti) fmt::print("CUPTI off (--no-cupti): timing each op with CUDA events, durations only\n");
    std::fflush(stdout);

    samples::TrainingProfileRequest request;
    request.warmup = opt.warmup;
    request.iterations = opt.iters;
    request.use_cupti = !opt.no_cupti;
    request.progress = cli::ProgressBar();
    request.run.network = network;
    request.run.settings = samples::net_settings(config.model);
    request.run.tool = tool_name();
    const auto start = std::chrono::steady_clock::now();
    samples::CudaRunOptions run;
    run.conv_graph_api = opt.conv_graph_api;
    run.cudnn_batch_norm = opt.cudnn_batch_norm;
    run.channels_last = opt.channels_last;
    if (opt.channels_last) fmt::print("NHWC activations (--layout nhwc): KRSC filters, channels-last kernels\n");
    const samples::TrainingProfile result = samples::profile_cuda_training(tg, request, run);
    print_tracing(result.warnings, result.cupti_library);
    // gpu-check reads this line: profiling GoogLeNet or ResNet-50 at batch 32 must take under 30 s.
    fmt::print("profile_seconds: {:.1f}\n",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());

    save_profile(result.profile, opt.out_profile);
    report(result.profile, tg.graph, dev, opt);
    return 0;
}

}  // namespace

void report(const Profile& profile, const OpGraph& graph, const DeviceSpec& dev, const ProfileToolOptions& opt) {
    std::size_t kernel_count = 0, transfer_count = 0;
    for (const ProfiledOp& op : profile.ops) {
        kernel_count += op.kernels.size();
        transfer_count += op.transfers.size();
    }
    fmt::print("wrote {} ({} ops, {} kernels, {} memcpy/memset; {}{})\n", opt.out_profile, profile.ops.size(),
               kernel_count, transfer_count, to_string(profile.timing), profile.durations_only ? ", durations only" : "");
    // Work no op could be charged with, and records CUPTI lost: both missing from the ops'
    // times. gpu-check's table shows these lines, so a profile short of kernels is seen.
    std::uint64_t unattributed = 0;
    for (const UnattributedWork& u : profile.unattributed) unattributed += u.count;
    fmt::print("profile_unattributed_records: {}\n", unattributed);
    fmt::print("profile_dropped_records: {}\n", profile.dropped_records);

    fmt::print("{}", profiler::format_layer_table(profile, graph, dev));
    if (opt.kernels && !profile.durations_only) fmt::print("{}", profiler::format_kernel_table(profile, dev));

    std::vector<std::string> warnings;
    if (const std::string w = profile_device_warning(profile, dev); !w.empty()) warnings.push_back(w);
    const std::optional<Calibration> calibration = select_calibration(opt.calibration, dev, warnings);
    for (const std::string& w : warnings) fmt::print(stderr, "warning: {}\n", w);
    const LaunchMode mode = opt.mode == "eager" ? LaunchMode::eager : LaunchMode::graph;
    const ProfilePlanning planning = profile_planning(profile, graph, dev, calibration, mode);
    const OpCosts& costs = planning.costs;
    PlanOptions plan_options;
    plan_options.strategy = opt.strategy;
    plan_options.max_streams = opt.max_streams;
    plan_options.mode = mode;
    plan_options.sim = planning.sim;
    const Plan plan = make_plan(graph, dev, costs, plan_options);
    save_plan(plan, graph, opt.out_plan, "--plan-out");

    const Plan serial = strategy::serial(graph, dev.key);
    const Prediction serial_pred = predict(graph, serial, dev, costs, mode, plan_options.sim);
    const Prediction plan_pred = predict(graph, plan, dev, costs, mode, plan_options.sim);
    fmt::print("\n");
    if (profile.iteration)
        fmt::print("measured serial iteration (GPU, first start to last end): {:.1f} us median over {}\n",
                   us(profile.iteration->median_ns), profile.iteration->count);
    if (profile.launch_api)
        fmt::print("kernel launch call (host): {:.2f} us median over {} launches\n", us(profile.launch_api->median_ns),
                   profile.launch_api->count);
    fmt::print("simulated in {} mode ({}): serial {:.1f} us; '{}' plan {:.1f} us on {} stream(s) ({:.2f}x); lower "
               "bound {:.1f} us\n",
               opt.mode, describe_calibration(calibration, opt.calibration), us(serial_pred.predicted_ns),
               plan.strategy, us(plan_pred.predicted_ns), plan.stream_count(),
               plan_pred.predicted_ns > 0 ? serial_pred.predicted_ns / plan_pred.predicted_ns : 0.0,
               us(plan_pred.bound.bound_ns));
    fmt::print("wrote {} (strategy '{}', {} steps, {} waits)\n", opt.out_plan, plan.strategy, plan.steps.size(),
               plan.waits.size());
}

int run_profile_tool(const ProfileToolOptions& opt) {
    const std::vector<std::string> nets = samples::network_names();
    if (opt.network != "demo" && std::find(nets.begin(), nets.end(), opt.network) == nets.end())
        throw Error("unknown network '" + opt.network + "': braid-profile runs 'demo' or a bundled net (" +
                    fmt::format("{}", fmt::join(nets, ", ")) + ")");
    if (opt.iters == 0) throw Error("--iters must be at least 1");
    // A net that does not build at this size is an error here too, GPU or not.
    samples::TrainConfig config;
    config.model = opt.net;
    config.model.net = opt.network;
    std::optional<samples::TrainingGraph> tg;
    if (opt.network != "demo") tg.emplace(samples::build_training_graph(config));
    if (tg && opt.channels_last)
        if (const std::string why = samples::channels_last_unfit(tg->network); !why.empty())
            throw Error("--layout nhwc: " + why + "; give --layout nchw");
    if (const std::string reason = cuda::no_device_reason(); !reason.empty()) {
        std::printf("%s\n", reason.c_str());
        return 77;
    }
    cuda::check(cudaSetDevice(opt.device), "cudaSetDevice");
    const DeviceSpec dev = cuda::device_spec_from_cuda(opt.device);
    return tg ? profile_bundled_net(opt, config, *tg, dev) : profile_demo(opt, dev);
}

}  // namespace braid::tool
