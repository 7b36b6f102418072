// How the CUDA layers choose cuDNN convolution algorithms, and the cache
// that makes every model of a process use the same choice for the same
// problem. Bitwise identity between two runs needs the same algorithm on
// both: a choice timed by cudnnFind is made once per problem (geometry,
// images per call, strides, math, determinism) and then reused, by every
// layer, lane and model, never re-timed.
#pragma once

#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "braid/model/conv_engine.hpp"

namespace braid::samples::cuda {

// Which cuDNN API runs convolutions: the legacy cudnnConvolution* calls and
// their algorithm enums, or the graph API's engines (conv_engines.hpp).
enum class ConvApi : std::uint8_t { legacy, graph };
std::string_view to_string(ConvApi a) noexcept;

// Which kernels run batch norm: braid's own (statistics in double, the
// reference's order; kernels.h) or cuDNN's cudnnBatchNormalization* calls
// in spatial mode, the kernels PyTorch's NCHW training step runs
// (CudaBatchNorm in layers.hpp).
enum class BatchNormKernels : std::uint8_t { own, cudnn };
std::string_view to_string(BatchNormKernels k) noexcept;

// How activations lie in memory: NCHW (the default) or NHWC, channels
// last, where cuDNN's Hopper tensor-core engines work without
// transposing. CudaConv (without a bias), CudaPool and CudaBatchNorm take
// NHWC over whole (dense) tensors, the elementwise layers any layout; a
// CudaModel in NHWC runs networks channels_last_unfit accepts (the
// ResNets).
enum class TensorLayout : std::uint8_t { nchw, nhwc };
std::string_view to_string(TensorLayout l) noexcept;

enum class AlgorithmSearch : std::uint8_t {
    find,       // cudnnFind*AlgorithmEx, timed on the layer's own buffers the first time a problem runs eagerly
    heuristic,  // cudnnGet*Algorithm_v7: no kernels run (also what a problem first met during graph capture gets)
};

// How library-backed layers (convolution, fully connected, pooling, LRN) run.
struct LayerOptions {
    // Only algorithms cuDNN reports as deterministic (CUDNN_DETERMINISTIC):
    // what a bitwise check needs. Off: the fastest, whatever cuDNN says.
    bool deterministic = true;
    // TF32 tensor cores in convolutions and GEMMs (FP32 data, 10-bit
    // mantissa products); off: FMA kernels with FP32 products, closest to the
    // reference layers.
    bool tf32 = false;
    AlgorithmSearch search = AlgorithmSearch::find;
    // Most cuDNN workspace one call may ask for. The choice is also bounded
    // by the memory free when it is made (workspace_budget). A call takes
    // the lane's cuDNN workspace when it fits, else the lane's scratch,
    // which grows to what the chosen algorithms ask for (eager mode).
    std::size_t workspace_limit_bytes = std::size_t{1} << 30;
    // 0: one library call per body, for the body's images. g > 0: calls over
    // images [k*g, (k+1)*g) only (a batch part must start at a multiple of
    // g), so any split of the batch at multiples of g makes the same calls
    // as the whole batch and gives its bits. cuDNN and cuBLAS may pick other
    // kernels for another image count; split_granule(plan) gives the g a
    // plan needs.
    std::uint32_t split_granule = 0;
    ConvApi conv_api = ConvApi::legacy;
    // Graph API: how many of the heuristics' allowed engines a search times
    // (each finalizes a plan, which may compile a kernel at run time).
    std::uint32_t engine_trials = 6;
    BatchNormKernels batch_norm = BatchNormKernels::own;
    TensorLayout layout = TensorLayout::nchw;  // see TensorLayout
};

enum class ConvPass : std::uint8_t { forward, backward_data, backward_filter };
std::string_view to_string(ConvPass p) noexcept;

// A finalized execution plan of cuDNN's graph API (conv_engines.cpp).
class GraphConvPlan;

struct ConvAlgorithm {
    int algo = 0;  // cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t; with a plan, the engine's global index
    cudnnMathType_t math = CUDNN_FMA_MATH;
    std::size_t workspace_bytes = 0;
    bool deterministic = false;
    float time_ms = -1.0f;  // cudnnFind's measurement (the engine's, timed); -1 from heuristics
    std::shared_ptr<const GraphConvPlan> plan;  // graph API only: what runs
    std::string note;  // why the choice is not what the options asked for (a legacy call under conv_api graph)
    // The engine family it runs on as far as the choice tells
    // (legacy_algorithm_family, engine_notes_family): what a calibration's
    // engine fits price it by; `other` where the choice does not tell.
    braid::ConvEngineFamily family = braid::ConvEngineFamily::other;
};

// The engine family a legacy call of `pass` with algorithm `algo` (the
// pass's cudnnConvolution*Algo_t) and `math` runs on, where the enum says:
// the FFT and Winograd algorithms by their names; tensor-op math on tensor
// cores; FP32 math on the pre-Volta engines for the forward implicit GEMM
// (implicit_convolve_sgemm, which has no tensor-core form) and algorithm 0
// of either backward pass (dgrad_engine, wgrad_alg0_engine in the H200
// profiles). `other` for the rest: precomputed-index GEMMs and algorithm 1
// without tensor-op math run FP32 kernels of either family.
braid::ConvEngineFamily legacy_algorithm_family(ConvPass pass, int algo, cudnnMathType_t math) noexcept;

// Problem key -> chosen algorithm. Thread-safe; the first choice stored for
// a key stays.
class AlgorithmCache {
public:
    // The process-wide cache every layer uses.
    static AlgorithmCache& process();

