#include "cuda/layers.hpp"

#include <algorithm>
#include <exception>
#include <limits>
#include <sstream>

#include "braid/cuda/cublas.hpp"
#include "braid/cuda/cudnn.hpp"
#include "braid/cuda/error.hpp"
#include "cuda/conv_engines.hpp"
#include "cuda/kernel_bodies.hpp"

namespace braid::samples::cuda {

namespace {

const float one = 1.0f;
const float zero = 0.0f;

Shape4 image_shape(const Shape4& s) { return Shape4{1, s.c, s.h, s.w}; }

int as_int(std::uint64_t v, const std::string& who, const char* what) {
    if (v > static_cast<std::uint64_t>(std::numeric_limits<int>::max()))
        throw braid::Error(who + ": " + what + " " + std::to_string(v) + " does not fit an int");
    return static_cast<int>(v);
}

// Calls f(range) per library call: once for the images, or per granule so
// that a split at multiples of the granule makes the calls of the whole batch.
template <class F>
void for_each_chunk(ImageRange images, std::uint32_t granule, std::uint32_t batch, const std::string& who, F&& f) {
    if (images.size() == 0) return;
    if (granule == 0) {
        f(images);
        return;
    }
    if (images.begin % granule != 0 || (images.end % granule != 0 && images.end != batch))
        throw braid::Error(who + ": images [" + std::to_string(images.begin) + ", " + std::to_string(images.end) +
                           ") do not fall on the split granule of " + std::to_string(granule) +
                           " images (LayerOptions::split_granule; see split_granule(plan))");
    for (std::uint32_t s = images.begin; s < images.end; s += granule)
        f(ImageRange{s, std::min(images.end, s + granule)});
}

// Lane scratch for a reduction's partial sums, as doubles.
double* scratch_doubles(CudaLane& lane, std::size_t bytes) {
    return static_cast<double*>(lane.scratch.allocate(std::max<std::size_t>(bytes, sizeof(double))));
}

bool capturing(cudaStream_t stream) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    braid::cuda::check(cudaStreamIsCapturing(stream, &status), "cudaStreamIsCapturing");
    return status != cudaStreamCaptureStatusNone;
}

// While alive (when `on`), this thread's stream-capture mode is relaxed:
// calls that strict capture forbids (allocation, module loading) are
// allowed and not captured. The mode before is restored after.
class RelaxedCapture {
public:
    explicit RelaxedCapture(bool on) : on_(on) {
        if (on_) braid::cuda::check(cudaThreadExchangeStreamCaptureMode(&mode_), "cudaThreadExchangeStreamCaptureMode");
    }
    ~RelaxedCapture() {
        if (on_) (void)cudaThreadExchangeStreamCaptureMode(&mode_);
    }
    RelaxedCapture(const RelaxedCapture&) = delete;
    RelaxedCapture& operator=(const RelaxedCapture&) = delete;

private:
    bool on_;
    cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
};

// " (F of T bytes free on the device)", or "" when the runtime cannot say.
std::string free_memory_note() {
    std::size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) != cudaSuccess) {
        (void)cudaGetLastError();
        return "";
    }
    return " (" + std::to_string(free) + " of " + std::to_string(total) + " bytes free on the device)";
}

// Where cudnnFind times the algorithms of a problem: a buffer of up to
// `bytes`, smaller when the device cannot give that much at once (down to
// none). Freed once the choice is made; never during capture.
braid::cuda::DeviceBuffer search_workspace(std::size_t bytes) {
    constexpr std::size_t smallest = std::size_t{1} << 20;
    for (; bytes >= smallest; bytes /= 2) {
        try {
            return braid::cuda::DeviceBuffer(bytes);
        } catch (const braid::cuda::CudaError& e) {
            if (e.code() != cudaErrorMemoryAllocation) throw;
            (void)cudaGetLastError();  // out of memory: a smaller buffer, and so a smaller budget
        }
    }
    return {};
}

}  // namespace

Walk walk_for(std::initializer_list<ConstDeviceView> views) {
    for (const ConstDeviceView& v : views)
        if (v.pixel_stride != 0) return Walk::pixel_rows;
    return Walk::images;
}

namespace {

template <class Images, class View>
Images walked_images(const View& v, ImageRange range, Walk walk) {
    const Shape4& s = v.shape;
    if (walk != Walk::pixel_rows) {
        if (walk == Walk::images && v.pixel_stride != 0)
            throw ShapeError("an NHWC channel slice (" + to_string(s) + ", pixels " + std::to_string(v.pixel_stride) +
                             " floats apart) reached a kernel that takes whole images only");
        return Images{v.image(range.begin), range.size(), s.c, s.h, s.w, v.image_stride};
    }
    if (v.pixel_stride == 0 && !v.contiguous() && range.size() > 1)
        throw ShapeError("an NCHW channel slice (" + to_string(s) + ", images " + std::to_string(v.image_stride) +
                         " floats apart) cannot be walked as rows of pixels");
    const std::uint64_t rows = std::uint64_t{range.size()} * s.plane_elements();
    if (rows > std::numeric_limits<std::uint32_t>::max())
        throw ShapeError("rows of pixels: " + std::to_string(rows) + " pixels of " + to_string(s) +
                         " are more than a launch counts");
    return Images{v.image(range.begin), static_cast<std::uint32_t>(rows), s.c, 1, 1,
                  v.pixel_stride != 0 ? v.pixel_stride : s.c};
}

}  // namespace

DeviceImages images_of(const DeviceView& v, ImageRange range, Walk walk) {
    return walked_images<DeviceImages>(v, range, walk);
}

ConstDeviceImages images_of(const ConstDeviceView& v, ImageRange range, Walk walk) {
    return walked_images<ConstDeviceImages>(v, range, walk);
}

// The own kernels of a body go on the lane's stream, programmatically when
// the backend says so (CudaBackendOptions::programmatic_launch); the
// libraries' kernels go as the libraries launch them.
namespace {
KernelStream own_kernels(const CudaLane& lane) { return {lane.stream, lane.programmatic_launch}; }
}  // namespace

void check_launch(cudaError_t status, const std::string& what) {
    if (status != cudaSuccess)
        throw braid::cuda::CudaError(status, "kernel launch",
                                     what + ": kernel launch failed: " + cudaGetErrorName(status) + " (" +
                                         cudaGetErrorString(status) + ")");
}

cudnnTensorDescriptor_t DescriptorCache::get(std::uint32_t images, const Shape4& s, std::uint64_t image_stride) {
    const auto key = std::make_tuple(images, s.c, s.h, s.w, image_stride);
    auto it = descriptors_.find(key);
    if (it == descriptors_.end())
        it = descriptors_.emplace(key, make_tensor_descriptor(images, s.c, s.h, s.w, image_stride, layout_)).first;
    return it->second.get();
}

// ---------------------------------------------------------------- convolution

