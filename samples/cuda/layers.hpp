// The sample layers on a GPU, over the same layer structs as the reference
// CPU functions (nn/), on TensorViews of device memory laid out as
// TrainingGraph says (NCHW floats; a concat branch is a strided channel
// slice). Every function issues its work on lane.stream with the lane's
// cuDNN/cuBLAS handles, workspaces and scratch, allocates no device memory
// (lane scratch excepted) and never synchronizes, so it can be captured in a
// CUDA graph. Splittable passes take the ImageRange of the body's part and
// touch only those images.
//
//   convolution       cuDNN forward / backward data / backward filter (the
//                     legacy calls, or the graph API's engines:
//                     LayerOptions::conv_api), an own bias-add and a
//                     deterministic bias-gradient reduction (NCHW or NHWC)
//   fully connected   cuBLAS GEMMs (cublasGemmEx), own bias kernels; over
//                     NHWC images an NCHW copy of x and dx in lane scratch
//   max/avg pooling   cuDNN where its floor rounding gives the layer's
//                     output size (and the divisor: count_include_pad),
//                     own kernels otherwise (GoogLeNet's ceil-mode pools)
//   LRN               cuDNN cross-channel LRN; own kernels over NHWC views
//   batch norm        own deterministic kernels (two-pass statistics in
//                     double, as the reference; see kernels.h), or cuDNN's
//                     (LayerOptions::batch_norm; CudaBatchNorm)
//   ReLU, dropout, add, softmax loss, SGD, gradient sums, data, step: own kernels
//
// Errors throw braid::Error (or braid::cuda::CudaError/LibraryError)
// naming the layer and the call.
#pragma once

#include <cublas_v2.h>
#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <utility>

#include "braid/cuda/backend.hpp"
#include "cuda/algorithms.hpp"
#include "cuda/cudnn_objects.hpp"
#include "cuda/kernels.h"
#include "nn/layers.hpp"
#include "nn/sgd.hpp"

namespace braid::samples::cuda {

using DeviceView = TensorView<float>;  // pointers into device memory
using ConstDeviceView = TensorView<const float>;

// How a kernel walks its views:
//   images        image by image; a view with a pixel stride (an NHWC
//                 channel slice) is refused, as the kernel could not say
//                 where its pixels lie;
//   pixel_rows    as rows of one pixel's channels: images x H x W rows of
//                 C floats, pixel_stride apart for an NHWC channel slice,
//                 C for whole images (elementwise work and NHWC batch
//                 norm, which do not care where a pixel lies);
//   pixel_stride  image by image, the caller passing the pixel stride on
//                 to the kernel (the pools' y and dy).
enum class Walk : std::uint8_t { images, pixel_rows, pixel_stride };
// pixel_rows when one of the views is an NHWC channel slice, else images.
Walk walk_for(std::initializer_list<ConstDeviceView> views);

// Images [range) of a view as a kernel argument, walked as `walk` says.
DeviceImages images_of(const DeviceView& v, ImageRange range, Walk walk = Walk::images);
ConstDeviceImages images_of(const ConstDeviceView& v, ImageRange range, Walk walk = Walk::images);

// Throws braid::cuda::CudaError naming `what` when a launch failed.
void check_launch(cudaError_t status, const std::string& what);

// Tensor descriptors by (images, c, h, w, image stride), made on first
// use, in one layout.
class DescriptorCache {
public:
    explicit DescriptorCache(TensorLayout layout = TensorLayout::nchw) noexcept : layout_(layout) {}
    cudnnTensorDescriptor_t get(std::uint32_t images, const Shape4& image_shape, std::uint64_t image_stride);

private:
    TensorLayout layout_;
    std::map<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t, std::uint32_t, std::uint64_t>, TensorDescriptor>
        descriptors_;
};

// ---------------------------------------------------------------- convolution
class CudaConv {
public:
    CudaConv(std::string name, const Conv2d& layer, const LayerOptions& options);

    void forward(CudaLane& lane, ConstDeviceView x, const float* weight, const float* bias, DeviceView y,
                 ImageRange images);
    void backward_data(CudaLane& lane, ConstDeviceView dy, const float* weight, DeviceView dx, ImageRange images);
    // dweight and dbias over the whole batch, overwritten.
    void backward_weight(CudaLane& lane, ConstDeviceView x, ConstDeviceView dy, float* dweight, float* dbias);

