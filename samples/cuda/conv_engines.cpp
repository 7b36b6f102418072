#include "cuda/conv_engines.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <mutex>
#include <source_location>
#include <sstream>
#include <utility>

#include "braid/cuda/cudnn.hpp"
#include "braid/cuda/error.hpp"
#include "braid/cuda/resources.hpp"
#include "braid/error.hpp"

namespace braid::samples::cuda {

// ---------------------------------------------------------------- host logic

BackendTensorShape activation_shape(std::uint32_t images, std::uint32_t c, std::uint32_t h, std::uint32_t w,
                                    std::uint64_t image_stride, TensorLayout layout) {
    const auto n = static_cast<std::int64_t>(image_stride);
    if (layout == TensorLayout::nhwc) {
        const auto row = static_cast<std::int64_t>(std::uint64_t{w} * c);
        return {{images, c, h, w}, {n, 1, row, c}};
    }
    const auto hw = static_cast<std::int64_t>(std::uint64_t{h} * w);
    return {{images, c, h, w}, {n, hw, w, 1}};
}

BackendTensorShape filter_shape(std::uint32_t k, std::uint32_t c, std::uint32_t r, std::uint32_t s,
                                TensorLayout layout) {
    // A filter is k "images" of c x r x s: the activations' layout, densely.
    return activation_shape(k, c, r, s, std::uint64_t{c} * r * s, layout);
}

std::int64_t common_alignment(std::initializer_list<const void*> pointers) {
    std::uintptr_t bits = 16;
    for (const void* p : pointers)
        if (p != nullptr) bits |= reinterpret_cast<std::uintptr_t>(p);
    return static_cast<std::int64_t>(bits & (~bits + 1));  // the lowest set bit, at most 16
}

namespace {

bool has(const EngineCandidate& c, cudnnBackendNumericalNote_t note) {
    return std::find(c.notes.begin(), c.notes.end(), note) != c.notes.end();
}

}  // namespace

braid::ConvEngineFamily engine_notes_family(const std::vector<cudnnBackendNumericalNote_t>& notes) noexcept {
    const auto noted = [&](std::initializer_list<cudnnBackendNumericalNote_t> any) {
        return std::find_first_of(notes.begin(), notes.end(), any.begin(), any.end()) != notes.end();
    };
    if (noted({CUDNN_NUMERICAL_NOTE_FFT})) return braid::ConvEngineFamily::fft;
    if (noted({CUDNN_NUMERICAL_NOTE_WINOGRAD, CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_4x4,
               CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_6x6, CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_13x13}))
        return braid::ConvEngineFamily::winograd;
    if (noted({CUDNN_NUMERICAL_NOTE_TENSOR_CORE})) return braid::ConvEngineFamily::tensor_core;
    return braid::ConvEngineFamily::other;
}

std::string engine_rejection(const EngineCandidate& c, const LayerOptions& o, std::size_t budget) {
    if (!c.failure.empty()) return c.failure;
    if (o.deterministic && has(c, CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC)) return "nondeterministic";
    if (!o.tf32 && has(c, CUDNN_NUMERICAL_NOTE_TENSOR_CORE)) return "tensor cores (TF32) without --tf32";
    // Down-converted inputs (to FP16 or BF16) lose more than TF32 does, with or without it.
    if (has(c, CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS)) return "down-converts its inputs";
    if (has(c, CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION)) return "reduces in reduced precision";
    if (c.workspace_bytes > budget)
        return "wants " + std::to_string(c.workspace_bytes) + " bytes of workspace, over the " +
               std::to_string(budget) + "-byte budget";
    return {};
}

std::optional<std::size_t> pick_engine(const std::vector<EngineCandidate>& list, const LayerOptions& o,
                                       std::size_t budget) {
    std::optional<std::size_t> first, fastest;
    for (std::size_t i = 0; i < list.size(); ++i) {
        if (!engine_rejection(list[i], o, budget).empty()) continue;
        if (!first) first = i;
        if (list[i].time_ms >= 0.0f && (!fastest || list[i].time_ms < list[*fastest].time_ms)) fastest = i;
    }
    return fastest ? fastest : first;
}

std::string describe(const EngineCandidate& c) {
    std::ostringstream s;
    s << "engine " << c.engine << " (";
    if (has(c, CUDNN_NUMERICAL_NOTE_TENSOR_CORE)) s << "tensor-core, ";
    if (has(c, CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC)) s << "nondeterministic, ";
    if (c.runtime_compiled) s << "runtime-compiled, ";
    char mib[32];
    std::snprintf(mib, sizeof mib, "%.1f MiB", static_cast<double>(c.workspace_bytes) / (1 << 20));
    s << mib;
    if (c.time_ms >= 0.0f) s << ", " << c.time_ms << " ms";
    s << ")";
    return s.str();
}

void EngineSearch::offer(std::vector<EngineCandidate> offered, const Build& build, const Time& time) {
    std::vector<EngineCandidate> fresh;
    for (EngineCandidate& c : offered)
        if (std::none_of(tried_.begin(), tried_.end(), [&](const EngineCandidate& o) { return o.engine == c.engine; }))
            fresh.push_back(std::move(c));
    std::stable_partition(fresh.begin(), fresh.end(), [](const EngineCandidate& c) { return !c.runtime_compiled; });
    const std::uint32_t trials = std::max<std::uint32_t>(options_.engine_trials, 1);
    for (EngineCandidate& c : fresh) {
        if (timed_ ? trials_ >= trials : choice().has_value()) return;
        bool allowed = engine_rejection(c, options_, budget_).empty();  // by its notes
        if (allowed) {
            const Built b = build(c.id);
            c.failure = b.failure;
            c.workspace_bytes = b.workspace_bytes;
            allowed = engine_rejection(c, options_, budget_).empty();  // built, and within the budget
        }
        if (allowed && timed_) {
            ++trials_;
            c.time_ms = time(c.id);
            if (c.time_ms < 0.0f) c.failure = "its plan failed when timed";  // never the choice
        }
        tried_.push_back(std::move(c));
    }
}

// ---------------------------------------------------------------- graph API

// An owned backend descriptor. Outside the anonymous namespace: the
// GraphConvPlan that algorithms.hpp declares holds one.
struct BackendTraits {
    using handle_type = cudnnBackendDescriptor_t;
    static void destroy(handle_type d) noexcept {
        braid::cuda::check_noexcept(cudnnBackendDestroyDescriptor(d), "cudnnBackendDestroyDescriptor");
    }
};
using Backend = braid::cuda::UniqueHandle<BackendTraits>;

namespace {

using braid::cuda::check;

Backend make(cudnnBackendDescriptorType_t type) {
    cudnnBackendDescriptor_t d = nullptr;
    check(cudnnBackendCreateDescriptor(type, &d), "cudnnBackendCreateDescriptor");
    return Backend(d);
}

template <class T>
void set(const Backend& d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, const T* values,
         std::int64_t count = 1) {
    check(cudnnBackendSetAttribute(d.get(), name, type, count, values), "cudnnBackendSetAttribute");
}

void set_descriptor(const Backend& d, cudnnBackendAttributeName_t name, const Backend& value) {
    cudnnBackendDescriptor_t v = value.get();
    set(d, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, &v);
}

void finalize(const Backend& d, const char* what) {
    const cudnnStatus_t s = cudnnBackendFinalize(d.get());
    if (s != CUDNN_STATUS_SUCCESS)
        braid::cuda::throw_library_error(static_cast<int>(s), "cudnnBackendFinalize",
                                         std::string(what) + ": " + braid::cuda::status_text(s),
                                         std::source_location::current());
}

// The tensors' unique ids in the graph and the variant pack.
constexpr std::int64_t x_uid = 1, w_uid = 2, y_uid = 3;

Backend tensor(const BackendTensorShape& t, std::int64_t uid, std::int64_t alignment) {
    Backend d = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    const cudnnDataType_t type = CUDNN_DATA_FLOAT;
    set(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &type);
    set(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, t.dims.data(), 4);
    set(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, t.strides.data(), 4);
    set(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &uid);
    set(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &alignment);
    finalize(d, "tensor descriptor");
    return d;
}

// The one-operation graph of a pass: cross-correlation in float, alpha 1,
// beta 0 (the pass overwrites its output).
Backend operation_graph(cudnnHandle_t handle, ConvPass pass, const GraphConvProblem& p) {
    const Backend x = tensor(p.x, x_uid, p.alignment), w = tensor(p.w, w_uid, p.alignment),
                  y = tensor(p.y, y_uid, p.alignment);
    Backend conv = make(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
    const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
    const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    const std::int64_t spatial = 2;
    const std::array<std::int64_t, 2> dilation{1, 1};
    set(conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &compute);
    set(conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, &mode);
    set(conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, &spatial);
    set(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, dilation.data(), 2);
    set(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, p.stride.data(), 2);
    set(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, p.pad.data(), 2);
    set(conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, p.pad.data(), 2);
    finalize(conv, "convolution descriptor");

    // Each pass's operation and the attributes its tensors, descriptor and scalars go under.
    struct PassAttributes {
        cudnnBackendDescriptorType_t type;
        cudnnBackendAttributeName_t x, w, y, conv, alpha, beta;
    };
    static constexpr PassAttributes passes[] = {
        {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA},
        {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA},
        {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA},
    };
    static_assert(static_cast<int>(ConvPass::forward) == 0 && static_cast<int>(ConvPass::backward_data) == 1 &&
                  static_cast<int>(ConvPass::backward_filter) == 2,
                  "passes[] is indexed by ConvPass");
    const PassAttributes& a = passes[static_cast<std::size_t>(pass)];
    const float alpha = 1.0f, beta = 0.0f;
    Backend op = make(a.type);
    set_descriptor(op, a.x, x);
    set_descriptor(op, a.w, w);
    set_descriptor(op, a.y, y);
    set_descriptor(op, a.conv, conv);
    set(op, a.alpha, CUDNN_TYPE_FLOAT, &alpha);
    set(op, a.beta, CUDNN_TYPE_FLOAT, &beta);
    finalize(op, "convolution operation");

    Backend graph = make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    cudnnBackendDescriptor_t ops = op.get();
    set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, &ops);
    set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, &handle);
    finalize(graph, "operation graph");
    return graph;
}

// The engine configurations `mode`'s heuristics offer, best first.
std::vector<Backend> heuristic_configs(const Backend& graph, cudnnBackendHeurMode_t mode) {
    Backend heur = make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    set_descriptor(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph);
    set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, &mode);
    finalize(heur, "engine heuristics");
    std::int64_t count = 0;
    check(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                                   &count, nullptr),
          "cudnnBackendGetAttribute(ENGINEHEUR_RESULTS count)");
    std::vector<Backend> configs;
    std::vector<cudnnBackendDescriptor_t> raw;
    for (std::int64_t i = 0; i < count; ++i) {
        configs.push_back(make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
        raw.push_back(configs.back().get());
    }
    std::int64_t returned = 0;
    if (count > 0)
        check(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                       count, &returned, raw.data()),
              "cudnnBackendGetAttribute(ENGINEHEUR_RESULTS)");
    configs.resize(static_cast<std::size_t>(std::clamp<std::int64_t>(returned, 0, count)));
    return configs;
}