CudaConv::CudaConv(std::string name, const Conv2d& layer, const LayerOptions& options)
    : name_(std::move(name)), layer_(layer), options_(options),
      filter_(make_filter_descriptor(layer.config.out_channels, layer.in.c / layer.config.groups, layer.config.kernel.h,
                                     layer.config.kernel.w, options.layout)),
      conv_(make_conv_descriptor(layer.config.pad.h, layer.config.pad.w, layer.config.stride, layer.config.groups)),
      tensors_(options.layout) {
    if (options_.conv_api == ConvApi::graph) prepare_graph_api();  // before any capture
}

std::size_t CudaConv::scratch_bytes() const {
    return layer_.config.bias ? channel_reduction_scratch_bytes(layer_.out.n, layer_.out.c, layer_.out.h, layer_.out.w,
                                                                options_.layout == TensorLayout::nhwc)
                              : 0;
}

std::uint32_t CudaConv::legacy_fallbacks() const {
    if (options_.conv_api != ConvApi::graph) return 0;
    std::uint32_t n = 0;
    for (const auto& [call, a] : chosen_) n += a.plan ? 0 : 1;
    return n;
}

std::optional<braid::ConvEngineFamily> CudaConv::engine_family(ConvPass pass) const {
    std::optional<braid::ConvEngineFamily> out;
    std::uint32_t most = 0;
    for (const auto& [call, a] : chosen_)
        if (std::get<0>(call) == pass && (!out || std::get<1>(call) > most)) {
            out = a.family;
            most = std::get<1>(call);
        }
    return out;
}

template <class Choose>
const ConvAlgorithm& CudaConv::algorithm(CudaLane& lane, ConvPass pass, std::uint32_t images, std::uint64_t x_stride,
                                         std::uint64_t y_stride, std::int64_t alignment, Choose&& choose) {
    const auto local = std::make_tuple(pass, images, x_stride, y_stride, alignment);
    if (auto it = chosen_.find(local); it != chosen_.end()) return it->second;
    const ConvConfig& c = layer_.config;
    std::ostringstream key;
    key << "conv " << to_string(pass) << " n=" << images << " x=" << layer_.in.c << "x" << layer_.in.h << "x"
        << layer_.in.w << "/" << x_stride << " k=" << c.out_channels << " rs=" << to_string(c.kernel) << " pad=" << to_string(c.pad)
        << " stride=" << c.stride << " groups=" << c.groups << " y/" << y_stride << (options_.tf32 ? " tf32" : " fp32")
        << (options_.deterministic ? " deterministic" : " any") << " ws<=" << options_.workspace_limit_bytes;
    if (options_.layout != TensorLayout::nchw) key << " " << to_string(options_.layout);
    if (options_.conv_api == ConvApi::graph) {
        int device = 0;  // a plan is built for one device
        braid::cuda::check(cudaGetDevice(&device), "cudaGetDevice");
        key << " graph-api align=" << alignment << " device=" << device;
    }
    AlgorithmCache& cache = AlgorithmCache::process();
    std::optional<ConvAlgorithm> a = cache.lookup(key.str());
    if (!a) {
        Search search{.budget = options_.workspace_limit_bytes};
        braid::cuda::DeviceBuffer buffer;
        // During capture nothing may run: cuDNN's heuristics choose instead,
        // and this thread's capture mode is relaxed while they do (building
        // a graph-API plan may load a module, which strict capture forbids).
        const bool in_capture = capturing(lane.stream);
        const RelaxedCapture relaxed(in_capture);
        if (options_.search == AlgorithmSearch::find && !in_capture) {
            std::size_t free = 0, total = 0;
            braid::cuda::check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
            buffer = search_workspace(workspace_budget(options_.workspace_limit_bytes, free));
            search = Search{true, buffer.get(), buffer.bytes(), buffer.bytes()};
        }
        const ConvAlgorithm chosen = choose(search);
        (void)cudaGetLastError();  // a search may leave a failed trial's status behind
        a = cache.insert(key.str(), chosen);
    }
    return chosen_.emplace(local, *a).first->second;
}

const ConvAlgorithm& CudaConv::choice(CudaLane& lane, ConvPass pass, std::uint32_t n, const float* x,
                                      std::uint64_t x_stride, const float* w, const float* y, std::uint64_t y_stride,
                                      cudnnTensorDescriptor_t xd, cudnnTensorDescriptor_t yd) {
    const bool graph = options_.conv_api == ConvApi::graph;
    const std::int64_t alignment = graph ? common_alignment({x, w, y}) : 0;
    return algorithm(lane, pass, n, x_stride, y_stride, alignment, [&](const Search& search) {
        const auto legacy = [&] {
            // The pass reads two of x, w, y and writes the third (the output, what cudnnFind times into).
            ConvProblem p{xd, filter_.get(), conv_.get(), yd};
            p.x_data = pass == ConvPass::backward_data ? nullptr : x;
            p.w_data = pass == ConvPass::backward_filter ? nullptr : w;
            p.y_data = pass == ConvPass::forward ? nullptr : y;
            p.out_data = const_cast<float*>(pass == ConvPass::forward         ? y
                                            : pass == ConvPass::backward_data ? x
                                                                              : w);
            if (!search.can_time) p.out_data = nullptr;  // heuristics
            p.workspace = search.workspace;
            p.workspace_bytes = search.bytes;
            return choose_conv_algorithm(lane.cudnn, pass, p, options_, name_, search.budget);
        };
        if (!graph) return legacy();
        const ConvConfig& c = layer_.config;
        GraphConvProblem p;
        p.x = activation_shape(n, layer_.in.c, layer_.in.h, layer_.in.w, x_stride, options_.layout);
        p.w = filter_shape(c.out_channels, layer_.in.c / c.groups, c.kernel.h, c.kernel.w, options_.layout);
        p.y = activation_shape(n, layer_.out.c, layer_.out.h, layer_.out.w, y_stride, options_.layout);
        p.pad = {c.pad.h, c.pad.w};
        p.stride = {c.stride, c.stride};
        p.alignment = alignment;
        if (search.can_time) {
            p.x_data = x;
            p.w_data = w;
            p.y_data = y;
            p.workspace = search.workspace;
            p.workspace_bytes = search.bytes;
        }
        try {
            return choose_conv_engine(lane.cudnn, lane.stream, pass, p, options_, name_, search.budget);
        } catch (const braid::cuda::CudaError&) {
            throw;  // the device failed: nothing to fall back to
        } catch (const braid::Error& e) {
            // No engine of the graph API may run this problem (or cuDNN
            // refused its graph): the legacy calls take it, and say so.
            (void)cudaGetLastError();
            ConvAlgorithm a = legacy();
            a.note = std::string("legacy call: the graph API gave none: ") + e.what();
            return a;
        }
    });
}

