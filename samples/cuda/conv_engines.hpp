// Convolutions through cuDNN's graph API (the "backend" descriptors of
// cudnn_graph.h), the way to cuDNN's newer engines: the legacy
// cudnnConvolution* calls reach only the engines behind the legacy
// algorithm enums, where PyTorch's steps on the H200 ran sm90 xmma
// tensor-core kernels (../shared/h200/torch-resnet50-b32-kernels.txt).
//
// A convolution pass is a one-operation graph; cuDNN's heuristics list
// engine configurations for it; the choice drops those the options forbid
// (engine_rejection: nondeterministic in check mode, tensor cores without
// TF32, down-converted inputs and reduced-precision reductions always, as
// PyTorch's filter does; workspace over budget), times the first LayerOptions::engine_trials of
// the rest on the op's own buffers when it may (eager, search = find), and
// keeps the fastest; otherwise the heuristics' first that builds. Engines
// that compile a kernel at run time (NVRTC, seconds each) are tried after
// the precompiled ones of the same list. Graphs
// and plans are built with a cuDNN handle the process keeps per device; the
// finalized execution plan is cached with the choice (AlgorithmCache) and
// executed by every lane's handle, so one problem always runs one plan.
//
// The pure parts (shapes, alignment, the choice among candidates) are host
// code that samples-cuda-host tests without a device.
#pragma once

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "cuda/algorithms.hpp"

namespace braid::samples::cuda {

// A 4-d tensor as the graph API takes it: dims and strides in elements.
struct BackendTensorShape {
    std::array<std::int64_t, 4> dims{};
    std::array<std::int64_t, 4> strides{};
};

// `images` images of c x h x w floats, `image_stride` floats apart (a
// channel slice of a concat buffer has the larger stride of the whole), in
// `layout`: NCHW, or NHWC (a pixel's channels adjacent). Dims are N, C, H,
// W either way; only the strides differ.
BackendTensorShape activation_shape(std::uint32_t images, std::uint32_t c, std::uint32_t h, std::uint32_t w,
                                    std::uint64_t image_stride, TensorLayout layout = TensorLayout::nchw);
// K x C x R x S, dense: KCRS (the samples' weight layout), or KRSC with
// NHWC activations. C is per group, and cuDNN infers the group count from
// x's channels over it.
BackendTensorShape filter_shape(std::uint32_t k, std::uint32_t c, std::uint32_t r, std::uint32_t s,
                                TensorLayout layout = TensorLayout::nchw);

// The byte alignment a plan may assume of these addresses: the largest
// power of two, at most 16, that divides them all (null pointers ignored).
std::int64_t common_alignment(std::initializer_list<const void*> pointers);

// One pass of one convolution as the graph API sees it. x, w and y are x
// (or dx), w (or dw) and y (or dy), whatever the pass writes; the data
// pointers are set only when the choice may time engines on them.
struct GraphConvProblem {
    BackendTensorShape x, w, y;
    std::array<std::int64_t, 2> pad{};     // rows, columns (pre and post)
    std::array<std::int64_t, 2> stride{1, 1};
    std::int64_t alignment = 16;           // bytes, of every pointer the plan is executed with
    const void* x_data = nullptr;
    const void* w_data = nullptr;
    const void* y_data = nullptr;
    void* workspace = nullptr;             // for timing: workspace_bytes of it
    std::size_t workspace_bytes = 0;