    const Conv2d& layer() const noexcept { return layer_; }
    // Lane scratch the bias gradient takes.
    std::size_t scratch_bytes() const;
    // Of the calls this layer has made so far (by pass, image count and
    // strides), how many run a legacy call although the options ask for the
    // graph API (the choice's note in AlgorithmCache says why).
    std::uint32_t legacy_fallbacks() const;
    // The engine family of the choice for `pass` over the most images a
    // call of it has run (ConvAlgorithm::family); nullopt before any has.
    std::optional<braid::ConvEngineFamily> engine_family(ConvPass pass) const;

private:
    // Where a choice may look: timed on buffers (workspace of `bytes`) or by heuristics.
    struct Search {
        bool can_time = false;
        void* workspace = nullptr;
        std::size_t bytes = 0;
        std::size_t budget = 0;  // the most workspace the choice may take
    };
    // The choice for a call, made once per problem (AlgorithmCache): by
    // `choose(Search)` the first time the process meets the problem.
    template <class Choose>
    const ConvAlgorithm& algorithm(CudaLane& lane, ConvPass pass, std::uint32_t images, std::uint64_t x_stride,
                                   std::uint64_t y_stride, std::int64_t alignment, Choose&& choose);
    // The choice for one call of `pass` (x, w, y: x or dx, w or dw, y or dy,
    // images [0, n) of the call; xd, yd their legacy descriptors): a legacy
    // algorithm, or with LayerOptions::conv_api graph an engine of the graph
    // API, and the legacy call where the graph API has none (noted).
    const ConvAlgorithm& choice(CudaLane& lane, ConvPass pass, std::uint32_t n, const float* x,
                                std::uint64_t x_stride, const float* w, const float* y, std::uint64_t y_stride,
                                cudnnTensorDescriptor_t xd, cudnnTensorDescriptor_t yd);
    // One library call of `pass` over n images, as choice() says.
    void run_pass(CudaLane& lane, ConvPass pass, std::uint32_t n, const float* x, std::uint64_t x_stride,
                  const float* w, const float* y, std::uint64_t y_stride);
    // The workspace a call with `a` runs in: the lane's cuDNN workspace, or
    // lane scratch when `a` wants more (an error naming the layer when the
    // lane cannot get it).
    std::pair<void*, std::size_t> workspace(CudaLane& lane, const ConvAlgorithm& a, const char* call) const;

    std::string name_;
    Conv2d layer_;
    LayerOptions options_;
    FilterDescriptor filter_;
    ConvDescriptor conv_;
    DescriptorCache tensors_;
    std::map<std::tuple<ConvPass, std::uint32_t, std::uint64_t, std::uint64_t, std::int64_t>, ConvAlgorithm> chosen_;
};

// ---------------------------------------------------------------- fully connected
class CudaFullyConnected {
public:
    CudaFullyConnected(std::string name, const FullyConnected& layer, const LayerOptions& options);

    void forward(CudaLane& lane, ConstDeviceView x, const float* weight, const float* bias, DeviceView y,
                 ImageRange images);
    void backward_data(CudaLane& lane, ConstDeviceView dy, const float* weight, DeviceView dx, ImageRange images);
    void backward_weight(CudaLane& lane, ConstDeviceView x, ConstDeviceView dy, float* dweight, float* dbias);

    const FullyConnected& layer() const noexcept { return layer_; }
    // Lane scratch for an NCHW copy of the input (reorders()), else 0.
    std::size_t scratch_bytes() const;

private:
    // Whether the input's features are NHWC-ordered while the weights'
    // columns are NCHW-ordered (NHWC activations of more than one pixel):
    // the passes then read x and write dx through an NCHW copy.
    bool reorders() const;
    DeviceView nchw_features(CudaLane& lane) const;
    // x, or its images [range) copied to NCHW in lane scratch.
    ConstDeviceView features(CudaLane& lane, ConstDeviceView x, ImageRange images, const std::string& who) const;

    std::string name_;
    FullyConnected layer_;
    LayerOptions options_;
};

// ---------------------------------------------------------------- pooling
class CudaPool {
public:
    // use_cudnn: false forces the own kernels (tests compare both). Views
    // are in options.layout; NHWC ones must be whole images.
    CudaPool(std::string name, const Pool2d& layer, const LayerOptions& options, bool use_cudnn = true);

    // Whether the forward runs on cuDNN (floor rounding fits) or own kernels.
    bool uses_cudnn() const noexcept { return static_cast<bool>(pooling_); }
    void forward(CudaLane& lane, ConstDeviceView x, DeviceView y, ImageRange images);
    // Own kernels, the reference's bits. Max pooling reads x, y, dy and
    // takes scratch_bytes() of lane scratch (for the whole batch); average
    // pooling reads dy only (x and y may be empty views).
    void backward_data(CudaLane& lane, ConstDeviceView x, ConstDeviceView y, ConstDeviceView dy, DeviceView dx,
                       ImageRange images);
    std::size_t scratch_bytes() const;