void CudaConv::run_pass(CudaLane& lane, ConvPass pass, std::uint32_t n, const float* x, std::uint64_t x_stride,
                        const float* w, const float* y, std::uint64_t y_stride) {
    check_whole_images(options_.layout, "convolution '" + name_ + "' " + std::string(to_string(pass)),
                       layer_.in.image_elements(), x_stride, layer_.out.image_elements(), y_stride);
    cudnnTensorDescriptor_t xd = tensors_.get(n, image_shape(layer_.in), x_stride);
    cudnnTensorDescriptor_t yd = tensors_.get(n, image_shape(layer_.out), y_stride);
    const ConvAlgorithm& a = choice(lane, pass, n, x, x_stride, w, y, y_stride, xd, yd);
    static constexpr const char* calls[] = {"cudnnConvolutionForward", "cudnnConvolutionBackwardData",
                                            "cudnnConvolutionBackwardFilter"};
    const auto [ws, ws_bytes] =
        workspace(lane, a, a.plan ? "cudnnBackendExecute" : calls[static_cast<std::size_t>(pass)]);
    if (a.plan) {
        execute_conv_plan(lane.cudnn, *a.plan, x, w, y, ws);
        return;
    }
    // conv_ is shared by every lane: setting its math type right before
    // the call is safe because CudaBackend issues every body from one thread.
    braid::cuda::check(cudnnSetConvolutionMathType(conv_.get(), a.math), "cudnnSetConvolutionMathType");
    float* out = const_cast<float*>(pass == ConvPass::forward ? y : pass == ConvPass::backward_data ? x : w);
    switch (pass) {
        case ConvPass::forward:
            braid::cuda::check(cudnnConvolutionForward(lane.cudnn, &one, xd, x, filter_.get(), w, conv_.get(),
                                                       static_cast<cudnnConvolutionFwdAlgo_t>(a.algo), ws, ws_bytes,
                                                       &zero, yd, out),
                               calls[0]);
            break;
        case ConvPass::backward_data:
            braid::cuda::check(cudnnConvolutionBackwardData(lane.cudnn, &one, filter_.get(), w, yd, y, conv_.get(),
                                                            static_cast<cudnnConvolutionBwdDataAlgo_t>(a.algo), ws,
                                                            ws_bytes, &zero, xd, out),
                               calls[1]);
            break;
        case ConvPass::backward_filter:
            braid::cuda::check(cudnnConvolutionBackwardFilter(lane.cudnn, &one, xd, x, yd, y, conv_.get(),
                                                              static_cast<cudnnConvolutionBwdFilterAlgo_t>(a.algo),
                                                              ws, ws_bytes, &zero, filter_.get(), out),
                               calls[2]);
            break;
    }
}

std::pair<void*, std::size_t> CudaConv::workspace(CudaLane& lane, const ConvAlgorithm& a, const char* call) const {
    if (a.workspace_bytes <= lane.cudnn_workspace_bytes) return {lane.cudnn_workspace, lane.cudnn_workspace_bytes};
    try {
        return {lane.scratch.allocate(a.workspace_bytes), a.workspace_bytes};
    } catch (const braid::Error& e) {
        // Nested, so that the cause (out of memory, say) stays visible to out_of_device_memory.
        std::throw_with_nested(braid::Error(
            "convolution '" + name_ + "': " + call + (a.plan ? " with engine " : " with algorithm ") +
            std::to_string(a.algo) + " needs " + std::to_string(a.workspace_bytes) +
            " bytes of cuDNN workspace, more than lane " + std::to_string(lane.index) + "'s own " +
            std::to_string(lane.cudnn_workspace_bytes) + ", and the lane's scratch cannot hold them: " + e.what() +
            free_memory_note()));
    }
}

void CudaConv::forward(CudaLane& lane, ConstDeviceView x, const float* weight, const float* bias, DeviceView y,
                       ImageRange images) {
    check_range(images, layer_.in, "CudaConv::forward");
    for_each_chunk(images, options_.split_granule, layer_.in.n, "convolution '" + name_ + "' forward",
                   [&](ImageRange r) {
        run_pass(lane, ConvPass::forward, r.size(), x.image(r.begin), x.image_stride, weight, y.image(r.begin),
                 y.image_stride);
        if (bias)
            check_launch(
                launch_bias_add(images_of(y, r), bias, own_kernels(lane), options_.layout == TensorLayout::nhwc),
                "convolution '" + name_ + "' bias");
    });
}

void CudaConv::backward_data(CudaLane& lane, ConstDeviceView dy, const float* weight, DeviceView dx,
                             ImageRange images) {
    check_range(images, layer_.in, "CudaConv::backward_data");
    for_each_chunk(images, options_.split_granule, layer_.in.n, "convolution '" + name_ + "' backward data",
                   [&](ImageRange r) {
        run_pass(lane, ConvPass::backward_data, r.size(), dx.image(r.begin), dx.image_stride, weight,
                 dy.image(r.begin), dy.image_stride);
    });
}

void CudaConv::backward_weight(CudaLane& lane, ConstDeviceView x, ConstDeviceView dy, float* dweight, float* dbias) {
    run_pass(lane, ConvPass::backward_filter, layer_.in.n, x.data, x.image_stride, dweight, dy.data, dy.image_stride);
    if (dbias) {
        double* scratch = scratch_doubles(lane, scratch_bytes());
        check_launch(launch_channel_sum(images_of(dy, whole_batch(layer_.out)), dbias, scratch, own_kernels(lane),
                                        options_.layout == TensorLayout::nhwc),
                     "convolution '" + name_ + "' bias gradient");
    }
}

// ---------------------------------------------------------------- fully connected

CudaFullyConnected::CudaFullyConnected(std::string name, const FullyConnected& layer, const LayerOptions& options)
    : name_(std::move(name)), layer_(layer), options_(options) {}

namespace {

// C (m x n, column-major) = op(A) op(B) with FP32 data; TF32 products when allowed.
void gemm(const CudaLane& lane, const LayerOptions& o, const std::string& who, cublasOperation_t ta,
          cublasOperation_t tb, std::uint64_t m, std::uint64_t n, std::uint64_t k, const float* a, std::uint64_t lda,
          const float* b, std::uint64_t ldb, float* c, std::uint64_t ldc) {
    const cublasComputeType_t compute = o.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    braid::cuda::check(cublasGemmEx(lane.cublas, ta, tb, as_int(m, who, "m"), as_int(n, who, "n"),
                                    as_int(k, who, "k"), &one, a, CUDA_R_32F, as_int(lda, who, "lda"), b, CUDA_R_32F,
                                    as_int(ldb, who, "ldb"), &zero, c, CUDA_R_32F, as_int(ldc, who, "ldc"), compute,
                                    CUBLAS_GEMM_DEFAULT),
                       "cublasGemmEx");
}

}  // namespace

bool CudaFullyConnected::reorders() const {
    return options_.layout == TensorLayout::nhwc && layer_.in.plane_elements() > 1;
}

std::size_t CudaFullyConnected::scratch_bytes() const {
    return reorders() ? layer_.in.elements() * sizeof(float) : 0;
}

DeviceView CudaFullyConnected::nchw_features(CudaLane& lane) const {
    return DeviceView::dense(static_cast<float*>(lane.scratch.allocate(scratch_bytes())), layer_.in);
}

