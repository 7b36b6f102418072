#include "cuda/cuda_trainer.hpp"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "braid/cuda/backend.hpp"
#include "braid/cuda/device.hpp"
#include "braid/exec/executor.hpp"
#include "braid/planner/strategies/serial.hpp"
#include "braid/profiler/cuda/profile_executor.hpp"
#include "cuda/cuda_model.hpp"
#include "cuda/kernels.h"
#include "train/training_loop.hpp"

namespace braid::samples {

std::string cuda_unavailable_reason() { return braid::cuda::no_device_reason(); }

std::string programmatic_launch_unavailable_reason() {
    int device = 0;
    braid::cuda::check(cudaGetDevice(&device), "cudaGetDevice");
    const braid::DeviceSpec d = braid::cuda::device_spec_from_cuda(device);
    if (d.cc_major < 9)
        return fmt::format("programmatic launch needs compute capability 9.0 or newer; {} is {}.{}", d.name,
                           d.cc_major, d.cc_minor);
    int ptx = 0;
    braid::cuda::check(cuda::own_kernels_ptx_version(&ptx), "cudaFuncGetAttributes");
    if (ptx < 90)
        return fmt::format("programmatic launch needs the own kernels built for compute_90 or newer (meson option "
                           "gpu_targets); on {} they run as compute_{}, without their wait",
                           d.name, ptx);
    return "";
}

std::string cuda_device_description() {
    const braid::MeasuredOn on = cuda_measured_on(0, false);
    return fmt::format("{}, cuDNN {}, cuBLAS {}", on.device, on.cudnn, on.cublas);
}

struct CudaTrainer::Impl {
    Impl(const TrainingGraph& g, const braid::Plan& plan, const CudaRunOptions& o)
        : options(o), strategy(plan.strategy), model(g, model_options(o)), backend(backend_options(o)) {
        backend.reserve_scratch(model.scratch_bytes());
        executor.emplace(g.graph, plan, backend, model.bodies());
        start = braid::cuda::create_event(cudaEventDefault);
        stop = braid::cuda::create_event(cudaEventDefault);
    }

    static CudaModelOptions model_options(const CudaRunOptions& o) {
        CudaModelOptions m;
        m.layers.deterministic = o.deterministic;
        m.layers.tf32 = o.tf32;
        m.layers.search = o.heuristic_algorithms ? cuda::AlgorithmSearch::heuristic : cuda::AlgorithmSearch::find;
        m.layers.workspace_limit_bytes = o.conv_workspace_limit_bytes;
        m.layers.split_granule = o.split_granule;
        m.layers.conv_api = o.conv_graph_api ? cuda::ConvApi::graph : cuda::ConvApi::legacy;
        m.layers.batch_norm = o.cudnn_batch_norm ? cuda::BatchNormKernels::cudnn : cuda::BatchNormKernels::own;
        m.layers.layout = o.channels_last ? cuda::TensorLayout::nhwc : cuda::TensorLayout::nchw;
        return m;
    }
    static braid::CudaBackendOptions backend_options(const CudaRunOptions& o) {
        if (o.programmatic_launch)
            if (const std::string why = programmatic_launch_unavailable_reason(); !why.empty()) throw braid::Error(why);
        braid::CudaBackendOptions b;
        b.mode = o.graph_mode ? braid::LaunchMode::graph : braid::LaunchMode::eager;
        b.cudnn_workspace_bytes = o.cudnn_workspace_bytes;
        b.programmatic_launch = o.programmatic_launch;
        return b;
    }

