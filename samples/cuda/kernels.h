// The sample layers' own CUDA kernels (kernels.cu, compiled by nvcc with
// --fmad=false and no Boost), called from host code built by g++. Every
// launch function issues its kernels on `stream` (a KernelStream),
// allocates nothing and returns the launch status (cudaGetLastError), so it
// is safe inside CUDA graph capture.
//
// Views are NCHW float tensors in device memory, `images` images from
// `data` on (the first image of the range a body works on), `image_stride`
// floats apart: a channel slice of a concat buffer has a larger stride.
// The pools, batch norm, LRN and the bias kernels also take NHWC views
// (channels_last).
// Kernels that need the global image index (dropout masks, labels, data)
// take `first_image`. Where a kernel does what the reference CPU layer does
// with the same float operations in the same order, it gives the same bits
// (no FMA contraction): ReLU, add, dropout, gradient sum, SGD, data, the
// pools (forward in ceil mode, backward always), softmax backward, the FC
// bias gradient, batch-norm normalization given equal statistics. The
// per-element bodies are in kernel_bodies.hpp, where CPU tests run them.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "nn/channel_reduction.hpp"  // channel_slices
#include "nn/counter_hash.hpp"      // BRAID_SAMPLES_HOST_DEVICE

namespace braid::samples::cuda {

// Where the own kernels of a call go: the stream, and whether they are
// launched programmatically (programmatic dependent launch; the lane's
// CudaBackendOptions::programmatic_launch). Then a kernel may start while
// the stream's kernel before it finishes; every own kernel's blocks first
// wait (griddepcontrol.wait) until the kernels before it have completed and
// their writes are visible, so the results are those of a plain launch,
// bit for bit, and only the gap between the kernels shrinks. Every call
// says which (no conversion from a bare stream), so a layer cannot launch
// plainly by omission.
struct KernelStream {
    cudaStream_t stream = nullptr;
    bool programmatic = false;

    KernelStream(cudaStream_t s, bool p) noexcept : stream(s), programmatic(p) {}
};

// The PTX architecture the own kernels run as on the current device
// (cudaFuncAttributes::ptxVersion: 90 for compute_90). Their wait before
// the first instruction exists only from 90 on: built for older targets
// alone (meson option gpu_targets), they must not be launched
// programmatically.
cudaError_t own_kernels_ptx_version(int* version);

struct DeviceImages {
    float* data = nullptr;
    std::uint32_t images = 0;
    std::uint32_t c = 0, h = 0, w = 0;
    std::uint64_t image_stride = 0;

    BRAID_SAMPLES_HOST_DEVICE std::uint64_t image_elements() const noexcept { return std::uint64_t{c} * h * w; }
};

struct ConstDeviceImages {
    const float* data = nullptr;
    std::uint32_t images = 0;
    std::uint32_t c = 0, h = 0, w = 0;
    std::uint64_t image_stride = 0;