ConstDeviceView CudaFullyConnected::features(CudaLane& lane, ConstDeviceView x, ImageRange images,
                                             const std::string& who) const {
    if (!reorders()) return x;
    const DeviceView copy = nchw_features(lane);
    check_launch(launch_layout_copy(images_of(x, images), images_of(copy, images), false, own_kernels(lane)),
                 who + " NHWC to NCHW");
    return copy;
}

// Row-major [images x features] activations are column-major [features x
// images] matrices with leading dimension image_stride; W [out][in] is
// column-major [in x out].
void CudaFullyConnected::forward(CudaLane& lane, ConstDeviceView x, const float* weight, const float* bias,
                                 DeviceView y, ImageRange images) {
    check_range(images, layer_.in, "CudaFullyConnected::forward");
    const std::string who = "fully connected '" + name_ + "' forward";
    const ConstDeviceView in = features(lane, x, images, who);
    for_each_chunk(images, options_.split_granule, layer_.in.n, who, [&](ImageRange r) {
        gemm(lane, options_, who, CUBLAS_OP_T, CUBLAS_OP_N, layer_.config.out_features, r.size(),
             layer_.in_features(), weight, layer_.in_features(), in.image(r.begin), in.image_stride,
             y.image(r.begin), y.image_stride);
        if (bias) check_launch(launch_bias_add(images_of(y, r), bias, own_kernels(lane)), who + " bias");
    });
}

void CudaFullyConnected::backward_data(CudaLane& lane, ConstDeviceView dy, const float* weight, DeviceView dx,
                                       ImageRange images) {
    check_range(images, layer_.in, "CudaFullyConnected::backward_data");
    const std::string who = "fully connected '" + name_ + "' backward data";
    const DeviceView out = reorders() ? nchw_features(lane) : dx;
    for_each_chunk(images, options_.split_granule, layer_.in.n, who, [&](ImageRange r) {
        gemm(lane, options_, who, CUBLAS_OP_N, CUBLAS_OP_N, layer_.in_features(), r.size(),
             layer_.config.out_features, weight, layer_.in_features(), dy.image(r.begin), dy.image_stride,
             out.image(r.begin), out.image_stride);
    });
    if (reorders())
        check_launch(launch_layout_copy(images_of(ConstDeviceView(out), images), images_of(dx, images), true,
                                        own_kernels(lane)),
                     who + " NCHW to NHWC");
}

void CudaFullyConnected::backward_weight(CudaLane& lane, ConstDeviceView x, ConstDeviceView dy, float* dweight,
                                         float* dbias) {
    const std::string who = "fully connected '" + name_ + "' backward weight";
    const ConstDeviceView in = features(lane, x, whole_batch(layer_.in), who);
    gemm(lane, options_, who, CUBLAS_OP_N, CUBLAS_OP_T, layer_.in_features(), layer_.config.out_features, layer_.in.n,
         in.data, in.image_stride, dy.data, dy.image_stride, dweight, layer_.in_features());
    if (dbias)
        check_launch(launch_feature_sum(images_of(dy, whole_batch(layer_.out)), dbias, own_kernels(lane)),
                     who + " bias");
}

// ---------------------------------------------------------------- pooling

bool cudnn_pooling_fits(const Pool2d& layer) {
    if (layer.config.global) return true;
    // In floor mode every window ends inside the padded image, so the
    // reference's divisor is kernel*kernel, cuDNN's count_include_pad.
    return pooled_size(layer.in.h, layer.kernel_h, layer.stride, layer.pad, false) == layer.out.h &&
           pooled_size(layer.in.w, layer.kernel_w, layer.stride, layer.pad, false) == layer.out.w;
}

void check_whole_images(TensorLayout layout, const std::string& who, std::uint64_t in_elements,
                        std::uint64_t in_stride, std::uint64_t out_elements, std::uint64_t out_stride) {
    // An NHWC slice of a concat buffer has a pixel stride of the whole
    // buffer's channels, which a view (one image stride) cannot say.
    if (layout == TensorLayout::nhwc && (in_stride != in_elements || out_stride != out_elements))
        throw braid::Error(who + ": NHWC activations must be whole tensors, not channel slices (image strides " +
                           std::to_string(in_stride) + " and " + std::to_string(out_stride) + " for images of " +
                           std::to_string(in_elements) + " and " + std::to_string(out_elements) + " floats)");
}

PoolArgs pool_args(const Pool2d& layer, TensorLayout layout) {
    PoolArgs a;
    a.max = layer.config.mode == PoolMode::max;
    a.kernel_h = layer.kernel_h;
    a.kernel_w = layer.kernel_w;
    a.stride = layer.stride;
    a.pad = layer.pad;
    a.in_h = layer.in.h;
    a.in_w = layer.in.w;
    a.out_h = layer.out.h;
    a.out_w = layer.out.w;
    a.channels_last = layout == TensorLayout::nhwc;
    return a;
}

CudaPool::CudaPool(std::string name, const Pool2d& layer, const LayerOptions& options, bool use_cudnn)
    : name_(std::move(name)),
      layer_(layer),
      options_(options),
      args_(pool_args(layer, options.layout)),
      tensors_(options.layout) {
    if (!use_cudnn || !cudnn_pooling_fits(layer)) return;
    cudnnPoolingDescriptor_t d = nullptr;
    braid::cuda::check(cudnnCreatePoolingDescriptor(&d), "cudnnCreatePoolingDescriptor");
    pooling_.reset(d);
    // Forward only (the backward is always the own kernels); the max is the same in either mode.
    const cudnnPoolingMode_t mode =
        args_.max ? CUDNN_POOLING_MAX_DETERMINISTIC : CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING;
    const std::string who = "pooling '" + name_ + "'";
    braid::cuda::check(cudnnSetPooling2dDescriptor(d, mode, CUDNN_PROPAGATE_NAN, as_int(layer.kernel_h, who, "window"),
                                                   as_int(layer.kernel_w, who, "window"), as_int(layer.pad, who, "pad"),
                                                   as_int(layer.pad, who, "pad"), as_int(layer.stride, who, "stride"),
                                                   as_int(layer.stride, who, "stride")),
                       "cudnnSetPooling2dDescriptor");
}

namespace {

// x and dx must be whole images; y and dy may be NHWC channel slices,
// whose pixel stride (0 for whole images) the own kernels take.
std::uint32_t pool_out_pixel_stride(const std::string& who, const Pool2d& layer, TensorLayout layout,
                                    const ConstDeviceView& in, const ConstDeviceView& out) {
    const std::uint64_t e = layer.out.image_elements();
    check_whole_images(layout, who, layer.in.image_elements(), in.image_stride, e,
                       out.pixel_stride != 0 ? e : out.image_stride);
    return static_cast<std::uint32_t>(out.pixel_stride);
}

}  // namespace