    const Pool2d& layer() const noexcept { return layer_; }

private:
    std::string name_;
    Pool2d layer_;
    LayerOptions options_;
    PoolArgs args_;
    PoolingDescriptor pooling_;
    DescriptorCache tensors_;
};

// The own pooling kernels' description of `layer`, for views in `layout`.
PoolArgs pool_args(const Pool2d& layer, TensorLayout layout = TensorLayout::nchw);

// Throws, naming `who`, when views in `layout` cannot be what their image
// strides say: NHWC views must be whole images (stride = elements), since a
// channel slice of an NHWC buffer has a pixel stride no view can carry.
void check_whole_images(TensorLayout layout, const std::string& who, std::uint64_t in_elements,
                        std::uint64_t in_stride, std::uint64_t out_elements, std::uint64_t out_stride);

// Whether cuDNN's pooling (floor rounding, count_include_pad) computes `layer` exactly.
bool cudnn_pooling_fits(const Pool2d& layer);

// ---------------------------------------------------------------- LRN
class CudaLrn {
public:
    CudaLrn(std::string name, const Lrn& layer, const LayerOptions& options);

    void forward(CudaLane& lane, ConstDeviceView x, DeviceView y, ImageRange images);
    void backward_data(CudaLane& lane, ConstDeviceView x, ConstDeviceView y, ConstDeviceView dy, DeviceView dx,
                       ImageRange images);

private:
    std::string name_;
    Lrn layer_;
    LayerOptions options_;
    LrnArgs own_;        // the own kernels' constants; they run NHWC views (own_.channels_last)
    LrnDescriptor lrn_;  // cuDNN's, for NCHW views
    DescriptorCache tensors_;
};

// ---------------------------------------------------------------- own kernels
void relu_forward(CudaLane& lane, const Relu& layer, ConstDeviceView x, DeviceView y, ImageRange images);
void relu_backward_data(CudaLane& lane, const Relu& layer, ConstDeviceView y, ConstDeviceView dy, DeviceView dx,
                        ImageRange images);

// Lane scratch the batch-norm passes take.
std::size_t batch_norm_scratch_bytes(const BatchNorm2d& layer, TensorLayout layout = TensorLayout::nchw);
// Views in `layout`; NHWC ones must be whole images (check_whole_images).
void batch_norm_forward_training(CudaLane& lane, const BatchNorm2d& layer, ConstDeviceView x, const float* gamma,
                                 const float* beta, DeviceView y, float* saved_mean, float* saved_inv_std,
                                 float* running_mean, float* running_var, TensorLayout layout = TensorLayout::nchw);
// y: the layer's output, read for a fused ReLU's mask (layer.config.relu); empty without.
void batch_norm_backward_data(CudaLane& lane, const BatchNorm2d& layer, ConstDeviceView x, ConstDeviceView dy,
                              const float* gamma, const float* saved_mean, const float* saved_inv_std, DeviceView dx,
                              ConstDeviceView y = {}, float* dgamma = nullptr, float* dbeta = nullptr,
                              TensorLayout layout = TensorLayout::nchw);
void batch_norm_backward_weight(CudaLane& lane, const BatchNorm2d& layer, ConstDeviceView x, ConstDeviceView dy,
                                const float* saved_mean, const float* saved_inv_std, float* dgamma, float* dbeta,
                                ConstDeviceView y = {}, TensorLayout layout = TensorLayout::nchw);

// A batch-norm layer on the kernels LayerOptions::batch_norm names. With
// own, the functions above. With cudnn:
//   forward          cudnnBatchNormalizationForwardTraining (spatial mode;
//                    exponential average factor = momentum, so the running
//                    statistics follow the reference's rule), then a fused
//                    ReLU as the own ReLU kernel in place on y;
//   backward data    a fused ReLU's mask applied to dy into lane scratch (a
//                    tensor's worth: it grows in the eager warm-up), then
//                    cudnnBatchNormalizationBackward; its dgamma and dbeta
//                    are the weight gradient with shared sums, else
//                    dropped (2 C floats of scratch);
//   backward weight  the own reduction, over cuDNN's saved statistics
//                    (cuDNN has no call for the weight gradient alone).
// A call cuDNN declines (a NOT_SUPPORTED status, or BAD_PARAM for tensors
// that are not packed), a backward whose x, dy and dx differ in layout, and
// a layer of one value per channel make that pass run on the own kernels
// from then on (a per-layer choice: every run makes the same), and note()
// says why; any other failure throws, naming the layer.
class CudaBatchNorm {
public:
    // How a cuDNN status is taken (host logic, tested without a GPU).
    enum class Answer : std::uint8_t { ran, declined, failed };
    static Answer answer(cudnnStatus_t status, bool packed) noexcept;
    // Why cuDNN's kernels cannot run a layer of this input at all; "" when they can.
    static std::string unfit(const Shape4& in);
    // Why cuDNN's backward cannot take views of these image strides; "" when it can.
    static std::string layout_conflict(std::uint64_t x_stride, std::uint64_t dy_stride, std::uint64_t dx_stride);