// The engine of a configuration: its global index and numerical notes.
EngineCandidate describe_config(const Backend& config) {
    Backend engine = make(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    cudnnBackendDescriptor_t raw = engine.get();
    std::int64_t n = 0;
    check(cudnnBackendGetAttribute(config.get(), CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n,
                                   &raw),
          "cudnnBackendGetAttribute(ENGINECFG_ENGINE)");
    EngineCandidate c;
    check(cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &c.engine),
          "cudnnBackendGetAttribute(ENGINE_GLOBAL_INDEX)");
    std::array<cudnnBackendNumericalNote_t, CUDNN_NUMERICAL_NOTE_TYPE_COUNT> notes{};
    check(cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                   static_cast<std::int64_t>(notes.size()), &n, notes.data()),
          "cudnnBackendGetAttribute(ENGINE_NUMERICAL_NOTE)");
    c.notes.assign(notes.begin(), notes.begin() + std::clamp<std::int64_t>(n, 0, notes.size()));
    std::array<cudnnBackendBehaviorNote_t, CUDNN_BEHAVIOR_NOTE_TYPE_COUNT> behavior{};
    check(cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                                   static_cast<std::int64_t>(behavior.size()), &n, behavior.data()),
          "cudnnBackendGetAttribute(ENGINE_BEHAVIOR_NOTE)");
    const auto end = behavior.begin() + std::clamp<std::int64_t>(n, 0, behavior.size());
    c.runtime_compiled = std::find(behavior.begin(), end, CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION) != end;
    return c;
}

}  // namespace