void CudaPool::forward(CudaLane& lane, ConstDeviceView x, DeviceView y, ImageRange images) {
    check_range(images, layer_.in, "CudaPool::forward");
    const std::string who = "pooling '" + name_ + "' forward";
    PoolArgs args = args_;
    args.out_pixel_stride = pool_out_pixel_stride(who, layer_, options_.layout, x, y);
    if (!pooling_ || args.out_pixel_stride != 0) {  // cuDNN's descriptors here say one image stride only
        check_launch(launch_pool_forward(args, images_of(x, images), images_of(y, images, Walk::pixel_stride),
                                         own_kernels(lane)),
                     who);
        return;
    }
    for_each_chunk(images, options_.split_granule, layer_.in.n, who, [&](ImageRange r) {
        cudnnTensorDescriptor_t xd = tensors_.get(r.size(), image_shape(layer_.in), x.image_stride);
        cudnnTensorDescriptor_t yd = tensors_.get(r.size(), image_shape(layer_.out), y.image_stride);
        braid::cuda::check(cudnnPoolingForward(lane.cudnn, pooling_.get(), &one, xd, x.image(r.begin), &zero, yd,
                                               y.image(r.begin)),
                           "cudnnPoolingForward");
    });
}

void CudaPool::backward_data(CudaLane& lane, ConstDeviceView x, ConstDeviceView y, ConstDeviceView dy, DeviceView dx,
                             ImageRange images) {
    check_range(images, layer_.in, "CudaPool::backward_data");
    const std::string who = "pooling '" + name_ + "' backward data";
    PoolArgs args = args_;
    args.out_pixel_stride = pool_out_pixel_stride(who, layer_, options_.layout, dx, dy);
    if (args_.max && pool_out_pixel_stride(who, layer_, options_.layout, x, y) != args.out_pixel_stride)
        throw ShapeError(who + ": y's pixels lie " + std::to_string(y.pixel_stride) + " floats apart and dy's " +
                         std::to_string(dy.pixel_stride) + "; the kernels take one stride for both");
    // Always the own kernels: cuDNN's deterministic max backward took 0.59
    // ms for ResNet-50's stem pool on the H200 (../shared/h200/resnet50-b32.profile.json), and it
    // reads x and y, which the average pool's op does not declare.
    std::int32_t* argmax = nullptr;
    if (args_.max)
        argmax = static_cast<std::int32_t*>(
            lane.scratch.allocate(std::max<std::size_t>(pool_backward_scratch_bytes(args_, images.size(), layer_.in.c),
                                                        sizeof(std::int32_t))));
    check_launch(launch_pool_backward(args, args_.max ? images_of(x, images) : ConstDeviceImages{},
                                      args_.max ? images_of(y, images, Walk::pixel_stride) : ConstDeviceImages{},
                                      images_of(dy, images, Walk::pixel_stride), images_of(dx, images), argmax,
                                      own_kernels(lane)),
                 who);
}

std::size_t CudaPool::scratch_bytes() const { return pool_backward_scratch_bytes(args_, layer_.in.n, layer_.in.c); }

// ---------------------------------------------------------------- LRN

CudaLrn::CudaLrn(std::string name, const Lrn& layer, const LayerOptions& options)
    : name_(std::move(name)), layer_(layer), options_(options) {
    const LrnConfig& c = layer.config;
    own_ = lrn_args(c.size, c.alpha, c.beta, c.k, options_.layout == TensorLayout::nhwc);
    if (own_.channels_last) return;  // cuDNN's LRN runs on NCHW views here
    if (c.size < CUDNN_LRN_MIN_N || c.size > CUDNN_LRN_MAX_N || c.k < CUDNN_LRN_MIN_K || c.beta < CUDNN_LRN_MIN_BETA)
        throw braid::Error("LRN '" + name_ + "': cuDNN takes sizes " + std::to_string(CUDNN_LRN_MIN_N) + ".." +
                           std::to_string(CUDNN_LRN_MAX_N) + ", k >= 1e-5 and beta >= 0.01; got size " +
                           std::to_string(c.size) + ", k " + std::to_string(c.k) + ", beta " + std::to_string(c.beta));
    cudnnLRNDescriptor_t d = nullptr;
    braid::cuda::check(cudnnCreateLRNDescriptor(&d), "cudnnCreateLRNDescriptor");
    lrn_.reset(d);
    // cuDNN divides alpha by the window size itself, as the reference does.
    braid::cuda::check(cudnnSetLRNDescriptor(d, c.size, c.alpha, c.beta, c.k), "cudnnSetLRNDescriptor");
}

void CudaLrn::forward(CudaLane& lane, ConstDeviceView x, DeviceView y, ImageRange images) {
    check_range(images, layer_.in, "CudaLrn::forward");
    if (own_.channels_last) {
        check_launch(launch_lrn_forward(own_, images_of(x, images), images_of(y, images), own_kernels(lane)),
                     "LRN '" + name_ + "' forward");
        return;
    }
    for_each_chunk(images, options_.split_granule, layer_.in.n, "LRN '" + name_ + "' forward", [&](ImageRange r) {
        cudnnTensorDescriptor_t xd = tensors_.get(r.size(), image_shape(layer_.in), x.image_stride);
        cudnnTensorDescriptor_t yd = tensors_.get(r.size(), image_shape(layer_.in), y.image_stride);
        braid::cuda::check(cudnnLRNCrossChannelForward(lane.cudnn, lrn_.get(), CUDNN_LRN_CROSS_CHANNEL_DIM1, &one, xd,
                                                       x.image(r.begin), &zero, yd, y.image(r.begin)),
                           "cudnnLRNCrossChannelForward");
    });
}

void CudaLrn::backward_data(CudaLane& lane, ConstDeviceView x, ConstDeviceView y, ConstDeviceView dy, DeviceView dx,
                            ImageRange images) {
    check_range(images, layer_.in, "CudaLrn::backward_data");
    if (own_.channels_last) {
        check_launch(launch_lrn_backward(own_, images_of(x, images), images_of(y, images), images_of(dy, images),
                                         images_of(dx, images), own_kernels(lane)),
                     "LRN '" + name_ + "' backward data");
        return;
    }
    for_each_chunk(images, options_.split_granule, layer_.in.n, "LRN '" + name_ + "' backward data",
                   [&](ImageRange r) {
        const std::uint32_t n = r.size();
        const Shape4 s = image_shape(layer_.in);
        braid::cuda::check(cudnnLRNCrossChannelBackward(
                               lane.cudnn, lrn_.get(), CUDNN_LRN_CROSS_CHANNEL_DIM1, &one,
                               tensors_.get(n, s, y.image_stride), y.image(r.begin),
                               tensors_.get(n, s, dy.image_stride), dy.image(r.begin),
                               tensors_.get(n, s, x.image_stride), x.image(r.begin), &zero,
                               tensors_.get(n, s, dx.image_stride), dx.image(r.begin)),
                           "cudnnLRNCrossChannelBackward");
    });
}

// ---------------------------------------------------------------- own kernels

void relu_forward(CudaLane& lane, const Relu& layer, ConstDeviceView x, DeviceView y, ImageRange images) {
    check_range(images, layer.in, "relu_forward");
    const Walk walk = walk_for({x, y});
    check_launch(launch_relu_forward(images_of(x, images, walk), images_of(y, images, walk), own_kernels(lane)),
                 "relu forward");
}