    bool can_time() const noexcept { return x_data && w_data && y_data; }
};

// An engine configuration the heuristics offered, as the choice sees it.
struct EngineCandidate {
    std::size_t id = 0;        // the caller's: where it keeps the configuration and plan
    std::int64_t engine = -1;  // CUDNN_ATTR_ENGINE_GLOBAL_INDEX
    std::vector<cudnnBackendNumericalNote_t> notes;
    bool runtime_compiled = false;    // CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION: its plan compiles a kernel
    std::size_t workspace_bytes = 0;  // of its finalized plan
    std::string failure;              // why its plan did not build or run; empty when it did (or was not tried)
    float time_ms = -1.0f;            // the median of its timed runs; -1 untimed
};

// The engine family a graph-API engine with these numerical notes runs on:
// FFT, Winograd (any tile), tensor cores; `other` for an FP32 engine, whose
// notes do not say whether it is one of the pre-Volta engines or a newer
// CUDA-core GEMM.
braid::ConvEngineFamily engine_notes_family(const std::vector<cudnnBackendNumericalNote_t>& notes) noexcept;

// Why `c` may not run under `o` within `budget` bytes of workspace; empty
// when it may.
std::string engine_rejection(const EngineCandidate& c, const LayerOptions& o, std::size_t budget);

// Index in `list` (the order they were tried in) of the choice among the
// allowed candidates: the fastest timed one (the earlier on a tie), else
// the first; nullopt when none is allowed.
std::optional<std::size_t> pick_engine(const std::vector<EngineCandidate>& list, const LayerOptions& o,
                                       std::size_t budget);

// "engine 12 (tensor-core, 3.2 MiB, 0.41 ms)": a candidate for messages.
std::string describe(const EngineCandidate& c);

// The choice of an engine as host logic, over the heuristics' lists one
// offer at a time; the caller builds and times plans when asked.
class EngineSearch {
public:
    // What building a plan gave: its workspace bytes, or why it did not build.
    struct Built {
        std::size_t workspace_bytes = 0;
        std::string failure;  // empty: built
    };
    using Build = std::function<Built(std::size_t id)>;
    // Times a built plan: ms, negative when a run failed.
    using Time = std::function<float(std::size_t id)>;

    EngineSearch(const LayerOptions& options, std::size_t budget, bool timed)
        : options_(options), budget_(budget), timed_(timed) {}

    // One heuristics list, best first. Tries its configurations whose
    // engine no earlier list offered (a list may hold one engine with other
    // knobs, and both are tried), precompiled ones first (the list's order
    // within each): builds each whose notes allow it; untimed, stops at the
    // first that builds; timed, times the allowed ones until
    // max(1, options.engine_trials) were timed.
    void offer(std::vector<EngineCandidate> offered, const Build& build, const Time& time);

    // Index in tried() of the choice (pick_engine), nullopt while none.
    std::optional<std::size_t> choice() const { return pick_engine(tried_, options_, budget_); }
    // Every candidate offered, in the order tried, with what was learned.
    const std::vector<EngineCandidate>& tried() const noexcept { return tried_; }

private:
    LayerOptions options_;
    std::size_t budget_ = 0;
    bool timed_ = false;
    std::uint32_t trials_ = 0;
    std::vector<EngineCandidate> tried_;
};

// Chooses an engine for `pass` of `problem` under `options` within
// `budget` bytes of workspace, finalizes its plan and returns it as a
// ConvAlgorithm (algo: the engine's global index; plan set). Timed on
// `stream`, the one `handle` issues on, when the problem carries buffers
// and options.search is find.
// Throws braid::Error naming `layer`, the pass and every candidate's
// rejection when none can run. Serialized process-wide (the planning
// handle is shared).
ConvAlgorithm choose_conv_engine(cudnnHandle_t handle, cudaStream_t stream, ConvPass pass,
                                 const GraphConvProblem& problem, const LayerOptions& options,
                                 const std::string& layer, std::size_t budget);

// Makes the cuDNN handle graphs and plans of the current device are built
// with, if there is none yet: call it outside stream capture (creating a
// handle allocates device memory). choose_conv_engine makes it otherwise.
void prepare_graph_api();

// Runs `plan` on the lane's handle (its stream): x, w, y as in
// GraphConvProblem, `workspace` of at least the plan's workspace bytes.
void execute_conv_plan(cudnnHandle_t handle, const GraphConvPlan& plan, const void* x, const void* w,
                       const void* y, void* workspace);

}  // namespace braid::samples::cuda