// A finalized execution plan and what it was chosen as.
class GraphConvPlan {
public:
    explicit GraphConvPlan(Backend plan) : plan_(std::move(plan)) {}
    cudnnBackendDescriptor_t get() const noexcept { return plan_.get(); }

private:
    Backend plan_;
};

namespace {

// The handle graphs and plans are built with: one per device for the
// process, so that a cached plan never outlives the handle it was made
// with (lanes' handles come and go with their backends). Lanes execute
// plans with their own handles, on their own streams.
cudnnHandle_t planning_handle() {
    static std::mutex mutex;
    static std::map<int, braid::cuda::CudnnHandle> handles;
    int device = 0;
    braid::cuda::check(cudaGetDevice(&device), "cudaGetDevice");
    std::lock_guard lock(mutex);
    auto it = handles.find(device);
    if (it == handles.end()) it = handles.emplace(device, braid::cuda::create_cudnn()).first;
    return it->second.get();
}

// The plan of `config`, or null with the finalize status when cuDNN cannot
// build it for this problem.
std::shared_ptr<GraphConvPlan> build_plan(cudnnHandle_t handle, const Backend& config, std::size_t& workspace,
                                          cudnnStatus_t& status) {
    Backend plan = make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    cudnnBackendDescriptor_t raw = config.get();
    set(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, &raw);
    set(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, &handle);
    status = cudnnBackendFinalize(plan.get());
    if (status != CUDNN_STATUS_SUCCESS) return nullptr;
    std::int64_t bytes = 0, n = 0;
    check(cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n,
                                   &bytes),
          "cudnnBackendGetAttribute(EXECUTION_PLAN_WORKSPACE_SIZE)");
    workspace = static_cast<std::size_t>(std::max<std::int64_t>(bytes, 0));
    return std::make_shared<GraphConvPlan>(std::move(plan));
}