void relu_backward_data(CudaLane& lane, const Relu& layer, ConstDeviceView y, ConstDeviceView dy, DeviceView dx,
                        ImageRange images) {
    check_range(images, layer.in, "relu_backward_data");
    const Walk walk = walk_for({y, dy, dx});
    check_launch(launch_relu_backward(images_of(y, images, walk), images_of(dy, images, walk),
                                      images_of(dx, images, walk), own_kernels(lane)),
                 "relu backward data");
}

std::size_t batch_norm_scratch_bytes(const BatchNorm2d& layer, TensorLayout layout) {
    return channel_reduction_scratch_bytes(layer.in.n, layer.in.c, layer.in.h, layer.in.w,
                                           layout == TensorLayout::nhwc);
}

namespace {

// NHWC views must be whole images or NHWC channel slices (walked as rows
// of pixels): x, and `other` unless it is empty (no fused ReLU's y).
void check_batch_norm_views(TensorLayout layout, const BatchNorm2d& layer, const std::string& who, const ConstDeviceView& x,
                            const ConstDeviceView& other) {
    const std::uint64_t e = layer.in.image_elements();
    const auto stride = [e](const ConstDeviceView& v) {
        return v.data == nullptr || v.pixel_stride != 0 ? e : v.image_stride;
    };
    check_whole_images(layout, who, e, stride(x), e, stride(other));
}

}  // namespace

void batch_norm_forward_training(CudaLane& lane, const BatchNorm2d& layer, ConstDeviceView x, const float* gamma,
                                 const float* beta, DeviceView y, float* saved_mean, float* saved_inv_std,
                                 float* running_mean, float* running_var, TensorLayout layout) {
    check_batch_norm_views(layout, layer, "batch norm forward", x, y);
    double* scratch = scratch_doubles(lane, batch_norm_scratch_bytes(layer, layout));
    const BatchNormArgs args{layer.config.epsilon, layer.config.momentum, layer.config.relu,
                             layout == TensorLayout::nhwc};
    const ImageRange all = whole_batch(layer.in);
    const Walk walk = walk_for({x, y});
    check_launch(launch_batch_norm_forward(args, images_of(x, all, walk), gamma, beta, images_of(y, all, walk),
                                           saved_mean, saved_inv_std, running_mean, running_var, scratch,
                                           own_kernels(lane)),
                 "batch norm forward");
}

namespace {

// The fused ReLU's output as the kernels take it: none without one.
ConstDeviceImages relu_mask(const BatchNorm2d& layer, const ConstDeviceView& y, const char* who, Walk walk) {
    if (!layer.config.relu) return ConstDeviceImages{};
    if (y.data == nullptr) throw ShapeError(std::string(who) + ": the layer has a fused ReLU and needs its output");
    return images_of(y, whole_batch(layer.in), walk);
}

}  // namespace

void batch_norm_backward_data(CudaLane& lane, const BatchNorm2d& layer, ConstDeviceView x, ConstDeviceView dy,
                              const float* gamma, const float* saved_mean, const float* saved_inv_std, DeviceView dx,
                              ConstDeviceView y, float* dgamma, float* dbeta, TensorLayout layout) {
    check_shared_sums(layer, dgamma, dbeta);
    check_batch_norm_views(layout, layer, "batch norm backward data", x, dy);
    check_batch_norm_views(layout, layer, "batch norm backward data", dx, y);
    const BatchNormSums sums = layer.config.share_sums ? BatchNormSums{dgamma, dbeta} : BatchNormSums{};
    double* scratch = scratch_doubles(lane, batch_norm_scratch_bytes(layer, layout));
    const ImageRange all = whole_batch(layer.in);
    const Walk walk = walk_for({x, dy, dx, y});
    check_launch(launch_batch_norm_backward_data(images_of(x, all, walk), images_of(dy, all, walk),
                                                 relu_mask(layer, y, "batch norm backward data", walk), gamma,
                                                 saved_mean, saved_inv_std, sums, images_of(dx, all, walk), scratch,
                                                 own_kernels(lane), layout == TensorLayout::nhwc),
                 "batch norm backward data");
}

void batch_norm_backward_weight(CudaLane& lane, const BatchNorm2d& layer, ConstDeviceView x, ConstDeviceView dy,
                                const float* saved_mean, const float* saved_inv_std, float* dgamma, float* dbeta,
                                ConstDeviceView y, TensorLayout layout) {
    check_batch_norm_views(layout, layer, "batch norm backward weight", x, dy);
    check_batch_norm_views(layout, layer, "batch norm backward weight", x, y);
    double* scratch = scratch_doubles(lane, batch_norm_scratch_bytes(layer, layout));
    const ImageRange all = whole_batch(layer.in);
    const Walk walk = walk_for({x, dy, y});
    check_launch(launch_batch_norm_backward_weight(images_of(x, all, walk), images_of(dy, all, walk),
                                                   relu_mask(layer, y, "batch norm backward weight", walk), saved_mean,
                                                   saved_inv_std, dgamma, dbeta, scratch, own_kernels(lane),
                                                   layout == TensorLayout::nhwc),
                 "batch norm backward weight");
}

// ---------------------------------------------------------------- batch norm on cuDNN

namespace {

constexpr int bn_forward = 0, bn_backward_data = 1;
constexpr const char* nhwc_slice_reason =
    "a view is an NHWC channel slice of a concat, which a descriptor of one image stride cannot describe";
constexpr const char* bn_pass_names[] = {"forward", "backward data"};

TensorDescriptor channel_descriptor(std::uint32_t c) {
    cudnnTensorDescriptor_t d = nullptr;
    braid::cuda::check(cudnnCreateTensorDescriptor(&d), "cudnnCreateTensorDescriptor");
    TensorDescriptor owned(d);
    braid::cuda::check(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, static_cast<int>(c), 1, 1),
                       "cudnnSetTensor4dDescriptor");
    return owned;
}

}  // namespace

// Declined: cuDNN does not take the call as posed. NOT_SUPPORTED (3000-3999),
// or BAD_PARAM (2000-2999) for tensors that are not packed (cuDNN has
// answered strided batch-norm tensors so; PyTorch makes them contiguous
// before these calls).
CudaBatchNorm::Answer CudaBatchNorm::answer(cudnnStatus_t status, bool packed) noexcept {
    if (status == CUDNN_STATUS_SUCCESS) return Answer::ran;
    const int s = static_cast<int>(status);
    const auto in = [s](cudnnStatus_t family) { return s >= family && s < family + 1000; };
    return in(CUDNN_STATUS_NOT_SUPPORTED) || (!packed && in(CUDNN_STATUS_BAD_PARAM)) ? Answer::declined
                                                                                   : Answer::failed;
}

std::string CudaBatchNorm::unfit(const Shape4& in) {
    // cuDNN's running variance is unbiased: it would divide by n - 1 = 0 where the reference keeps the biased one.
    if (std::uint64_t{in.n} * in.plane_elements() <= 1)
        return "one value per channel, whose unbiased variance cuDNN cannot form";
    return "";
}