    CudaRunOptions options;
    std::string strategy;  // of the plan the executor runs: what a profile says ran
    CudaModel model;
    braid::CudaBackend backend;
    std::optional<braid::Executor<braid::CudaBackend>> executor;
    braid::cuda::Event start, stop;
};

CudaTrainer::CudaTrainer(const TrainingGraph& graph, const braid::Plan& plan, const CudaRunOptions& options)
    : impl_(std::make_unique<Impl>(graph, plan, options)) {}

CudaTrainer::~CudaTrainer() = default;

void CudaTrainer::warm_up() {
    Impl& m = *impl_;
    const braid::LaunchMode mode = m.backend.mode();
    m.backend.set_mode(braid::LaunchMode::eager);
    try {
        m.executor->run();
    } catch (...) {
        m.backend.set_mode(mode);
        throw;
    }
    m.backend.synchronize();
    m.backend.set_mode(mode);
    m.model.initialize();
}

double CudaTrainer::iterate() {
    Impl& m = *impl_;
    braid::cuda::check(cudaEventRecord(m.start.get(), m.backend.stream()), "cudaEventRecord(start)");
    m.executor->run();
    braid::cuda::check(cudaEventRecord(m.stop.get(), m.backend.stream()), "cudaEventRecord(stop)");
    braid::cuda::check(cudaEventSynchronize(m.stop.get()), "cudaEventSynchronize");
    float ms = 0.0f;
    braid::cuda::check(cudaEventElapsedTime(&ms, m.start.get(), m.stop.get()), "cudaEventElapsedTime");
    return static_cast<double>(ms);
}

double CudaTrainer::loss() const { return impl_->model.loss(); }
std::uint64_t CudaTrainer::step() const { return impl_->model.step(); }
std::uint32_t CudaTrainer::lanes_used() const { return static_cast<std::uint32_t>(impl_->backend.lane_count()); }

std::string CudaTrainer::launch_summary() const {
    const braid::CudaBackend::Counters& c = impl_->backend.counters();
    if (impl_->backend.mode() == braid::LaunchMode::graph)
        return fmt::format("graph: {} captures ({} instantiations, {} updates), {} replays{}", c.captures,
                           c.instantiations, c.updates, c.replays,
                           impl_->options.programmatic_launch
                               ? fmt::format(", {} programmatic edges", c.programmatic_edges)
                               : std::string());
    return fmt::format("eager: {} iterations", c.eager_iterations);
}

std::uint64_t CudaTrainer::programmatic_edges() const { return impl_->backend.counters().programmatic_edges; }

WeightSnapshot CudaTrainer::weights() const { return snapshot_weights(impl_->model); }

CudaTrainer::BatchNormUse CudaTrainer::batch_norm_use() const {
    BatchNormUse use;
    const CudaModel& model = impl_->model;
    for (LayerId l = 0; l < model.graph().network.layers().size(); ++l) {
        const cuda::CudaBatchNorm* bn = model.batch_norm(l);
        if (bn == nullptr) continue;
        use.cudnn_passes += bn->cudnn_passes();
        use.own_passes += 2 - bn->cudnn_passes();
        if (!bn->note().empty()) use.declined.push_back(bn->note());
    }
    return use;
}

std::vector<braid::ConvEngineFamily> CudaTrainer::conv_engines() const { return impl_->model.conv_engines(); }

TrainingProfile CudaTrainer::profile(const TrainingProfileRequest& request) {
    Impl& m = *impl_;
    if (m.options.programmatic_launch)
        throw braid::Error("a profile times each op's kernels alone, and programmatic launch lets a kernel start "
                           "before the one it follows has finished: profile without it");
    braid::profiler::CudaProfileOptions po;
    po.warmup_iterations = request.warmup;
    po.measured_iterations = request.iterations;
    po.use_cupti = request.use_cupti;
    po.progress = request.progress;
    braid::ProfileRun run = request.run;
    run.plan = m.strategy;
    // Which cuDNN API ran the convolutions: their kernels (and so the
    // calibration a profile gives) differ. Legacy profiles keep their settings.
    if (m.options.conv_graph_api) run.settings["conv_api"] = std::string("graph");
    if (m.options.cudnn_batch_norm) run.settings["batch_norm"] = std::string("cudnn");
    if (m.options.channels_last) run.settings["layout"] = std::string("nhwc");
    braid::profiler::CudaProfileResult r = braid::profiler::profile_executor(
        *m.executor, braid::cuda::device_spec_from_cuda(m.backend.device()), std::move(run), po);
    TrainingProfile out;
    out.profile = std::move(r.profile);
    out.warnings = std::move(r.warnings);
    out.cupti_library = std::move(r.cupti_library);
    if (r.cupti_error) out.cupti_error = r.cupti_error->what();
    return out;
}

ConvChoiceSummary conv_choice_summary(std::size_t reasons) {
    ConvChoiceSummary out;
    for (const cuda::ConvAlgorithm& a : cuda::AlgorithmCache::process().choices()) {
        ++(a.plan ? out.engines : out.legacy);
        if (a.note.empty()) continue;
        ++out.fallbacks;
        if (out.reasons.size() < reasons) out.reasons.push_back(a.note);
    }
    return out;
}

CudaTrainerTiming::CudaTrainerTiming(const TrainingGraph& graph, const CudaRunOptions& options)
    : graph_(graph), options_(options) {}

CudaTrainerTiming::~CudaTrainerTiming() = default;

bool out_of_device_memory(const std::exception& e) {
    if (const auto* c = dynamic_cast<const braid::cuda::CudaError*>(&e); c && c->code() == cudaErrorMemoryAllocation)
        return true;
    if (const auto* l = dynamic_cast<const braid::cuda::LibraryError*>(&e)) {
        if (l->api().starts_with("cudnn") && l->status() == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED)
            return true;
        // A lane's handle is made inside its trainer's first iteration; cudnnCreate documents only
        // ALLOC_FAILED for resources it could not get, in cuDNN 9 the host-allocation number.
        if (l->api() == "cudnnCreate" && l->status() == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED)
            return true;
        if (l->api().starts_with("cublas") && l->status() == CUBLAS_STATUS_ALLOC_FAILED) return true;
    }
    try {
        std::rethrow_if_nested(e);
    } catch (const std::exception& inner) {
        return out_of_device_memory(inner);
    } catch (...) {
    }
    return false;
}

std::vector<std::string> CudaTrainerTiming::prepare(std::span<const braid::TuneCandidate> candidates) {
    trainers_.clear();
    std::vector<std::string> declined(candidates.size());
    for (std::size_t i = 0; i < candidates.size(); ++i) {
        try {
            auto trainer = std::make_unique<CudaTrainer>(graph_, candidates[i].plan, options_);
            trainer->warm_up();
            // In graph mode the capture and instantiation allocate too: do them here, where
            // running out of memory declines this candidate, not during the tuning rounds.
            if (options_.graph_mode) (void)trainer->iterate();
            trainers_.push_back(std::move(trainer));
        } catch (const std::exception& e) {
            if (!out_of_device_memory(e)) throw;
            // Out of memory is not sticky, and the failed trainer is gone with its memory. A device
            // that still reports an error after that failed for another reason too: not a decline.
            (void)cudaGetLastError();
            if (cudaDeviceSynchronize() != cudaSuccess) throw;
            const auto kept = std::count_if(trainers_.begin(), trainers_.end(), [](const auto& t) { return t != nullptr; });
            std::size_t free = 0, total = 0;
            const std::string room = cudaMemGetInfo(&free, &total) == cudaSuccess
                                         ? fmt::format(" ({} MiB of {} MiB free beside the {} trainers made before it)",
                                                       free >> 20, total >> 20, kept)
                                         : std::string();
            declined[i] = std::string("out of device memory: ") + e.what() + room;
            trainers_.push_back(nullptr);
        }
    }
    return declined;
}

double CudaTrainerTiming::measure_ns(std::size_t candidate) {
    CudaTrainer* t = trainers_.at(candidate).get();
    if (!t) throw braid::Error("CudaTrainerTiming: candidate " + std::to_string(candidate) + " was declined");
    return t->iterate() * 1e6;
}

double CudaTrainerTiming::now_ns() {
    return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

braid::MeasuredOn cuda_measured_on(std::uint32_t batch, bool graph_mode) {
    int device = 0;
    braid::cuda::check(cudaGetDevice(&device), "cudaGetDevice");
    cudaDeviceProp p{};
    braid::cuda::check(cudaGetDeviceProperties(&p, device), "cudaGetDeviceProperties");
    int driver = 0;
    braid::cuda::check(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
    const std::size_t cudnn = cudnnGetVersion();
    int major = 0, minor = 0, patch = 0;
    braid::cuda::check(cublasGetProperty(MAJOR_VERSION, &major), "cublasGetProperty");
    braid::cuda::check(cublasGetProperty(MINOR_VERSION, &minor), "cublasGetProperty");
    braid::cuda::check(cublasGetProperty(PATCH_LEVEL, &patch), "cublasGetProperty");
    braid::MeasuredOn on;
    on.device = fmt::format("{} (sm_{}{}, {} SMs)", p.name, p.major, p.minor, p.multiProcessorCount);
    on.driver = fmt::format("{}.{}", driver / 1000, driver % 1000 / 10);
    on.cudnn = fmt::format("{}.{}.{}", cudnn / 10000, cudnn / 100 % 100, cudnn % 100);
    on.cublas = fmt::format("{}.{}.{}", major, minor, patch);
    on.backend = "cuda";
    on.mode = graph_mode ? braid::LaunchMode::graph : braid::LaunchMode::eager;
    on.batch = batch;
    return on;
}

int run_cuda_training(const TrainingGraph& graph, const braid::Plan& plan, const CudaTrainRequest& request) {
    CudaRunOptions run = request.run;
    if (request.check) {
        run.deterministic = true;
        run.split_granule = split_granule(plan, graph.graph);
    }
    fmt::print("cuda backend: {}; {} mode; {} cuDNN {}, {}{}{}{}\n", cuda_device_description(),
               run.graph_mode ? "graph" : "eager", run.deterministic ? "deterministic" : "fastest",
               run.conv_graph_api ? fmt::format("graph-API engines ({})", run.heuristic_algorithms ? "heuristics" : "timed")
                                  : fmt::format("algorithms ({})", run.heuristic_algorithms ? "heuristics" : "cudnnFind"),
               run.tf32 ? "TF32" : "FP32 (no TF32)", run.cudnn_batch_norm ? ", cuDNN batch norm" : "",
               run.split_granule > 0 ? fmt::format(", library calls in chunks of {} images", run.split_granule)
                                     : std::string(),
               run.programmatic_launch ? ", own kernels launched programmatically" : "");
    std::fflush(stdout);

    CudaTrainer trainer(graph, plan, run);
    trainer.warm_up();
    if (run.conv_graph_api) {
        const ConvChoiceSummary c = conv_choice_summary();
        fmt::print("convolutions: {} problems (pass, shape, images per call) on graph-API engines, {} on legacy "
                   "calls where the graph API had none\n",
                   c.engines, c.fallbacks);
        for (const std::string& r : c.reasons) fmt::print("  {}\n", r);
        std::fflush(stdout);
    }
    if (run.cudnn_batch_norm) {
        const CudaTrainer::BatchNormUse b = trainer.batch_norm_use();
        fmt::print("batch norm: {} passes on cuDNN's kernels, {} on the own kernels where cuDNN declined\n",
                   b.cudnn_passes, b.own_passes);
        for (const std::string& r : b.declined) fmt::print("  {}\n", r);
        std::fflush(stdout);
    }
    TrainingLoop loop;
    loop.iterations = request.iterations;
    loop.batch = graph.batch();
    loop.ms_decimals = 2;
    loop.iterate_ms = [&] { return trainer.iterate(); };
    loop.loss = [&] { return trainer.loss(); };
    loop.mean_note = [&] { return fmt::format(" ({}, {} lanes)", trainer.launch_summary(), trainer.lanes_used()); };
    if (request.check)
        loop.check = [&] {
            // The reference launches plainly: the check holds programmatic launches to plain ones too.
            CudaRunOptions plain = run;
            plain.programmatic_launch = false;
            CudaTrainer reference(graph, braid::strategy::serial(graph.graph, plan.device), plain);
            reference.warm_up();
            for (std::uint32_t it = 0; it < request.iterations; ++it) (void)reference.iterate();
            return compare_weights(trainer.weights(), reference.weights());
        };
    return run_training_loop(loop);
}

RunComparison compare_runs(const TrainingGraph& graph, const braid::Plan& plan, CudaRunOptions base,
                           CudaRunOptions variant, std::uint32_t rounds) {
    if (rounds == 0) throw braid::Error("compare_runs: rounds must be at least 1");
    if (base.graph_mode != variant.graph_mode)
        throw braid::Error("compare_runs: both runs must launch alike (graph or eager); the variant changes one setting");
    CudaTrainer a(graph, plan, base), b(graph, plan, variant);
    a.warm_up();
    b.warm_up();
    (void)a.iterate();  // graph mode: capture and instantiate; eager: a first run past the warm-up
    (void)b.iterate();
    std::vector<double> a_ms, b_ms, ratio;
    for (std::uint32_t r = 0; r < rounds; ++r) {
        // A B, then B A: neither always runs right after the other.
        if (r % 2 == 0) {
            a_ms.push_back(a.iterate());
            b_ms.push_back(b.iterate());
        } else {
            b_ms.push_back(b.iterate());
            a_ms.push_back(a.iterate());
        }
        ratio.push_back(a_ms.back() / b_ms.back());
    }
    const auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v.size() % 2 == 1 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
    };
    return RunComparison{rounds, median(a_ms), median(b_ms), median(ratio), a.launch_summary(), b.launch_summary()};
}

std::vector<braid::ConvEngineFamily> probe_conv_engines(const TrainingGraph& graph, CudaRunOptions options) {
    options.graph_mode = false;  // the eager warm-up chooses by timing, where the options say find
    CudaTrainer trainer(graph, braid::strategy::serial(graph.graph), options);
    trainer.warm_up();
    return trainer.conv_engines();
}

TrainingProfile profile_cuda_training(const TrainingGraph& graph, const TrainingProfileRequest& request,
                                      CudaRunOptions options) {
    options.graph_mode = false;  // a replayed CUDA graph calls no body: nothing to attribute
    CudaTrainer trainer(graph, braid::strategy::serial(graph.graph), options);
    trainer.warm_up();  // loads kernels, chooses cuDNN algorithms, sizes workspaces: not measured
    return trainer.profile(request);
}

}  // namespace braid::samples
