// Training a sample network on the CUDA backend: a CudaModel, a CudaBackend
// (eager launches or one replayed CUDA graph) and an Executor for a plan.
// braid-train --backend cuda and the GPU benchmark use it. This header
// includes no CUDA header, so braid_train.cpp builds the same with or
// without the CUDA part.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "braid/plan/plan.hpp"
#include "braid/planner/tune.hpp"
#include "braid/profiler/profile.hpp"
#include "train/training_graph.hpp"
#include "train/weights.hpp"

namespace braid::samples {

// "" when a CUDA device can be used, else why not ("no CUDA device (...)").
std::string cuda_unavailable_reason();
// Why the own kernels cannot be launched programmatically on the current
// GPU (CudaRunOptions::programmatic_launch): "" when they can (compute
// capability 9.0 or newer, and the kernels built for compute_90 or newer).
std::string programmatic_launch_unavailable_reason();
// "NVIDIA H200 (sm_90, 132 SMs), cuDNN 9.19.0, cuBLAS 13.0.0"
std::string cuda_device_description();

// The convolution choices this process has made (every trainer's, cached
// per problem): engines of cuDNN's graph API, legacy algorithms, and of
// those the legacy calls that stand in where the graph API had no engine
// (their reasons, at most `reasons` of them).
struct ConvChoiceSummary {
    std::size_t engines = 0;
    std::size_t legacy = 0;
    std::size_t fallbacks = 0;
    std::vector<std::string> reasons;
};
ConvChoiceSummary conv_choice_summary(std::size_t reasons = 5);

struct CudaRunOptions {
    bool graph_mode = false;     // capture the iteration once, replay it
    bool deterministic = false;  // only deterministic cuDNN algorithms
    bool tf32 = true;            // TF32 tensor cores in convolutions and GEMMs
    bool heuristic_algorithms = false;  // cuDNN's heuristics instead of timing algorithms with cudnnFind
    // Convolutions on cuDNN's graph-API engines (cuda::ConvApi::graph)
    // instead of the legacy cudnnConvolution* calls.
    bool conv_graph_api = false;
    // Batch norm on cuDNN's kernels (cuda::BatchNormKernels::cudnn) instead of the own ones.
    bool cudnn_batch_norm = false;
    // NHWC activations and KRSC filters (cuda::TensorLayout::nhwc), for
    // networks channels_last_unfit accepts.
    bool channels_last = false;
    // The own kernels launched programmatically (programmatic dependent
    // launch: CudaBackendOptions::programmatic_launch); a GPU of compute
    // capability 9.0 or newer. Same results; a profile is refused with it,
    // as its kernels' times would overlap.
    bool programmatic_launch = false;
    std::uint32_t split_granule = 0;    // see cuda::LayerOptions::split_granule
    // Each lane's own cuDNN workspace (CudaBackendOptions::cudnn_workspace_bytes);
    // an algorithm that wants more takes it from the lane's scratch.
    std::size_t cudnn_workspace_bytes = std::size_t{64} << 20;
    // The most cuDNN workspace one convolution may ask for (see
    // cuda::LayerOptions::workspace_limit_bytes).
    std::size_t conv_workspace_limit_bytes = std::size_t{1} << 30;
};

// What profiling a training step measured: profiler::CudaProfileResult
// without CUDA types.
struct TrainingProfile {
    braid::Profile profile;
    std::vector<std::string> warnings;  // for the caller to print
    std::string cupti_library;          // the libcupti that traced; empty when CUDA events timed the ops
    std::string cupti_error;            // why CUDA events were used instead of CUPTI, if they were
};

struct TrainingProfileRequest {
    std::uint32_t warmup = 3;
    std::uint32_t iterations = 10;  // measured
    bool use_cupti = true;          // false: CUDA events only (a durations-only profile)
    braid::ProfileRun run;          // what ran (network, settings, tool); the iteration counts are filled in
    // After each profiled iteration: phase "warm-up" or "measured".
    std::function<void(std::string_view phase, std::uint32_t done, std::uint32_t total)> progress;
};

class CudaTrainer {
public:
    // Allocates and initializes a model of `graph` (which must outlive the
    // trainer) and prepares an executor for `plan` on a backend of its own.
    CudaTrainer(const TrainingGraph& graph, const braid::Plan& plan, const CudaRunOptions& options);
    ~CudaTrainer();
    CudaTrainer(const CudaTrainer&) = delete;
    CudaTrainer& operator=(const CudaTrainer&) = delete;

    // One eager iteration (loads kernels, chooses cuDNN algorithms, sizes
    // lane scratch), then the model's initial state again: the next
    // iteration is the first of training, and in graph mode it is captured.
    void warm_up();
    // One iteration; its time on the caller stream in milliseconds (CUDA
    // events), waited for.
    double iterate();

    double loss() const;
    std::uint64_t step() const;
    std::uint32_t lanes_used() const;
    // "eager: N iterations" or "graph: N captures, M replays", with
    // programmatic launches in graph mode ", P programmatic edges".
    std::string launch_summary() const;
    // In graph mode with programmatic launches: the last captured graph's
    // programmatic edges (CudaBackend::Counters::programmatic_edges).
    std::uint64_t programmatic_edges() const;

