#include "cuda/algorithms.hpp"

#include <algorithm>
#include <array>
#include <sstream>

#include "braid/cuda/cudnn.hpp"
#include "braid/error.hpp"

namespace braid::samples::cuda {

std::string_view to_string(ConvPass p) noexcept {
    switch (p) {
        case ConvPass::forward: return "forward";
        case ConvPass::backward_data: return "backward-data";
        case ConvPass::backward_filter: return "backward-filter";
    }
    return "?";
}

std::string_view to_string(ConvApi a) noexcept {
    switch (a) {
        case ConvApi::legacy: return "legacy";
        case ConvApi::graph: return "graph";
    }
    return "?";
}

std::string_view to_string(BatchNormKernels k) noexcept {
    switch (k) {
        case BatchNormKernels::own: return "own";
        case BatchNormKernels::cudnn: return "cudnn";
    }
    return "?";
}

std::string_view to_string(TensorLayout l) noexcept {
    switch (l) {
        case TensorLayout::nchw: return "nchw";
        case TensorLayout::nhwc: return "nhwc";
    }
    return "?";
}

AlgorithmCache& AlgorithmCache::process() {
    static AlgorithmCache cache;
    return cache;
}

std::optional<ConvAlgorithm> AlgorithmCache::lookup(const std::string& key) const {
    std::lock_guard lock(mutex_);
    auto it = choices_.find(key);
    if (it == choices_.end()) return std::nullopt;
    return it->second;
}

ConvAlgorithm AlgorithmCache::insert(const std::string& key, const ConvAlgorithm& a) {
    std::lock_guard lock(mutex_);
    return choices_.try_emplace(key, a).first->second;
}

std::size_t AlgorithmCache::size() const {
    std::lock_guard lock(mutex_);
    return choices_.size();
}

std::vector<ConvAlgorithm> AlgorithmCache::choices() const {
    std::lock_guard lock(mutex_);
    std::vector<ConvAlgorithm> out;
    for (const auto& [key, a] : choices_) out.push_back(a);
    return out;
}

void AlgorithmCache::clear() {
    std::lock_guard lock(mutex_);
    choices_.clear();
}

std::vector<std::string> AlgorithmCache::describe() const {
    std::lock_guard lock(mutex_);
    std::vector<std::string> out;
    for (const auto& [key, a] : choices_) {
        std::ostringstream s;
        s << key << (a.plan ? ": engine " : ": algo ") << a.algo << " (math " << static_cast<int>(a.math) << ", " << a.workspace_bytes
          << " bytes, " << (a.deterministic ? "deterministic" : "nondeterministic");
        if (a.time_ms >= 0.0f) s << ", " << a.time_ms << " ms";
        s << ")";
        if (!a.note.empty()) s << "; " << a.note;
        out.push_back(s.str());
    }
    return out;
}

namespace {

struct Candidate {
    ConvAlgorithm algorithm;
    cudnnStatus_t status = CUDNN_STATUS_SUCCESS;
};

template <class Perf>
std::vector<Candidate> candidates(const std::vector<Perf>& perf, int returned, bool timed) {
    std::vector<Candidate> out;
    for (int i = 0; i < returned; ++i) {
        const Perf& p = perf[static_cast<std::size_t>(i)];
        Candidate c;
        c.algorithm.algo = static_cast<int>(p.algo);
        c.algorithm.math = p.mathType;
        c.algorithm.workspace_bytes = p.memory;
        c.algorithm.deterministic = p.determinism == CUDNN_DETERMINISTIC;
        c.algorithm.time_ms = timed ? p.time : -1.0f;
        c.status = p.status;
        out.push_back(c);
    }
    return out;
}

// cudnnFind (timed, on the problem's buffers) or cudnnGet_v7 (heuristics).
std::vector<Candidate> query(cudnnHandle_t handle, ConvPass pass, const ConvProblem& p, bool timed) {
    using braid::cuda::check;
    int max = 0, returned = 0;
    switch (pass) {
        case ConvPass::forward: {
            check(cudnnGetConvolutionForwardAlgorithmMaxCount(handle, &max), "cudnnGetConvolutionForwardAlgorithmMaxCount");
            std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(static_cast<std::size_t>(max));
            if (timed)
                check(cudnnFindConvolutionForwardAlgorithmEx(handle, p.x, p.x_data, p.w, p.w_data, p.conv, p.y, p.out_data,
                                                             max, &returned, perf.data(), p.workspace,
                                                             p.workspace_bytes),
                      "cudnnFindConvolutionForwardAlgorithmEx");
            else
                check(cudnnGetConvolutionForwardAlgorithm_v7(handle, p.x, p.w, p.conv, p.y, max, &returned, perf.data()),
                      "cudnnGetConvolutionForwardAlgorithm_v7");
            return candidates(perf, returned, timed);
        }
        case ConvPass::backward_data: {
            check(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(handle, &max),
                  "cudnnGetConvolutionBackwardDataAlgorithmMaxCount");
            std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(static_cast<std::size_t>(max));
            if (timed)
                check(cudnnFindConvolutionBackwardDataAlgorithmEx(handle, p.w, p.w_data, p.y, p.y_data, p.conv, p.x,
                                                                  p.out_data, max, &returned, perf.data(), p.workspace,
                                                                  p.workspace_bytes),
                      "cudnnFindConvolutionBackwardDataAlgorithmEx");
            else
                check(cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, p.w, p.y, p.conv, p.x, max, &returned,
                                                                  perf.data()),
                      "cudnnGetConvolutionBackwardDataAlgorithm_v7");
            return candidates(perf, returned, timed);
        }
        case ConvPass::backward_filter: {
            check(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(handle, &max),
                  "cudnnGetConvolutionBackwardFilterAlgorithmMaxCount");
            std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(static_cast<std::size_t>(max));
            if (timed)
                check(cudnnFindConvolutionBackwardFilterAlgorithmEx(handle, p.x, p.x_data, p.y, p.y_data, p.conv, p.w,
                                                                    p.out_data, max, &returned, perf.data(),
                                                                    p.workspace, p.workspace_bytes),
                      "cudnnFindConvolutionBackwardFilterAlgorithmEx");
            else
                check(cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, p.x, p.y, p.conv, p.w, max, &returned,
                                                                    perf.data()),
                      "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
            return candidates(perf, returned, timed);
        }
    }
    return {};
}

bool tensor_op(cudnnMathType_t m) {
    return m == CUDNN_TENSOR_OP_MATH || m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}

std::optional<ConvAlgorithm> pick(const std::vector<Candidate>& list, const LayerOptions& o, std::size_t budget) {
    for (const Candidate& c : list) {
        if (c.status != CUDNN_STATUS_SUCCESS) continue;
        if (c.algorithm.workspace_bytes > budget) continue;
        if (o.deterministic && !c.algorithm.deterministic) continue;
        if (!o.tf32 && tensor_op(c.algorithm.math)) continue;
        ConvAlgorithm a = c.algorithm;
        // Without TF32 the call runs with FMA math whatever the list said
        // (cuDNN's default math allows TF32 on Ampere and newer).
        if (!o.tf32) a.math = CUDNN_FMA_MATH;
        return a;
    }
    return std::nullopt;
}

}  // namespace