cudnnStatus_t execute(cudnnHandle_t handle, const GraphConvPlan& plan, const void* x, const void* w, const void* y,
                      void* workspace) {
    cudnnBackendDescriptor_t pack = nullptr;
    cudnnStatus_t s = cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack);
    if (s != CUDNN_STATUS_SUCCESS) return s;
    const Backend owned(pack);
    const std::array<std::int64_t, 3> uids{x_uid, w_uid, y_uid};
    const std::array<void*, 3> data{const_cast<void*>(x), const_cast<void*>(w), const_cast<void*>(y)};
    if ((s = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids.data())) !=
            CUDNN_STATUS_SUCCESS ||
        (s = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3,
                                      data.data())) != CUDNN_STATUS_SUCCESS ||
        (s = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace)) !=
            CUDNN_STATUS_SUCCESS ||
        (s = cudnnBackendFinalize(pack)) != CUDNN_STATUS_SUCCESS)
        return s;
    return cudnnBackendExecute(handle, plan.get(), pack);
}

// Median time of `runs` executions after one untimed one; -1 when one fails.
float time_plan(cudnnHandle_t handle, cudaStream_t stream, const GraphConvPlan& plan, const GraphConvProblem& p) {
    constexpr int runs = 3;
    if (execute(handle, plan, p.x_data, p.w_data, p.y_data, p.workspace) != CUDNN_STATUS_SUCCESS) return -1.0f;
    const braid::cuda::Event start = braid::cuda::create_event(cudaEventDefault),
                             stop = braid::cuda::create_event(cudaEventDefault);
    std::array<float, runs> ms{};
    for (float& t : ms) {
        braid::cuda::check(cudaEventRecord(start.get(), stream), "cudaEventRecord");
        if (execute(handle, plan, p.x_data, p.w_data, p.y_data, p.workspace) != CUDNN_STATUS_SUCCESS) return -1.0f;
        braid::cuda::check(cudaEventRecord(stop.get(), stream), "cudaEventRecord");
        braid::cuda::check(cudaEventSynchronize(stop.get()), "cudaEventSynchronize");
        braid::cuda::check(cudaEventElapsedTime(&t, start.get(), stop.get()), "cudaEventElapsedTime");
    }
    std::sort(ms.begin(), ms.end());
    return ms[runs / 2];
}

}  // namespace