std::string CudaBatchNorm::layout_conflict(std::uint64_t x_stride, std::uint64_t dy_stride, std::uint64_t dx_stride) {
    // Its header: "same desc for x, dx, dy".
    if (x_stride == dy_stride && x_stride == dx_stride) return "";
    return "x, dy and dx are " + std::to_string(x_stride) + ", " + std::to_string(dy_stride) + " and " +
           std::to_string(dx_stride) + " floats per image, and cuDNN's backward takes one layout for the three";
}

CudaBatchNorm::CudaBatchNorm(std::string name, const BatchNorm2d& layer, const LayerOptions& options)
    : name_(std::move(name)), layer_(layer), options_(options), tensors_(options.layout) {
    if (options_.batch_norm == BatchNormKernels::cudnn) {
        as_int(layer_.in.c, "batch norm '" + name_ + "'", "channel count");
        channels_ = channel_descriptor(layer_.in.c);
        if (const std::string why = unfit(layer_.in); !why.empty()) {
            declined_[bn_forward] = declined_[bn_backward_data] = true;
            note_ = "batch norm '" + name_ + "': " + why + "; the own kernels run it";
        }
    }
}

std::size_t CudaBatchNorm::scratch_bytes() const {
    const std::size_t reduction = batch_norm_scratch_bytes(layer_, options_.layout);
    if (options_.batch_norm != BatchNormKernels::cudnn) return reduction;
    return std::max(reduction, 2 * std::size_t{layer_.in.c} * sizeof(float));  // dropped dgamma and dbeta
}

std::uint32_t CudaBatchNorm::cudnn_passes() const noexcept {
    if (options_.batch_norm != BatchNormKernels::cudnn) return 0;
    return (declined_[bn_forward] ? 0u : 1u) + (declined_[bn_backward_data] ? 0u : 1u);
}

bool CudaBatchNorm::use_cudnn(int pass) const noexcept {
    return options_.batch_norm == BatchNormKernels::cudnn && !declined_[pass];
}

bool CudaBatchNorm::accepted(cudnnStatus_t status, bool packed, int pass, const char* call) {
    const Answer a = answer(status, packed);
    if (a == Answer::ran) return true;
    const std::string what = "batch norm '" + name_ + "' " + bn_pass_names[pass] + ": " + call + " returned " +
                             braid::cuda::status_text(status);
    if (a == Answer::failed) throw braid::cuda::LibraryError(call, static_cast<int>(status), what);
    decline(pass, what);
    return false;
}

void CudaBatchNorm::decline(int pass, const std::string& why) {
    declined_[pass] = true;
    note_ += (note_.empty() ? "" : "; ") + why + "; the own kernels run it";
}

void CudaBatchNorm::forward_training(CudaLane& lane, ConstDeviceView x, const float* gamma, const float* beta,
                                     DeviceView y, float* saved_mean, float* saved_inv_std, float* running_mean,
                                     float* running_var) {
    const std::string who = "batch norm '" + name_ + "' forward";
    check_batch_norm_views(options_.layout, layer_, who, x, y);
    if (use_cudnn(bn_forward) && walk_for({x, y}) == Walk::pixel_rows)
        decline(bn_forward, who + ": " + nhwc_slice_reason);
    if (use_cudnn(bn_forward)) {
        const Shape4 s = image_shape(layer_.in);
        const cudnnStatus_t status = cudnnBatchNormalizationForwardTraining(
            lane.cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, tensors_.get(layer_.in.n, s, x.image_stride), x.data,
            tensors_.get(layer_.in.n, s, y.image_stride), y.data, channels_.get(), gamma, beta,
            static_cast<double>(layer_.config.momentum), running_mean, running_var,
            static_cast<double>(layer_.config.epsilon), saved_mean, saved_inv_std);
        if (accepted(status, x.contiguous() && y.contiguous(), bn_forward, "cudnnBatchNormalizationForwardTraining")) {
            if (layer_.config.relu) {
                const ImageRange all = whole_batch(layer_.in);
                check_launch(
                    launch_relu_forward(images_of(ConstDeviceView(y), all), images_of(y, all), own_kernels(lane)),
                    "batch norm '" + name_ + "' forward: fused ReLU");
            }
            return;
        }
    }
    batch_norm_forward_training(lane, layer_, x, gamma, beta, y, saved_mean, saved_inv_std, running_mean,
                                running_var, options_.layout);
}

void CudaBatchNorm::backward_data(CudaLane& lane, ConstDeviceView x, ConstDeviceView dy, const float* gamma,
                                  const float* saved_mean, const float* saved_inv_std, DeviceView dx,
                                  ConstDeviceView y, float* dgamma, float* dbeta) {
    const std::string who = "batch norm '" + name_ + "' backward data";
    check_batch_norm_views(options_.layout, layer_, who, x, dy);
    check_batch_norm_views(options_.layout, layer_, who, dx, y);
    if (use_cudnn(bn_backward_data) && walk_for({x, dy, dx, y}) == Walk::pixel_rows)
        decline(bn_backward_data, who + ": " + nhwc_slice_reason);
    if (use_cudnn(bn_backward_data)) {
        check_shared_sums(layer_, dgamma, dbeta);
        const ConstDeviceImages mask = relu_mask(layer_, y, "batch norm backward data", Walk::images);
        const Shape4 s = image_shape(layer_.in);
        const std::uint32_t n = layer_.in.n, c = layer_.in.c;
        ConstDeviceView gradient = dy;
        if (mask.data != nullptr) {  // dy where y > 0, packed
            auto* masked = static_cast<float*>(lane.scratch.allocate(layer_.in.elements() * sizeof(float)));
            const DeviceView m = DeviceView::dense(masked, layer_.in);
            const ImageRange all = whole_batch(layer_.in);
            check_launch(launch_relu_backward(mask, images_of(dy, all), images_of(m, all), own_kernels(lane)),
                         "batch norm '" + name_ + "' backward data: fused ReLU's mask");
            gradient = m;
        }
        if (!layer_.config.share_sums) {  // cuDNN writes them anyway; backward_weight gives the gradient
            dgamma = static_cast<float*>(lane.scratch.allocate(2 * std::size_t{c} * sizeof(float)));
            dbeta = dgamma + c;
        }
        if (const std::string why = layout_conflict(x.image_stride, gradient.image_stride, dx.image_stride);
            !why.empty()) {
            decline(bn_backward_data, "batch norm '" + name_ + "' backward data: " + why);
        } else {
            const cudnnTensorDescriptor_t d = tensors_.get(n, s, x.image_stride);
            const cudnnStatus_t status = cudnnBatchNormalizationBackward(
                lane.cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &zero, d, x.data, d, gradient.data, d,
                dx.data, channels_.get(), gamma, dgamma, dbeta, static_cast<double>(layer_.config.epsilon),
                saved_mean, saved_inv_std);
            if (accepted(status, x.contiguous(), bn_backward_data, "cudnnBatchNormalizationBackward")) return;
        }
        if (!layer_.config.share_sums) dgamma = dbeta = nullptr;
    }
    batch_norm_backward_data(lane, layer_, x, dy, gamma, saved_mean, saved_inv_std, dx, y, dgamma, dbeta,
                             options_.layout);
}