braid::ConvEngineFamily legacy_algorithm_family(ConvPass pass, int algo, cudnnMathType_t math) noexcept {
    // Per pass (in ConvPass order): its FFT and Winograd algorithms, and
    // the one that runs a pre-Volta FP32 engine.
    struct Algorithms {
        std::array<int, 2> fft, winograd;
        int legacy;
    };
    static constexpr std::array<Algorithms, 3> by_pass{{
        {{CUDNN_CONVOLUTION_FWD_ALGO_FFT, CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING},
         {CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD, CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED},
         CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM},
        {{CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT, CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING},
         {CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD, CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED},
         CUDNN_CONVOLUTION_BWD_DATA_ALGO_0},
        {{CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING},
         {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED},
         CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0},
    }};
    const Algorithms& a = by_pass[static_cast<std::size_t>(pass)];
    if (std::ranges::find(a.fft, algo) != a.fft.end()) return braid::ConvEngineFamily::fft;
    if (std::ranges::find(a.winograd, algo) != a.winograd.end()) return braid::ConvEngineFamily::winograd;
    if (tensor_op(math)) return braid::ConvEngineFamily::tensor_core;
    return algo == a.legacy ? braid::ConvEngineFamily::legacy : braid::ConvEngineFamily::other;
}

std::size_t workspace_budget(std::size_t limit_bytes, std::size_t free_bytes, std::uint32_t lanes) {
    constexpr std::size_t mib = std::size_t{1} << 20;
    const std::size_t share = free_bytes / std::max<std::uint32_t>(lanes, 1) / mib * mib;
    return std::min(limit_bytes, share);
}

ConvAlgorithm choose_conv_algorithm(cudnnHandle_t handle, ConvPass pass, const ConvProblem& problem,
                                    const LayerOptions& options, const std::string& layer, std::size_t budget_bytes) {
    braid::cuda::check(cudnnSetConvolutionMathType(problem.conv, options.tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH),
                       "cudnnSetConvolutionMathType");
    const bool can_time = options.search == AlgorithmSearch::find && problem.out_data != nullptr;
    std::string timed_failure;
    const auto named = [pass](ConvAlgorithm a) {
        a.family = legacy_algorithm_family(pass, a.algo, a.math);
        return a;
    };
    if (can_time) {
        try {
            if (auto a = pick(query(handle, pass, problem, true), options, budget_bytes)) return named(*a);
        } catch (const braid::Error& e) {
            timed_failure = std::string("; cudnnFind failed: ") + e.what();
        }
    }
    const std::vector<Candidate> list = query(handle, pass, problem, false);
    if (auto a = pick(list, options, budget_bytes)) return named(*a);
    std::ostringstream why;
    why << "layer '" << layer << "': cuDNN offers no " << (options.deterministic ? "deterministic " : "")
        << to_string(pass) << " algorithm " << (options.tf32 ? "" : "without TF32 ") << "within the "
        << budget_bytes << "-byte workspace budget ("
        << (budget_bytes < options.workspace_limit_bytes
                ? "device memory sets it: 1/" + std::to_string(workspace_lanes) +
                      " of what was free; the configured limit is " + std::to_string(options.workspace_limit_bytes) +
                      " bytes"
                : "the configured limit, LayerOptions::workspace_limit_bytes")
        << "; " << list.size() << " candidates:";
    for (const Candidate& c : list)
        why << " algo " << c.algorithm.algo << " status " << static_cast<int>(c.status) << " math "
            << static_cast<int>(c.algorithm.math) << " " << c.algorithm.workspace_bytes << " bytes "
            << (c.algorithm.deterministic ? "det" : "nondet") << ";";
    why << ")" << timed_failure;
    throw braid::Error(why.str());
}

}  // namespace braid::samples::cuda