    std::optional<ConvAlgorithm> lookup(const std::string& key) const;
    // Stores `a` unless the key has a choice already; returns the stored one.
    ConvAlgorithm insert(const std::string& key, const ConvAlgorithm& a);
    std::size_t size() const;
    // Every stored choice, in key order.
    std::vector<ConvAlgorithm> choices() const;
    void clear();
    // "key: algo N (math M, W bytes, deterministic|nondeterministic, T ms)"
    // lines; "engine N (...)" for the graph API's choices; a note last.
    std::vector<std::string> describe() const;

private:
    mutable std::mutex mutex_;
    std::map<std::string, ConvAlgorithm> choices_;
};

// One convolution call's descriptors, and buffers when cudnnFind may time
// algorithms on them (all null: heuristics only).
struct ConvProblem {
    cudnnTensorDescriptor_t x = nullptr;  // x or dx
    cudnnFilterDescriptor_t w = nullptr;  // w or dw
    cudnnConvolutionDescriptor_t conv = nullptr;
    cudnnTensorDescriptor_t y = nullptr;  // y or dy
    const void* x_data = nullptr;
    const void* w_data = nullptr;
    const void* y_data = nullptr;
    void* out_data = nullptr;  // what the pass writes: y, dx or dw
    void* workspace = nullptr;
    std::size_t workspace_bytes = 0;
};

// How much workspace an algorithm chosen now may ask for: at most
// `limit_bytes`, and at most a 1/`lanes` share of the `free_bytes` the
// device has now, so that that many lanes can each hold the workspace of a
// call at the same time. The share is rounded down to whole MiB.
inline constexpr std::uint32_t workspace_lanes = 8;
std::size_t workspace_budget(std::size_t limit_bytes, std::size_t free_bytes, std::uint32_t lanes = workspace_lanes);

// Picks the algorithm of `pass` for `problem` under `options` (timed when
// the problem carries buffers and options.search is find) among those that
// want at most `budget_bytes` of workspace, or throws braid::Error naming
// `layer` when cuDNN offers none that fits (and saying when free memory,
// not the limit, set the budget).
ConvAlgorithm choose_conv_algorithm(cudnnHandle_t handle, ConvPass pass, const ConvProblem& problem,
                                    const LayerOptions& options, const std::string& layer, std::size_t budget_bytes);

}  // namespace braid::samples::cuda