void prepare_graph_api() { (void)planning_handle(); }

ConvAlgorithm choose_conv_engine(cudnnHandle_t handle, cudaStream_t stream, ConvPass pass,
                                 const GraphConvProblem& problem, const LayerOptions& options,
                                 const std::string& layer, std::size_t budget) {
    static std::mutex choosing;  // one thread at a time on the planning handle
    std::lock_guard lock(choosing);
    const cudnnHandle_t planner = planning_handle();
    const Backend graph = operation_graph(planner, pass, problem);
    EngineSearch search(options, budget, options.search == AlgorithmSearch::find && problem.can_time());
    std::vector<Backend> configs;  // every list's, by candidate id
    std::vector<std::shared_ptr<GraphConvPlan>> plans;     // by candidate id, once built
    const EngineSearch::Build build = [&](std::size_t id) {
        EngineSearch::Built b;
        cudnnStatus_t status = CUDNN_STATUS_SUCCESS;
        plans[id] = build_plan(planner, configs[id], b.workspace_bytes, status);
        if (!plans[id]) {
            (void)cudaGetLastError();
            // NOT_SUPPORTED (3000-3999) is the engine declining the problem;
            // anything else (a bad parameter, say) is named in the message.
            b.failure = "its plan did not build: " + braid::cuda::status_text(status);
        }
        return b;
    };
    const EngineSearch::Time time = [&](std::size_t id) {
        const float ms = time_plan(handle, stream, *plans[id], problem);
        if (ms < 0.0f) (void)cudaGetLastError();
        return ms;
    };
    // The heuristics' list first; cuDNN's fallback engines when none of it may run.
    for (const cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
        if (search.choice()) break;
        std::vector<Backend> list;
        try {
            list = heuristic_configs(graph, mode);
        } catch (const braid::Error&) {
            if (mode == CUDNN_HEUR_MODE_A) throw;  // no fallback list: the error below says what A offered
        }
        std::vector<EngineCandidate> offered;
        for (Backend& config : list) {
            offered.push_back(describe_config(config));
            offered.back().id = configs.size();
            configs.push_back(std::move(config));
            plans.emplace_back();
        }
        search.offer(std::move(offered), build, time);
    }
    if (const std::optional<std::size_t> i = search.choice()) {
        const EngineCandidate& c = search.tried()[*i];
        ConvAlgorithm a;
        a.algo = static_cast<int>(c.engine);
        a.math = has(c, CUDNN_NUMERICAL_NOTE_TENSOR_CORE) ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;
        a.workspace_bytes = c.workspace_bytes;
        a.deterministic = !has(c, CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC);
        a.time_ms = c.time_ms;
        a.plan = plans[c.id];
        a.family = engine_notes_family(c.notes);
        return a;
    }
    const std::vector<EngineCandidate>& list = search.tried();
    std::ostringstream why;
    why << "layer '" << layer << "': cuDNN's graph API offers no " << to_string(pass) << " engine that may run ("
        << (options.deterministic ? "deterministic, " : "") << (options.tf32 ? "TF32 allowed" : "no TF32")
        << ", workspace budget " << budget << " bytes); " << list.size() << " candidates:";
    for (const EngineCandidate& c : list) {
        const std::string no = engine_rejection(c, options, budget);
        why << " " << describe(c) << ": " << (no.empty() ? "not tried" : no) << ";";
    }
    throw braid::Error(why.str());
}

void execute_conv_plan(cudnnHandle_t handle, const GraphConvPlan& plan, const void* x, const void* w,
                       const void* y, void* workspace) {
    check(execute(handle, plan, x, w, y, workspace), "cudnnBackendExecute");
}

}  // namespace braid::samples::cuda