    CudaBatchNorm(std::string name, const BatchNorm2d& layer, const LayerOptions& options);

    void forward_training(CudaLane& lane, ConstDeviceView x, const float* gamma, const float* beta, DeviceView y,
                          float* saved_mean, float* saved_inv_std, float* running_mean, float* running_var);
    void backward_data(CudaLane& lane, ConstDeviceView x, ConstDeviceView dy, const float* gamma,
                       const float* saved_mean, const float* saved_inv_std, DeviceView dx, ConstDeviceView y = {},
                       float* dgamma = nullptr, float* dbeta = nullptr);
    void backward_weight(CudaLane& lane, ConstDeviceView x, ConstDeviceView dy, const float* saved_mean,
                         const float* saved_inv_std, float* dgamma, float* dbeta, ConstDeviceView y = {});

    const BatchNorm2d& layer() const noexcept { return layer_; }
    // Lane scratch every pass may take (a fused ReLU's mask for cuDNN aside).
    std::size_t scratch_bytes() const;
    // Passes (forward, backward data) on cuDNN's kernels now: 0 with own.
    std::uint32_t cudnn_passes() const noexcept;
    // Why a pass runs on the own kernels though cuDNN's were asked for; empty when none does.
    const std::string& note() const noexcept { return note_; }

private:
    // Whether `pass` may try cuDNN; false after it declined once.
    bool use_cudnn(int pass) const noexcept;
    // True for success; records a decline (NOT_SUPPORTED, or BAD_PARAM
    // for tensors not `packed`) and returns false; throws for other failures.
    bool accepted(cudnnStatus_t status, bool packed, int pass, const char* call);
    // `pass` runs on the own kernels from now on, for the reason `why`.
    void decline(int pass, const std::string& why);

    std::string name_;
    BatchNorm2d layer_;
    LayerOptions options_;
    TensorDescriptor channels_;  // 1 x C x 1 x 1: gamma, beta and the statistics
    DescriptorCache tensors_;
    bool declined_[2] = {false, false};  // forward, backward data
    std::string note_;
};

// `step` is the device's iteration counter (TrainingGraph::step). In NHWC
// each element keeps the mask bit of its NCHW position (the reference's).
void dropout_forward(CudaLane& lane, const Dropout& layer, std::uint64_t seed, std::uint32_t layer_id,
                     const std::uint64_t* step, ConstDeviceView x, DeviceView y, ImageRange images,
                     TensorLayout layout = TensorLayout::nchw);
void dropout_backward_data(CudaLane& lane, const Dropout& layer, std::uint64_t seed, std::uint32_t layer_id,
                           const std::uint64_t* step, ConstDeviceView dy, DeviceView dx, ImageRange images,
                           TensorLayout layout = TensorLayout::nchw);

void add_forward(CudaLane& lane, const Add& layer, ConstDeviceView a, ConstDeviceView b, DeviceView y,
                 ImageRange images);

// labels and per_image_loss are device arrays over the whole batch.
void softmax_loss_forward(CudaLane& lane, const SoftmaxCrossEntropy& layer, ConstDeviceView logits,
                          const std::int32_t* labels, DeviceView probabilities, float* per_image_loss,
                          ImageRange images);
void softmax_loss_sum(CudaLane& lane, const SoftmaxCrossEntropy& layer, const float* per_image_loss, float* loss);
void softmax_loss_backward_data(CudaLane& lane, const SoftmaxCrossEntropy& layer, ConstDeviceView probabilities,
                                const std::int32_t* labels, DeviceView dlogits, ImageRange images);

void gradient_sum(CudaLane& lane, std::span<const ConstDeviceView> partials, DeviceView total, ImageRange images);

// One layer's update: every tensor with its gradient and momentum.
void sgd_momentum_update(CudaLane& lane, const SgdConfig& config, std::span<const SgdTensorRef> tensors);

// Images and labels of train/synthetic_data.hpp for iteration *step (or
// *step mod data_batches when data_batches > 0); images in `layout`.
void synthetic_batch(CudaLane& lane, std::uint64_t seed, std::uint32_t classes, std::uint64_t data_batches,
                     const std::uint64_t* step, DeviceView images, std::int32_t* labels, ImageRange range,
                     TensorLayout layout = TensorLayout::nchw);
void advance_step(CudaLane& lane, std::uint64_t* step);

}  // namespace braid::samples::cuda