    WeightSnapshot weights() const;

    // Where the model's batch norms run: passes (forward, backward data) on
    // cuDNN's kernels and on the own ones, and why a pass that asked for
    // cuDNN's does not run on them (every such layer's reason).
    struct BatchNormUse {
        std::size_t cudnn_passes = 0;
        std::size_t own_passes = 0;
        std::vector<std::string> declined;
    };
    BatchNormUse batch_norm_use() const;

    // By OpId, the engine family of each op's convolution pass as cuDNN's
    // choices so far name it (CudaModel::conv_engines): after warm_up(),
    // what planning_model prices the plan's convolutions by.
    std::vector<braid::ConvEngineFamily> conv_engines() const;

    // Profiles this trainer's plan (braid::profiler::profile_executor): the
    // request's warm-up and measured iterations, eagerly whatever the mode.
    // They train the model. Call warm_up() first, so that choosing cuDNN
    // algorithms is not measured.
    TrainingProfile profile(const TrainingProfileRequest& request);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// Times candidate plans as training steps on the GPU, for braid::tune: a
// CudaTrainer (model, backend, streams, workspaces of its own) per
// candidate, made and warmed up by prepare(), in the candidates' order (in
// graph mode prepare() also captures each graph, so the timed runs are
// replays); a measurement is one iteration on CUDA events. Every trainer
// uses the process's cuDNN algorithm choices, so candidates differ only in
// the plan. A candidate whose trainer runs the device out of memory beside
// the ones made before it is declined (its memory freed, the error kept as
// the reason) when the device is healthy after that; any other failure is
// an error.
class CudaTrainerTiming : public braid::TimingSource {
public:
    CudaTrainerTiming(const TrainingGraph& graph, const CudaRunOptions& options);
    ~CudaTrainerTiming() override;
    std::vector<std::string> prepare(std::span<const braid::TuneCandidate> candidates) override;
    double measure_ns(std::size_t candidate) override;
    double now_ns() override;

private:
    const TrainingGraph& graph_;
    CudaRunOptions options_;
    std::vector<std::unique_ptr<CudaTrainer>> trainers_;
};

// Whether `e`, or an exception nested in it, says the device ran out of
// memory: cudaErrorMemoryAllocation, cuDNN's
// INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED or cuBLAS's ALLOC_FAILED.
bool out_of_device_memory(const std::exception& e);

// Where a measurement on the current CUDA device holds: its name, driver,
// cuDNN and cuBLAS versions, and the run's mode and batch.
braid::MeasuredOn cuda_measured_on(std::uint32_t batch, bool graph_mode);

// braid-train --backend cuda: trains `iterations` iterations of `plan`
// (one warm-up first), prints loss, time and images per second per
// iteration and the mean without the first; with `check`, trains a second
// model with the serial plan (both with deterministic cuDNN algorithms and
// the plan's split granule) and compares every weight bit for bit. Returns
// the exit status (1 when the check finds a difference).
struct CudaTrainRequest {
    std::uint32_t iterations = 10;
    bool check = false;
    CudaRunOptions run;
};
int run_cuda_training(const TrainingGraph& graph, const braid::Plan& plan, const CudaTrainRequest& request);

// `plan` run under two settings (the convolution API, say): a trainer each,
// one iteration each per round after an untimed one each (in graph mode the
// capture), so both see the same clocks and neighbours, the order swapped
// every round (A B, B A, ...). Both launch as their graph_mode says, which
// must be the same: a setting is measured in the launch mode it will run in.
struct RunComparison {
    std::uint32_t rounds = 0;
    double base_median_ms = 0.0;
    double variant_median_ms = 0.0;
    double speedup = 0.0;  // the median over rounds of base ms / variant ms (paired, as tuning compares)
    std::string base_launches, variant_launches;  // CudaTrainer::launch_summary of each, after the rounds
};
RunComparison compare_runs(const TrainingGraph& graph, const braid::Plan& plan, CudaRunOptions base,
                           CudaRunOptions variant, std::uint32_t rounds = 15);

// The engine families cuDNN picks for `graph`'s convolutions under
// `options` (CudaTrainer::conv_engines of a serial, eager trainer after its
// warm-up), for planning_model. The choices stay in the process's
// AlgorithmCache, so the trainers made after it run the same algorithms
// and make no search of their own. The model is its own.
std::vector<braid::ConvEngineFamily> probe_conv_engines(const TrainingGraph& graph, CudaRunOptions options = {});

// The profile of `graph`'s training step on the current CUDA device, what
// braid-profile --net and braid-train --profile-out write: a CudaTrainer of
// the serial plan in eager mode (`options`' algorithms and math; graph_mode
// is ignored), warmed up, then CudaTrainer::profile. The model is its own.
TrainingProfile profile_cuda_training(const TrainingGraph& graph, const TrainingProfileRequest& request,
                                      CudaRunOptions options = {});

}  // namespace braid::samples