    ConstDeviceImages() noexcept = default;
    BRAID_SAMPLES_HOST_DEVICE ConstDeviceImages(const float* d, std::uint32_t n, std::uint32_t c_, std::uint32_t h_, std::uint32_t w_,
                      std::uint64_t stride) noexcept
        : data(d), images(n), c(c_), h(h_), w(w_), image_stride(stride) {}
    BRAID_SAMPLES_HOST_DEVICE ConstDeviceImages(const DeviceImages& v) noexcept  // NOLINT: a mutable view is also a const one
        : data(v.data), images(v.images), c(v.c), h(v.h), w(v.w), image_stride(v.image_stride) {}
    BRAID_SAMPLES_HOST_DEVICE std::uint64_t image_elements() const noexcept { return std::uint64_t{c} * h * w; }
};

// ------------------------------------------------------------ elementwise
cudaError_t launch_relu_forward(ConstDeviceImages x, DeviceImages y, KernelStream stream);
cudaError_t launch_relu_backward(ConstDeviceImages y, ConstDeviceImages dy, DeviceImages dx, KernelStream stream);
// y = a + b; with `relu`, max(a + b, 0) (a fused ReLU: AddReluOp).
cudaError_t launch_add(ConstDeviceImages a, ConstDeviceImages b, DeviceImages y, bool relu, KernelStream stream);
// y[n, c, :] += bias[c]; channels_last: y is NHWC (whole images).
cudaError_t launch_bias_add(DeviceImages y, const float* bias, KernelStream stream, bool channels_last = false);

struct DropoutArgs {
    std::uint64_t seed = 0;
    std::uint32_t layer = 0;          // the layer's ordinal (its LayerId), part of the stream tag
    std::uint32_t threshold = 0;      // of bits24
    float scale = 1.0f;               // 1 / (1 - ratio), in float
    std::uint32_t first_image = 0;    // global index of in.data's image
    const std::uint64_t* step = nullptr;  // device: the iteration
    bool channels_last = false;  // NHWC views: each element keeps the mask bit of its NCHW position
};
// out = keep ? in * scale : 0, the mask of nn/dropout.hpp.
cudaError_t launch_dropout(const DropoutArgs& args, ConstDeviceImages in, DeviceImages out, KernelStream stream);

constexpr std::uint32_t max_gradient_partials = 16;
// total = ((p0 + p1) + p2) + ...
cudaError_t launch_gradient_sum(const ConstDeviceImages* partials, std::uint32_t count, DeviceImages total,
                                KernelStream stream);

// ------------------------------------------------------------ pooling (own kernels: any rounding)
struct PoolArgs {
    bool max = true;
    std::uint32_t kernel_h = 0, kernel_w = 0, stride = 1, pad = 0;
    std::uint32_t in_h = 0, in_w = 0, out_h = 0, out_w = 0;
    // Views in NHWC (a pixel's channels adjacent) instead of NCHW. x and
    // dx hold whole images; y and dy may be channel slices of a concat's
    // buffer, whose pixels lie out_pixel_stride floats apart (its channel
    // count; 0: the views' own channel count, whole images).
    bool channels_last = false;
    std::uint32_t out_pixel_stride = 0;
};
cudaError_t launch_pool_forward(const PoolArgs& p, ConstDeviceImages x, DeviceImages y, KernelStream stream);
// Max: dy goes to the first position of each window whose x equals y;
// average: dy / (window clipped to the padded image). Gathered per input
// element over the windows in the reference's order, so deterministic and
// without atomics. Max pooling first finds each window's position once
// (one thread per output) into `argmax`, device scratch of
// pool_backward_scratch_bytes for dx's images; average pooling takes none
// (argmax may be null).
std::size_t pool_backward_scratch_bytes(const PoolArgs& p, std::uint32_t images, std::uint32_t channels);
cudaError_t launch_pool_backward(const PoolArgs& p, ConstDeviceImages x, ConstDeviceImages y, ConstDeviceImages dy,
                                 DeviceImages dx, std::int32_t* argmax, KernelStream stream);

// ------------------------------------------------------------ LRN (own kernels)
// Cross-channel LRN over whole images, NCHW or NHWC (channels_last), one
// thread per element with the reference's float expressions in its order
// (nn/lrn.cpp); only powf may differ from the CPU's in the last bits. The
// backward pass forms the scales it needs from x, so it needs no scratch.
// lrn_args (kernel_bodies.hpp) fills the constants.
struct LrnArgs {
    std::uint32_t size = 5;
    float alpha_over_size = 0.0f, beta = 0.75f, k = 1.0f, factor = 0.0f;
    bool channels_last = false;
};
cudaError_t launch_lrn_forward(const LrnArgs& a, ConstDeviceImages x, DeviceImages y, KernelStream stream);
cudaError_t launch_lrn_backward(const LrnArgs& a, ConstDeviceImages x, ConstDeviceImages y, ConstDeviceImages dy,
                                DeviceImages dx, KernelStream stream);

// ------------------------------------------------------------ layout copy
// out = in in the other layout, whole images of in's shape: NCHW to NHWC
// (to_channels_last) or NHWC to NCHW. A fully connected layer reads its
// NCHW-ordered features through it over NHWC activations.
cudaError_t launch_layout_copy(ConstDeviceImages in, DeviceImages out, bool to_channels_last, KernelStream stream);

// ------------------------------------------------------------ per-channel reductions
// Deterministic two-level reductions over (image, pixel) of each channel
// (grids from nn/channel_reduction.hpp, which the estimates share):
// `channel_slices` blocks per channel write partial sums in double to
// scratch, then one thread per channel (per block of the kernel that uses
// them, for the batch-norm statistics and dx) adds them in order. The partition
// (and the 16-byte width, from the views' alignment) depends on the views
// only, so every run and every lane gives the same bits.
// Scratch (bytes) the batch-norm and bias-gradient launches need.
std::size_t channel_reduction_scratch_bytes(std::uint32_t images, std::uint32_t c, std::uint32_t h, std::uint32_t w,
                                            bool channels_last = false);

// Batch norm over NHWC views (channels_last): the same statistics and
// expressions, computed as (1) partial sums per pixel slice and channel,
// a warp reading 32 adjacent channels of a pixel (kernel_bodies.hpp,
// channels_last_lanes), (2) one thread per channel adding them in slice
// order, (3) an elementwise pass over 4 channels of a pixel at a time.
// The partition depends on the shape only, so every run and every lane
// gives the same bits; they need not be the NCHW kernels' bits (another
// order of the double sums).
struct BatchNormArgs {
    float epsilon = 1e-5f;
    float momentum = 0.1f;
    bool relu = false;  // a fused ReLU on y
    bool channels_last = false;
};
cudaError_t launch_batch_norm_forward(const BatchNormArgs& a, ConstDeviceImages x, const float* gamma,
                                      const float* beta, DeviceImages y, float* saved_mean, float* saved_inv_std,
                                      float* running_mean, float* running_var, double* scratch, KernelStream stream);
// Where a batch norm with shared sums writes its weight gradient from
// backward_data (dgamma = sum dy * xhat, dbeta = sum dy, the bits
// launch_batch_norm_backward_weight writes); both null: dx only.
struct BatchNormSums {
    float* dgamma = nullptr;
    float* dbeta = nullptr;
};
// y: the output of a fused ReLU, whose mask applies to dy; y.data null
// without one. The sums' pass writes partials to scratch; the dx pass adds
// them per block, and its first block of each channel writes `sums`.
cudaError_t launch_batch_norm_backward_data(ConstDeviceImages x, ConstDeviceImages dy, ConstDeviceImages y,
                                            const float* gamma, const float* saved_mean, const float* saved_inv_std,
                                            BatchNormSums sums, DeviceImages dx, double* scratch, KernelStream stream,
                                            bool channels_last = false);
cudaError_t launch_batch_norm_backward_weight(ConstDeviceImages x, ConstDeviceImages dy, ConstDeviceImages y,
                                              const float* saved_mean, const float* saved_inv_std, float* dgamma,
                                              float* dbeta, double* scratch, KernelStream stream,
                                              bool channels_last = false);
// db[c] = sum of dy over images and pixels (a convolution's bias gradient);
// channels_last: dy is NHWC, summed as the NHWC batch norm sums (a warp
// reading 32 adjacent channels of a pixel), in another order than NCHW's.
cudaError_t launch_channel_sum(ConstDeviceImages dy, float* db, double* scratch, KernelStream stream,
                               bool channels_last = false);
// db[o] = sum over images of dy[n, o], in image order (a fully connected layer's bias gradient).
cudaError_t launch_feature_sum(ConstDeviceImages dy, float* db, KernelStream stream);

// ------------------------------------------------------------ softmax cross-entropy
// Per image (one block each): probabilities and the image's loss, in double
// as the reference does. labels and per_image_loss are indexed globally.
cudaError_t launch_softmax_loss_forward(ConstDeviceImages logits, const std::int32_t* labels, DeviceImages probabilities,
                                        float* per_image_loss, std::uint32_t first_image, KernelStream stream);
// loss = weight * sum(per_image_loss) / images, summed in image order.
cudaError_t launch_softmax_loss_sum(const float* per_image_loss, std::uint32_t images, float weight, float* loss,
                                    KernelStream stream);
// dlogits = scale * (p - onehot(label)), scale = weight / batch in float.
cudaError_t launch_softmax_loss_backward(ConstDeviceImages probabilities, const std::int32_t* labels,
                                         DeviceImages dlogits, float scale, std::uint32_t first_image,
                                         KernelStream stream);

// ------------------------------------------------------------ SGD
struct SgdTensor {
    float* param = nullptr;
    const float* grad = nullptr;
    float* velocity = nullptr;
    std::uint64_t elements = 0;
    bool decay = false;
};
constexpr std::uint32_t max_sgd_tensors = 64;  // a launch's; nn/sgd.hpp's sgd_tensors_per_launch
struct SgdArgs {
    float learning_rate = 0.01f;
    float momentum = 0.9f;
    float weight_decay = 5e-4f;
};
// One multi-tensor launch for up to max_sgd_tensors tensors (a layer's, or a
// bucket of layers'): each block updates one chunk of one tensor, with the
// expression of the reference, element by element, so any grouping of the
// tensors gives the same bits.
cudaError_t launch_sgd(const SgdArgs& a, const SgdTensor* tensors, std::uint32_t count, KernelStream stream);

// ------------------------------------------------------------ data and step
struct SyntheticDataArgs {
    std::uint64_t seed = 0;
    std::uint32_t classes = 0;
    std::uint64_t data_batches = 0;  // 0: the iteration is the step; else step mod data_batches
    std::uint32_t first_image = 0;
    const std::uint64_t* step = nullptr;  // device
    bool channels_last = false;  // the images' view is NHWC: each value goes where its (c, h, w) lies there
};
// Images and labels of train/synthetic_data.hpp; labels indexed globally.
cudaError_t launch_synthetic_data(const SyntheticDataArgs& a, DeviceImages images, std::int32_t* labels,
                                  KernelStream stream);
cudaError_t launch_advance_step(std::uint64_t* step, KernelStream stream);

}  // namespace braid::samples::cuda