void CudaBatchNorm::backward_weight(CudaLane& lane, ConstDeviceView x, ConstDeviceView dy, const float* saved_mean,
                                    const float* saved_inv_std, float* dgamma, float* dbeta, ConstDeviceView y) {
    batch_norm_backward_weight(lane, layer_, x, dy, saved_mean, saved_inv_std, dgamma, dbeta, y, options_.layout);
}

namespace {
DropoutArgs dropout_args(const Dropout& layer, std::uint64_t seed, std::uint32_t layer_id, const std::uint64_t* step,
                         ImageRange images, TensorLayout layout) {
    DropoutArgs a;
    a.channels_last = layout == TensorLayout::nhwc;
    a.seed = seed;
    a.layer = layer_id;
    a.threshold = layer.threshold();
    a.scale = layer.scale();
    a.first_image = images.begin;
    a.step = step;
    return a;
}
}  // namespace

void dropout_forward(CudaLane& lane, const Dropout& layer, std::uint64_t seed, std::uint32_t layer_id,
                     const std::uint64_t* step, ConstDeviceView x, DeviceView y, ImageRange images,
                     TensorLayout layout) {
    check_range(images, layer.in, "dropout_forward");
    check_launch(launch_dropout(dropout_args(layer, seed, layer_id, step, images, layout), images_of(x, images),
                                images_of(y, images), own_kernels(lane)),
                 "dropout forward");
}

void dropout_backward_data(CudaLane& lane, const Dropout& layer, std::uint64_t seed, std::uint32_t layer_id,
                           const std::uint64_t* step, ConstDeviceView dy, DeviceView dx, ImageRange images,
                           TensorLayout layout) {
    check_range(images, layer.in, "dropout_backward_data");
    check_launch(launch_dropout(dropout_args(layer, seed, layer_id, step, images, layout), images_of(dy, images),
                                images_of(dx, images), own_kernels(lane)),
                 "dropout backward data");
}

void add_forward(CudaLane& lane, const Add& layer, ConstDeviceView a, ConstDeviceView b, DeviceView y,
                 ImageRange images) {
    check_range(images, layer.in, "add_forward");
    const Walk walk = walk_for({a, b, y});
    check_launch(launch_add(images_of(a, images, walk), images_of(b, images, walk), images_of(y, images, walk),
                            layer.relu, own_kernels(lane)),
                 "add forward");
}

void softmax_loss_forward(CudaLane& lane, const SoftmaxCrossEntropy& layer, ConstDeviceView logits,
                          const std::int32_t* labels, DeviceView probabilities, float* per_image_loss,
                          ImageRange images) {
    check_range(images, layer.in, "softmax_loss_forward");
    check_launch(launch_softmax_loss_forward(images_of(logits, images), labels, images_of(probabilities, images),
                                             per_image_loss, images.begin, own_kernels(lane)),
                 "softmax loss forward");
}

void softmax_loss_sum(CudaLane& lane, const SoftmaxCrossEntropy& layer, const float* per_image_loss, float* loss) {
    check_launch(launch_softmax_loss_sum(per_image_loss, layer.in.n, layer.config.weight, loss, own_kernels(lane)),
                 "softmax loss sum");
}

void softmax_loss_backward_data(CudaLane& lane, const SoftmaxCrossEntropy& layer, ConstDeviceView probabilities,
                                const std::int32_t* labels, DeviceView dlogits, ImageRange images) {
    check_range(images, layer.in, "softmax_loss_backward_data");
    const float scale = static_cast<float>(static_cast<double>(layer.config.weight) / layer.in.n);
    check_launch(launch_softmax_loss_backward(images_of(probabilities, images), labels, images_of(dlogits, images),
                                              scale, images.begin, own_kernels(lane)),
                 "softmax loss backward data");
}

void gradient_sum(CudaLane& lane, std::span<const ConstDeviceView> partials, DeviceView total, ImageRange images) {
    if (partials.empty()) throw ShapeError("gradient_sum: no partial gradients");
    if (partials.size() > max_gradient_partials)
        throw ShapeError("gradient_sum: " + std::to_string(partials.size()) + " partial gradients, the kernel adds at most " +
                         std::to_string(max_gradient_partials));
    check_range(images, total.shape, "gradient_sum");
    Walk walk = walk_for({total});
    for (const ConstDeviceView& p : partials)
        if (p.pixel_stride != 0) walk = Walk::pixel_rows;
    ConstDeviceImages parts[max_gradient_partials];
    for (std::size_t k = 0; k < partials.size(); ++k) {
        if (!(partials[k].shape == total.shape))
            throw ShapeError("gradient_sum: a partial gradient of shape " + to_string(partials[k].shape) +
                             " does not match the total " + to_string(total.shape));
        parts[k] = images_of(partials[k], images, walk);
    }
    check_launch(launch_gradient_sum(parts, static_cast<std::uint32_t>(partials.size()),
                                     images_of(total, images, walk), own_kernels(lane)),
                 "gradient sum");
}

void sgd_momentum_update(CudaLane& lane, const SgdConfig& config, std::span<const SgdTensorRef> tensors) {
    static_assert(max_sgd_tensors == sgd_tensors_per_launch, "the estimates count the launches made here");
    const SgdArgs args{config.learning_rate, config.momentum, config.weight_decay};
    for (std::size_t first = 0; first < tensors.size(); first += max_sgd_tensors) {
        SgdTensor batch[max_sgd_tensors];
        const std::size_t count = std::min<std::size_t>(max_sgd_tensors, tensors.size() - first);
        for (std::size_t k = 0; k < count; ++k) {
            const SgdTensorRef& t = tensors[first + k];
            batch[k] = SgdTensor{t.param, t.grad, t.momentum, t.elements, t.decay};
        }
        check_launch(launch_sgd(args, batch, static_cast<std::uint32_t>(count), own_kernels(lane)), "SGD update");
    }
}

void synthetic_batch(CudaLane& lane, std::uint64_t seed, std::uint32_t classes, std::uint64_t data_batches,
                     const std::uint64_t* step, DeviceView images, std::int32_t* labels, ImageRange range,
                     TensorLayout layout) {
    check_range(range, images.shape, "synthetic_batch");
    check_whole_images(layout, "synthetic data", images.shape.image_elements(), images.image_stride,
                       images.shape.image_elements(), images.image_stride);
    SyntheticDataArgs a;
    a.seed = seed;
    a.classes = classes;
    a.data_batches = data_batches;
    a.first_image = range.begin;
    a.step = step;
    a.channels_last = layout == TensorLayout::nhwc;
    check_launch(launch_synthetic_data(a, images_of(images, range), labels, own_kernels(lane)), "synthetic data");
}

void advance_step(CudaLane& lane, std::uint64_t* step) {
    check_launch(launch_advance_step(step, own_kernels(lane)), "step advance");
}

}  // namespace braid::samples::cuda
