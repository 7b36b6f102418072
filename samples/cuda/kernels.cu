// The sample layers' own kernels (see kernels.h). Compiled with --fmad=false:
// a*b+c stays two roundings, as on the CPU, so kernels that repeat the
// reference's float operations in its order give its bits.
#include "cuda/kernels.h"

#include <cstdint>
#include <initializer_list>
#include <type_traits>
#include <utility>

#include "cuda/kernel_bodies.hpp"

#include "nn/counter_hash.hpp"
#include "train/synthetic_data.hpp"

namespace braid::samples::cuda {

namespace {

constexpr unsigned threads = 256;
static_assert(threads == channel_block_threads, "the channel reductions' estimates (nn/launch.cpp) assume it");

unsigned blocks_for(std::uint64_t work) {
    const std::uint64_t b = (work + threads - 1) / threads;
    return static_cast<unsigned>(b < (1u << 22) ? b : (1u << 22));  // grid-stride loops cover the rest
}

// The first statement of every kernel here. Launched programmatically
// (KernelStream::programmatic), a kernel's blocks may start while the
// kernels before it in the stream still run: they wait here until those
// have completed and their writes are visible. Then they let the next
// programmatic launch start, whose blocks wait in turn, so that kernel's
// launch overlaps this one's run. Launched plainly, both are no-ops.
// Compiled for an architecture before 9.0 they are absent, and the host
// must not launch programmatically (own_kernels_ptx_version says which).
__device__ inline void await_previous_kernels() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    cudaGridDependencySynchronize();
    cudaTriggerProgrammaticLaunchCompletion();
#endif
}

// Launches `kernel` on s.stream, programmatically when s says so; the
// status is left for launched() (cudaGetLastError), as a triple-chevron launch's.
template <class... Params, class... Args>
void launch(void (*kernel)(Params...), dim3 grid, dim3 block, KernelStream s, Args&&... args) {
    cudaLaunchAttribute programmatic{};
    programmatic.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    programmatic.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config{};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = 0;
    config.stream = s.stream;
    config.attrs = s.programmatic ? &programmatic : nullptr;
    config.numAttrs = s.programmatic ? 1 : 0;
    (void)cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

__device__ inline std::uint64_t global_thread() {
    return std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
}
__device__ inline std::uint64_t grid_threads() { return std::uint64_t{gridDim.x} * blockDim.x; }

// ------------------------------------------------------------ elementwise

template <int V>
__global__ void relu_forward_kernel(UnitGrid g, ConstDeviceImages x, DeviceImages y) {
    await_previous_kernels();
    for (std::uint64_t u = global_thread(); u < g.units; u += grid_threads()) unary_unit<V>(ReluForwardOp{}, g, x, y, u);
}

template <int V>
__global__ void relu_backward_kernel(UnitGrid g, ConstDeviceImages y, ConstDeviceImages dy, DeviceImages dx) {
    await_previous_kernels();
    for (std::uint64_t u = global_thread(); u < g.units; u += grid_threads())
        binary_unit<V>(ReluBackwardOp{}, g, y, dy, dx, u);
}

template <int V, class Op>
__global__ void add_kernel(UnitGrid g, ConstDeviceImages a, ConstDeviceImages b, DeviceImages y) {
    await_previous_kernels();
    for (std::uint64_t u = global_thread(); u < g.units; u += grid_threads()) binary_unit<V>(Op{}, g, a, b, y, u);
}

__global__ void bias_add_kernel(DeviceImages y, const float* bias, std::uint64_t total) {
    await_previous_kernels();
    const std::uint64_t e = y.image_elements(), plane = std::uint64_t{y.h} * y.w;
    for (std::uint64_t t = global_thread(); t < total; t += grid_threads()) {
        const std::uint64_t n = quotient(t, e), i = t - n * e;
        float* p = y.data + n * y.image_stride + i;
        *p = *p + bias[quotient(i, plane)];
    }
}

template <int V>
__global__ void channels_last_bias_kernel(UnitGrid g, const float* bias, DeviceImages y) {
    await_previous_kernels();
    for (std::uint64_t u = global_thread(); u < g.units; u += grid_threads()) channels_last_bias_unit<V>(g, bias, y, u);
}

// ------------------------------------------------------------ LRN

__global__ void lrn_forward_kernel(LrnArgs a, ConstDeviceImages x, DeviceImages y, std::uint64_t total) {
    await_previous_kernels();
    for (std::uint64_t t = global_thread(); t < total; t += grid_threads()) lrn_forward_at(a, x, y, t);
}

__global__ void lrn_backward_kernel(LrnArgs a, ConstDeviceImages x, ConstDeviceImages y, ConstDeviceImages dy,
                                    DeviceImages dx, std::uint64_t total) {
    await_previous_kernels();
    for (std::uint64_t t = global_thread(); t < total; t += grid_threads()) lrn_backward_at(a, x, y, dy, dx, t);
}

__global__ void dropout_kernel(DropoutArgs a, ConstDeviceImages in, DeviceImages out, std::uint64_t total) {
    await_previous_kernels();
    const std::uint64_t e = in.image_elements(), plane = std::uint64_t{in.h} * in.w;
    const std::uint64_t iteration = *a.step;
    const std::uint64_t tag = stream_tag(RandomStream::dropout, a.layer);
    for (std::uint64_t t = global_thread(); t < total; t += grid_threads()) {
        const std::uint64_t n = quotient(t, e), i = t - n * e;
        const std::uint64_t element = (a.first_image + n) * e + nchw_element(i, in.c, plane, a.channels_last);
        const bool keep = bits24(counter_hash(a.seed, tag, iteration, element)) >= a.threshold;
        out.data[n * out.image_stride + i] = keep ? in.data[n * in.image_stride + i] * a.scale : 0.0f;
    }
}

template <int V>
__global__ void gradient_sum_kernel(GradientPartials p, UnitGrid g, DeviceImages total) {
    await_previous_kernels();
    for (std::uint64_t u = global_thread(); u < g.units; u += grid_threads()) gradient_sum_unit<V>(p, g, total, u);
}

// ------------------------------------------------------------ pooling

// CL: the views' layout, a constant here so that the NCHW kernels keep
// their unit pixel step (p.channels_last says the same at run time).
template <bool CL>
__global__ void pool_forward_kernel(PoolArgs p, ConstDeviceImages x, DeviceImages y, std::uint64_t total) {
    await_previous_kernels();
    p.channels_last = CL;
    for (std::uint64_t t = global_thread(); t < total; t += grid_threads())
        y.data[pool_output_offset(p, y.c, y.image_stride, t)] = pool_forward_at(p, x, t);
}

template <bool CL>
__global__ void pool_argmax_kernel(PoolArgs p, ConstDeviceImages x, ConstDeviceImages y, std::int32_t* argmax,
                                   std::uint64_t total) {
    await_previous_kernels();
    p.channels_last = CL;
    for (std::uint64_t t = global_thread(); t < total; t += grid_threads()) argmax[t] = pool_argmax_at(p, x, y, t);
}

template <bool CL>
__global__ void pool_backward_kernel(PoolArgs p, const std::int32_t* argmax, ConstDeviceImages dy, DeviceImages dx,
                                     std::uint64_t total) {
    await_previous_kernels();
    p.channels_last = CL;
    for (std::uint64_t t = global_thread(); t < total; t += grid_threads())
        dx.data[pool_input_offset(p, dx.c, dx.image_stride, t)] = pool_backward_at(p, argmax, dy, dx.c, t);
}

__global__ void layout_copy_kernel(ConstDeviceImages in, DeviceImages out, bool to_channels_last, std::uint64_t total) {
    await_previous_kernels();
    for (std::uint64_t t = global_thread(); t < total; t += grid_threads()) layout_copy_at(in, out, to_channels_last, t);
}

// ------------------------------------------------------------ per-channel reductions

// Sums of a block in a fixed tree order.
__device__ inline double block_sum(double v, double* shared) {
    shared[threadIdx.x] = v;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) shared[threadIdx.x] += shared[threadIdx.x + s];
        __syncthreads();
    }
    const double out = shared[0];
    __syncthreads();
    return out;
}

// The walk of channel blockIdx.y's share that this thread handles.
template <int V>
__device__ inline ChannelWalk<V> channel_walk(ConstDeviceImages x) {
    return ChannelWalk<V>(x.images, std::uint64_t{x.h} * x.w, blockIdx.x, gridDim.x, threadIdx.x, blockDim.x);
}

__device__ inline double ordered_sum(const double* partials, unsigned count) {
    double s = 0.0;
    for (unsigned k = 0; k < count; ++k) s += partials[k];
    return s;
}

template <int V>
__global__ void channel_sum_partials(ConstDeviceImages x, double* partials) {
    await_previous_kernels();
    __shared__ double shared[threads];
    const std::uint32_t c = blockIdx.y;
    const std::uint64_t plane = std::uint64_t{x.h} * x.w;
    double s = 0.0;
    for (ChannelWalk<V> it = channel_walk<V>(x); it.valid(); it.next()) {
        const Floats<V> v = load_floats<V>(x.data + it.at(x.image_stride, c, plane));
        for (int k = 0; k < V; ++k) s += static_cast<double>(v.v[k]);
    }
    s = block_sum(s, shared);
    if (threadIdx.x == 0) partials[std::uint64_t{c} * gridDim.x + blockIdx.x] = s;
}

// One pass over channel c's slice: sums of d and d*d, d = x - x[0, c, 0]
// in double (the shifted-data form of the variance, see channel_moments).
template <int V>
__global__ void channel_moments_partials(ConstDeviceImages x, double* sums, double* squares) {
    await_previous_kernels();
    __shared__ double shared[threads];
    const std::uint32_t c = blockIdx.y;
    const std::uint64_t plane = std::uint64_t{x.h} * x.w;
    const double shift = static_cast<double>(x.data[std::uint64_t{c} * plane]);
    double s = 0.0, q = 0.0;
    for (ChannelWalk<V> it = channel_walk<V>(x); it.valid(); it.next()) {
        const Floats<V> v = load_floats<V>(x.data + it.at(x.image_stride, c, plane));
        for (int k = 0; k < V; ++k) {
            const double d = static_cast<double>(v.v[k]) - shift;
            s += d;
            q += d * d;
        }
    }
    s = block_sum(s, shared);
    q = block_sum(q, shared);
    if (threadIdx.x == 0) {
        sums[std::uint64_t{c} * gridDim.x + blockIdx.x] = s;
        squares[std::uint64_t{c} * gridDim.x + blockIdx.x] = q;
    }
}

// Channel c's batch statistics from the moments' `slices` partials, in
// slice order (every block of the channel gets the same bits); the first
// slice's block also writes the saved and running statistics.
__device__ void batch_norm_statistics(const BatchNormArgs& a, ConstDeviceImages x, std::uint32_t c,
                                      std::uint32_t slices, bool write, const double* sums, const double* squares,
                                      float* saved_mean, float* saved_inv_std, float* running_mean,
                                      float* running_var, float& mean_out, float& inv_std_out) {
    const std::uint64_t plane = std::uint64_t{x.h} * x.w;
    const double count = static_cast<double>(x.images) * static_cast<double>(plane);
    const ChannelMoments m =
        channel_moments(static_cast<double>(x.data[channel_offset(c, plane, a.channels_last)]),
                        ordered_sum(sums + std::uint64_t{c} * slices, slices),
                        ordered_sum(squares + std::uint64_t{c} * slices, slices), count);
    mean_out = static_cast<float>(m.mean);
    inv_std_out = static_cast<float>(1.0 / sqrt(m.variance + static_cast<double>(a.epsilon)));
    if (!write) return;
    saved_mean[c] = mean_out;
    saved_inv_std[c] = inv_std_out;
    const double momentum = a.momentum;
    const double unbiased = count > 1.0 ? m.variance * count / (count - 1.0) : m.variance;
    running_mean[c] = static_cast<float>((1.0 - momentum) * static_cast<double>(running_mean[c]) + momentum * m.mean);
    running_var[c] = static_cast<float>((1.0 - momentum) * static_cast<double>(running_var[c]) + momentum * unbiased);
}

// The statistics (above, one thread per block), then y = gamma * xhat +
// beta over the block's slice; with `a.relu` the fused ReLU on the result
// (the same select as relu_forward_kernel). The grid is the moments'.
template <int V>
__global__ void batch_norm_normalize(BatchNormArgs a, ConstDeviceImages x, const double* sums,
                                     const double* squares, const float* gamma, const float* beta,
                                     float* saved_mean, float* saved_inv_std, float* running_mean,
                                     float* running_var, DeviceImages y) {
    await_previous_kernels();
    __shared__ float mean_shared, inv_std_shared;
    const std::uint32_t c = blockIdx.y;
    if (threadIdx.x == 0)
        batch_norm_statistics(a, x, c, gridDim.x, blockIdx.x == 0, sums, squares, saved_mean, saved_inv_std,
                              running_mean, running_var, mean_shared, inv_std_shared);
    __syncthreads();
    const std::uint64_t plane = std::uint64_t{x.h} * x.w;
    const float mean = mean_shared, inv_std = inv_std_shared, g = gamma[c], b = beta[c];
    for (ChannelWalk<V> it = channel_walk<V>(x); it.valid(); it.next()) {
        Floats<V> v = load_floats<V>(x.data + it.at(x.image_stride, c, plane));
        for (int k = 0; k < V; ++k) {
            const float n = g * ((v.v[k] - mean) * inv_std) + b;
            v.v[k] = a.relu ? ReluForwardOp{}(n) : n;
        }
        store_floats<V>(y.data + it.at(y.image_stride, c, plane), v);
    }
}

// dy at the normalisation's output: masked by a fused ReLU's output y (y.data
// set), as relu_backward_kernel masks it; dy itself without one.
template <int V>
__device__ Floats<V> normalized_gradient(ConstDeviceImages dy, ConstDeviceImages y, const ChannelWalk<V>& it,
                                         std::uint32_t c, std::uint64_t plane) {
    Floats<V> g = load_floats<V>(dy.data + it.at(dy.image_stride, c, plane));
    if (y.data != nullptr) {
        const Floats<V> yv = load_floats<V>(y.data + it.at(y.image_stride, c, plane));
        for (int k = 0; k < V; ++k) g.v[k] = ReluBackwardOp{}(yv.v[k], g.v[k]);
    }
    return g;
}

// sum(dy) and sum(dy * xhat) of channel c's slice; partials[0..C*S) and [C*S..2*C*S).
template <int V>
__global__ void batch_norm_backward_partials(ConstDeviceImages x, ConstDeviceImages dy, ConstDeviceImages y,
                                             const float* saved_mean, const float* saved_inv_std, double* partials) {
    await_previous_kernels();
    __shared__ double shared[threads];
    const std::uint32_t c = blockIdx.y;
    const std::uint64_t plane = std::uint64_t{x.h} * x.w;
    const float mean = saved_mean[c], inv_std = saved_inv_std[c];
    double s_dy = 0.0, s_dy_xhat = 0.0;
    for (ChannelWalk<V> it = channel_walk<V>(x); it.valid(); it.next()) {
        const Floats<V> xv = load_floats<V>(x.data + it.at(x.image_stride, c, plane));
        const Floats<V> gv = normalized_gradient<V>(dy, y, it, c, plane);
        for (int k = 0; k < V; ++k) {
            const float xhat = (xv.v[k] - mean) * inv_std;
            const double g = static_cast<double>(gv.v[k]);
            s_dy += g;
            s_dy_xhat += g * static_cast<double>(xhat);
        }
    }
    s_dy = block_sum(s_dy, shared);
    s_dy_xhat = block_sum(s_dy_xhat, shared);
    if (threadIdx.x == 0) {
        const std::uint64_t cs = std::uint64_t{gridDim.y} * gridDim.x;
        partials[std::uint64_t{c} * gridDim.x + blockIdx.x] = s_dy;
        partials[cs + std::uint64_t{c} * gridDim.x + blockIdx.x] = s_dy_xhat;
    }
}

// The channel sums from `partials` (gridDim.x slices per channel), in slice
// order; with `sums` the first block of each channel writes them as the
// weight gradient, as batch_norm_weight_gradients does.
template <int V>
__global__ void batch_norm_backward_dx(ConstDeviceImages x, ConstDeviceImages dy, ConstDeviceImages y,
                                       const float* gamma, const float* saved_mean, const float* saved_inv_std,
                                       const double* partials, BatchNormSums sums, DeviceImages dx) {
    await_previous_kernels();
    __shared__ float mean_dy, mean_dy_xhat;
    const std::uint32_t c = blockIdx.y;
    const std::uint64_t plane = std::uint64_t{x.h} * x.w;
    const double count = static_cast<double>(x.images) * static_cast<double>(plane);
    if (threadIdx.x == 0) {
        const std::uint64_t cs = std::uint64_t{gridDim.y} * gridDim.x;
        const double sum_dy = ordered_sum(partials + std::uint64_t{c} * gridDim.x, gridDim.x);
        const double sum_dy_xhat = ordered_sum(partials + cs + std::uint64_t{c} * gridDim.x, gridDim.x);
        mean_dy = static_cast<float>(sum_dy / count);
        mean_dy_xhat = static_cast<float>(sum_dy_xhat / count);
        if (sums.dgamma != nullptr && blockIdx.x == 0) {
            sums.dbeta[c] = static_cast<float>(sum_dy);
            sums.dgamma[c] = static_cast<float>(sum_dy_xhat);
        }
    }
    __syncthreads();
    const float mean = saved_mean[c], inv_std = saved_inv_std[c];
    const float scale = gamma[c] * inv_std;
    for (ChannelWalk<V> it = channel_walk<V>(x); it.valid(); it.next()) {
        const Floats<V> xv = load_floats<V>(x.data + it.at(x.image_stride, c, plane));
        Floats<V> gv = normalized_gradient<V>(dy, y, it, c, plane);
        for (int k = 0; k < V; ++k) {
            const float xhat = (xv.v[k] - mean) * inv_std;
            gv.v[k] = scale * (gv.v[k] - mean_dy - xhat * mean_dy_xhat);
        }
        store_floats<V>(dx.data + it.at(dx.image_stride, c, plane), gv);
    }
}

// ------------------------------------------------------------ batch norm over NHWC views

// The sum over a block's rows of each lane's value, in a fixed tree (the
// lane's total in every thread of the lane).
__device__ inline double rows_sum(double v, double* shared) {
    shared[threadIdx.x] = v;
    __syncthreads();
    const unsigned lane = threadIdx.x % channels_last_lanes, row = threadIdx.x / channels_last_lanes;
    for (unsigned s = channels_last_rows / 2; s > 0; s >>= 1) {
        if (row < s) shared[threadIdx.x] += shared[threadIdx.x + s * channels_last_lanes];
        __syncthreads();
    }
    const double out = shared[lane];
    __syncthreads();
    return out;
}

// This thread's pixels of the block's slice (see channels_last_lanes).
__device__ inline ChannelWalk<1> channels_last_walk(ConstDeviceImages x) {
    return ChannelWalk<1>(x.images, std::uint64_t{x.h} * x.w, blockIdx.x, gridDim.x,
                          threadIdx.x / channels_last_lanes, channels_last_rows);
}
__device__ inline std::uint32_t channels_last_channel() {
    return blockIdx.y * channels_last_lanes + threadIdx.x % channels_last_lanes;
}

// As channel_moments_partials: per (slice, channel) the sums of d and d*d,
// d = x - x[0, c, 0, 0], into sums[c * slices + slice] and squares.
// Without Moments (a bias gradient) only the sums, of x itself.
template <bool Moments>
__global__ void channels_last_partials(ConstDeviceImages x, double* sums, double* squares) {
    await_previous_kernels();
    static_assert(channels_last_lanes * channels_last_rows == threads, "a block is lanes x rows");
    __shared__ double shared[threads];
    const std::uint32_t c = channels_last_channel();
    double s = 0.0, q = 0.0;
    if (c < x.c) {
        const double shift = Moments ? static_cast<double>(x.data[c]) : 0.0;
        for (ChannelWalk<1> it = channels_last_walk(x); it.valid(); it.next()) {
            const double d = static_cast<double>(x.data[it.at_channels_last(x.image_stride, x.c, c)]) - shift;
            s += d;
            if (Moments) q += d * d;
        }
    }
    s = rows_sum(s, shared);
    if (Moments) q = rows_sum(q, shared);
    if (threadIdx.x < channels_last_lanes && c < x.c) {
        sums[std::uint64_t{c} * gridDim.x + blockIdx.x] = s;
        if (Moments) squares[std::uint64_t{c} * gridDim.x + blockIdx.x] = q;
    }
}

// One thread per channel: the statistics from the partials (saved and running).
__global__ void channels_last_statistics(BatchNormArgs a, ConstDeviceImages x, std::uint32_t slices,
                                         const double* sums, const double* squares, float* saved_mean,
                                         float* saved_inv_std, float* running_mean, float* running_var) {
    await_previous_kernels();
    const std::uint32_t c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= x.c) return;
    float mean = 0.0f, inv_std = 0.0f;
    batch_norm_statistics(a, x, c, slices, true, sums, squares, saved_mean, saved_inv_std, running_mean,
                          running_var, mean, inv_std);
}

template <int V>
__global__ void channels_last_normalize(ChannelsLastNormalize a, UnitGrid g, ConstDeviceImages x, DeviceImages y) {
    await_previous_kernels();
    for (std::uint64_t u = global_thread(); u < g.units; u += grid_threads()) batch_norm_normalize_unit<V>(a, g, x, y, u);
}

// As batch_norm_backward_partials: sum(dy) into partials[c * slices +
// slice], sum(dy * xhat) C * slices further on.
__global__ void channels_last_backward_partials(ConstDeviceImages x, ConstDeviceImages dy, ConstDeviceImages y,
                                                const float* saved_mean, const float* saved_inv_std,
                                                double* partials) {
    await_previous_kernels();
    __shared__ double shared[threads];
    const std::uint32_t c = channels_last_channel();
    double s_dy = 0.0, s_dy_xhat = 0.0;
    if (c < x.c) {
        const float mean = saved_mean[c], inv_std = saved_inv_std[c];
        for (ChannelWalk<1> it = channels_last_walk(x); it.valid(); it.next()) {
            const float xv = x.data[it.at_channels_last(x.image_stride, x.c, c)];
            float gv = dy.data[it.at_channels_last(dy.image_stride, x.c, c)];
            if (y.data != nullptr) gv = ReluBackwardOp{}(y.data[it.at_channels_last(y.image_stride, x.c, c)], gv);
            const float xhat = (xv - mean) * inv_std;
            const double g = static_cast<double>(gv);
            s_dy += g;
            s_dy_xhat += g * static_cast<double>(xhat);
        }
    }
    s_dy = rows_sum(s_dy, shared);
    s_dy_xhat = rows_sum(s_dy_xhat, shared);
    if (threadIdx.x < channels_last_lanes && c < x.c) {
        const std::uint64_t cs = std::uint64_t{x.c} * gridDim.x;
        partials[std::uint64_t{c} * gridDim.x + blockIdx.x] = s_dy;
        partials[cs + std::uint64_t{c} * gridDim.x + blockIdx.x] = s_dy_xhat;
    }
}

// One thread per channel: mean_dy and mean_dy_xhat (means[c], means[C + c])
// from the partials, in slice order; with `sums`, the weight gradient too.
__global__ void channels_last_backward_means(std::uint32_t channels, std::uint32_t slices, double count,
                                             const double* partials, float* means, BatchNormSums sums) {
    await_previous_kernels();
    const std::uint32_t c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= channels) return;
    const std::uint64_t cs = std::uint64_t{channels} * slices;
    const double sum_dy = ordered_sum(partials + std::uint64_t{c} * slices, slices);
    const double sum_dy_xhat = ordered_sum(partials + cs + std::uint64_t{c} * slices, slices);
    means[c] = static_cast<float>(sum_dy / count);
    means[channels + c] = static_cast<float>(sum_dy_xhat / count);
    if (sums.dgamma != nullptr) {
        sums.dbeta[c] = static_cast<float>(sum_dy);
        sums.dgamma[c] = static_cast<float>(sum_dy_xhat);
    }
}

template <int V>
__global__ void channels_last_dx(ChannelsLastBackward a, UnitGrid g, ConstDeviceImages x, ConstDeviceImages dy,
                                 ConstDeviceImages y, DeviceImages dx) {
    await_previous_kernels();
    for (std::uint64_t u = global_thread(); u < g.units; u += grid_threads())
        batch_norm_dx_unit<V>(a, g, x, dy, y, dx, u);
}

__global__ void batch_norm_weight_gradients(std::uint32_t channels, std::uint32_t slices, const double* partials,
                                            float* dgamma, float* dbeta) {
    await_previous_kernels();
    const std::uint32_t c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= channels) return;
    const std::uint64_t cs = std::uint64_t{channels} * slices;
    dbeta[c] = static_cast<float>(ordered_sum(partials + std::uint64_t{c} * slices, slices));
    dgamma[c] = static_cast<float>(ordered_sum(partials + cs + std::uint64_t{c} * slices, slices));
}

__global__ void channel_sum_finish(std::uint32_t channels, std::uint32_t slices, const double* partials, float* out) {
    await_previous_kernels();
    const std::uint32_t c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= channels) return;
    out[c] = static_cast<float>(ordered_sum(partials + std::uint64_t{c} * slices, slices));
}

__global__ void feature_sum_kernel(ConstDeviceImages dy, float* db) {
    await_previous_kernels();
    const std::uint64_t features = dy.image_elements();
    const std::uint64_t o = global_thread();
    if (o >= features) return;
    float s = 0.0f;
    for (std::uint32_t n = 0; n < dy.images; ++n) s += dy.data[n * dy.image_stride + o];
    db[o] = s;
}

// ------------------------------------------------------------ softmax cross-entropy

__global__ void softmax_loss_forward_kernel(ConstDeviceImages logits, const std::int32_t* labels,
                                            DeviceImages probabilities, float* per_image_loss,
                                            std::uint32_t first_image) {
    await_previous_kernels();
    __shared__ double shared[threads];
    __shared__ float zmax_shared;
    const std::uint32_t n = blockIdx.x;
    const std::uint64_t classes = logits.image_elements();
    const float* z = logits.data + n * logits.image_stride;
    float* p = probabilities.data + n * probabilities.image_stride;
    // The maximum does not depend on the order: a plain tree over floats.
    float m = -__int_as_float(0x7f800000);
    for (std::uint64_t c = threadIdx.x; c < classes; c += blockDim.x) m = m < z[c] ? z[c] : m;
    float* fshared = reinterpret_cast<float*>(shared);
    fshared[threadIdx.x] = m;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            const float other = fshared[threadIdx.x + s];
            fshared[threadIdx.x] = fshared[threadIdx.x] < other ? other : fshared[threadIdx.x];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) zmax_shared = fshared[0];
    __syncthreads();
    const double zmax = static_cast<double>(zmax_shared);
    double s = 0.0;
    for (std::uint64_t c = threadIdx.x; c < classes; c += blockDim.x) s += exp(static_cast<double>(z[c]) - zmax);
    const double sum = block_sum(s, shared);
    for (std::uint64_t c = threadIdx.x; c < classes; c += blockDim.x)
        p[c] = static_cast<float>(exp(static_cast<double>(z[c]) - zmax) / sum);
    if (threadIdx.x == 0) {
        const std::int32_t label = labels[first_image + n];
        per_image_loss[first_image + n] = static_cast<float>(log(sum) + zmax - static_cast<double>(z[label]));
    }
}

__global__ void softmax_loss_sum_kernel(const float* per_image_loss, std::uint32_t images, float weight, float* loss) {
    await_previous_kernels();
    double sum = 0.0;
    for (std::uint32_t n = 0; n < images; ++n) sum += static_cast<double>(per_image_loss[n]);
    *loss = static_cast<float>(static_cast<double>(weight) * sum / images);
}

__global__ void softmax_loss_backward_kernel(ConstDeviceImages p, const std::int32_t* labels, DeviceImages g,
                                             float scale, std::uint32_t first_image, std::uint64_t total) {
    await_previous_kernels();
    const std::uint64_t classes = p.image_elements();
    for (std::uint64_t t = global_thread(); t < total; t += grid_threads()) {
        const std::uint64_t n = quotient(t, classes), c = t - n * classes;
        const float onehot = static_cast<std::int64_t>(c) == labels[first_image + n] ? 1.0f : 0.0f;
        g.data[n * g.image_stride + c] = scale * (p.data[n * p.image_stride + c] - onehot);
    }
}

// ------------------------------------------------------------ SGD, data, step

__global__ void sgd_kernel(SgdArgs a, SgdBatch batch) {
    await_previous_kernels();
    const SgdChunk c = sgd_chunk_of(batch, blockIdx.x);
    const SgdTensor& s = batch.t[c.tensor];
    for (std::uint64_t i = c.begin + threadIdx.x; i < c.end; i += blockDim.x) sgd_element(a, s, i);
}

__global__ void synthetic_data_kernel(SyntheticDataArgs a, DeviceImages images, std::int32_t* labels,
                                      std::uint64_t total) {
    await_previous_kernels();
    const std::uint64_t e = images.image_elements(), plane = std::uint64_t{images.h} * images.w;
    const std::uint64_t step = *a.step;
    const std::uint64_t iteration = a.data_batches == 0 ? step : step % a.data_batches;
    for (std::uint64_t t = global_thread(); t < total; t += grid_threads()) {
        const std::uint64_t n = quotient(t, e), i = t - n * e;
        const std::uint32_t image = a.first_image + static_cast<std::uint32_t>(n);
        const std::int32_t label = synthetic_label(a.seed, a.classes, iteration, image);
        if (i == 0) labels[image] = label;
        images.data[n * images.image_stride + i] = synthetic_pixel(
            a.seed, iteration, image, label, nchw_element(i, images.c, plane, a.channels_last), e, plane);
    }
}

__global__ void advance_step_kernel(std::uint64_t* step) {
    await_previous_kernels();
    *step += 1;
}

cudaError_t launched() { return cudaGetLastError(); }

}  // namespace

namespace {

// The unit grid of an elementwise launch over `views` (the output last),
// and its vector width.
struct UnitLaunch {
    UnitGrid grid;
    int width;
};

// Calls f(std::integral_constant<int, V>) for the width `v` (4 or 1).
template <class F>
void with_width(int v, F&& f) {
    if (v == 4) f(std::integral_constant<int, 4>{});
    else f(std::integral_constant<int, 1>{});
}

// Calls f(std::bool_constant<CL>) for a pooling's layout.
template <class F>
void with_layout(const PoolArgs& p, F&& f) {
    if (p.channels_last) f(std::true_type{});
    else f(std::false_type{});
}

UnitLaunch unit_launch(std::uint32_t images, std::uint64_t image_elements,
                       std::initializer_list<ConstDeviceImages> views) {
    const int v = vector_width(image_elements, views);
    return {unit_grid(images, image_elements, v, contiguous(views)), v};
}

// Elementwise units over NHWC views: 4 channels of a pixel when the
// channel count and every view allow 16-byte units.
UnitLaunch channels_last_launch(ConstDeviceImages x, std::initializer_list<ConstDeviceImages> views) {
    const int v = x.c % 4 == 0 ? vector_width(x.image_elements(), views) : 1;
    return {unit_grid(x.images, x.image_elements(), v, contiguous(views)), v};
}

}  // namespace

cudaError_t launch_relu_forward(ConstDeviceImages x, DeviceImages y, KernelStream stream) {
    const UnitLaunch l = unit_launch(x.images, x.image_elements(), {x, y});
    if (l.grid.units == 0) return cudaSuccess;
    with_width(l.width, [&](auto w) {
        launch(relu_forward_kernel<decltype(w)::value>, blocks_for(l.grid.units), threads, stream, l.grid, x, y);
    });
    return launched();
}

cudaError_t launch_relu_backward(ConstDeviceImages y, ConstDeviceImages dy, DeviceImages dx, KernelStream stream) {
    const UnitLaunch l = unit_launch(y.images, y.image_elements(), {y, dy, dx});
    if (l.grid.units == 0) return cudaSuccess;
    with_width(l.width, [&](auto w) {
        launch(relu_backward_kernel<decltype(w)::value>, blocks_for(l.grid.units), threads, stream, l.grid, y, dy, dx);
    });
    return launched();
}

cudaError_t launch_add(ConstDeviceImages a, ConstDeviceImages b, DeviceImages y, bool relu, KernelStream stream) {
    const UnitLaunch l = unit_launch(a.images, a.image_elements(), {a, b, y});
    if (l.grid.units == 0) return cudaSuccess;
    with_width(l.width, [&](auto w) {
        constexpr int V = decltype(w)::value;
        if (relu)
            launch(add_kernel<V, AddReluOp>, blocks_for(l.grid.units), threads, stream, l.grid, a, b, y);
        else
            launch(add_kernel<V, AddOp>, blocks_for(l.grid.units), threads, stream, l.grid, a, b, y);
    });
    return launched();
}

cudaError_t launch_bias_add(DeviceImages y, const float* bias, KernelStream stream, bool channels_last) {
    const std::uint64_t total = std::uint64_t{y.images} * y.image_elements();
    if (total == 0) return cudaSuccess;
    if (channels_last) {
        const UnitLaunch l = channels_last_launch(y, {y});
        with_width(l.width, [&](auto w) {
            launch(channels_last_bias_kernel<decltype(w)::value>, blocks_for(l.grid.units), threads, stream, l.grid,
                   bias, y);
        });
        return launched();
    }
    launch(bias_add_kernel, blocks_for(total), threads, stream, y, bias, total);
    return launched();
}

cudaError_t launch_lrn_forward(const LrnArgs& a, ConstDeviceImages x, DeviceImages y, KernelStream stream) {
    const std::uint64_t total = std::uint64_t{x.images} * x.image_elements();
    if (total == 0) return cudaSuccess;
    launch(lrn_forward_kernel, blocks_for(total), threads, stream, a, x, y, total);
    return launched();
}

cudaError_t launch_lrn_backward(const LrnArgs& a, ConstDeviceImages x, ConstDeviceImages y, ConstDeviceImages dy,
                                DeviceImages dx, KernelStream stream) {
    const std::uint64_t total = std::uint64_t{x.images} * x.image_elements();
    if (total == 0) return cudaSuccess;
    launch(lrn_backward_kernel, blocks_for(total), threads, stream, a, x, y, dy, dx, total);
    return launched();
}

cudaError_t launch_layout_copy(ConstDeviceImages in, DeviceImages out, bool to_channels_last, KernelStream stream) {
    const std::uint64_t total = std::uint64_t{in.images} * in.image_elements();
    if (total == 0) return cudaSuccess;
    launch(layout_copy_kernel, blocks_for(total), threads, stream, in, out, to_channels_last, total);
    return launched();
}

cudaError_t launch_dropout(const DropoutArgs& args, ConstDeviceImages in, DeviceImages out, KernelStream stream) {
    const std::uint64_t total = std::uint64_t{in.images} * in.image_elements();
    if (total == 0) return cudaSuccess;
    launch(dropout_kernel, blocks_for(total), threads, stream, args, in, out, total);
    return launched();
}

cudaError_t launch_gradient_sum(const ConstDeviceImages* partials, std::uint32_t count, DeviceImages total,
                                KernelStream stream) {
    if (count == 0 || count > max_gradient_partials) return cudaErrorInvalidValue;
    GradientPartials p{};
    p.count = count;
    // Every partial has the total's shape; only data and stride differ.
    ConstDeviceImages views[max_gradient_partials + 1];
    for (std::uint32_t k = 0; k < count; ++k) {
        p.data[k] = partials[k].data;
        p.stride[k] = partials[k].image_stride;
        views[k] = ConstDeviceImages(partials[k].data, total.images, total.c, total.h, total.w,
                                     partials[k].image_stride);
    }
    views[count] = total;
    bool flat = true;
    int width = total.image_elements() % 4 == 0 ? 4 : 1;
    for (std::uint32_t k = 0; k <= count; ++k) {
        flat = flat && contiguous({views[k]});
        if (!allows_vector4(views[k].data, views[k].images, views[k].image_stride)) width = 1;
    }
    const UnitGrid g = unit_grid(total.images, total.image_elements(), width, flat);
    if (g.units == 0) return cudaSuccess;
    with_width(width, [&](auto w) {
        launch(gradient_sum_kernel<decltype(w)::value>, blocks_for(g.units), threads, stream, p, g, total);
    });
    return launched();
}

cudaError_t launch_pool_forward(const PoolArgs& p, ConstDeviceImages x, DeviceImages y, KernelStream stream) {
    const std::uint64_t total = std::uint64_t{x.images} * x.c * p.out_h * p.out_w;
    if (total == 0) return cudaSuccess;
    with_layout(p, [&](auto cl) {
        launch(pool_forward_kernel<decltype(cl)::value>, blocks_for(total), threads, stream, p, x, y, total);
    });
    return launched();
}

std::size_t pool_backward_scratch_bytes(const PoolArgs& p, std::uint32_t images, std::uint32_t channels) {
    return p.max ? std::size_t{images} * channels * p.out_h * p.out_w * sizeof(std::int32_t) : 0;
}

cudaError_t launch_pool_backward(const PoolArgs& p, ConstDeviceImages x, ConstDeviceImages y, ConstDeviceImages dy,
                                 DeviceImages dx, std::int32_t* argmax, KernelStream stream) {
    const std::uint64_t total = std::uint64_t{dx.images} * dx.c * p.in_h * p.in_w;
    if (total == 0) return cudaSuccess;
    if (p.max) {
        if (argmax == nullptr) return cudaErrorInvalidValue;
        const std::uint64_t outputs = std::uint64_t{dx.images} * dx.c * p.out_h * p.out_w;
        with_layout(p, [&](auto cl) {
            launch(pool_argmax_kernel<decltype(cl)::value>, blocks_for(outputs), threads, stream, p, x, y, argmax,
                   outputs);
        });
    }
    with_layout(p, [&](auto cl) {
        launch(pool_backward_kernel<decltype(cl)::value>, blocks_for(total), threads, stream, p, argmax, dy, dx, total);
    });
    return launched();
}

std::size_t channel_reduction_scratch_bytes(std::uint32_t images, std::uint32_t c, std::uint32_t h, std::uint32_t w,
                                            bool channels_last) {
    if (channels_last)  // the partials, then backward's two means per channel in float
        return 2 * std::size_t{c} * channels_last_slices(images, c, h, w) * sizeof(double) +
               2 * std::size_t{c} * sizeof(float);
    return 2 * std::size_t{c} * channel_slices(images, h, w) * sizeof(double);
}

namespace {

cudaError_t channels_last_forward(const BatchNormArgs& a, ConstDeviceImages x, const float* gamma, const float* beta,
                                  DeviceImages y, float* saved_mean, float* saved_inv_std, float* running_mean,
                                  float* running_var, double* scratch, KernelStream stream) {
    const std::uint32_t s = channels_last_slices(x.images, x.c, x.h, x.w);
    double* sums = scratch;
    double* squares = scratch + std::size_t{x.c} * s;
    launch(channels_last_partials<true>, dim3(s, channels_last_groups(x.c)), threads, stream, x, sums, squares);
    launch(channels_last_statistics, channel_finish_blocks(x.c), channel_finish_threads, stream, a, x, s, sums, squares,
           saved_mean, saved_inv_std, running_mean, running_var);
    const UnitLaunch l = channels_last_launch(x, {x, y});
    const ChannelsLastNormalize n{saved_mean, saved_inv_std, gamma, beta, a.relu};
    with_width(l.width, [&](auto w) {
        launch(channels_last_normalize<decltype(w)::value>, blocks_for(l.grid.units), threads, stream, n, l.grid, x, y);
    });
    return launched();
}

}  // namespace

cudaError_t launch_batch_norm_forward(const BatchNormArgs& a, ConstDeviceImages x, const float* gamma,
                                      const float* beta, DeviceImages y, float* saved_mean, float* saved_inv_std,
                                      float* running_mean, float* running_var, double* scratch, KernelStream stream) {
    if (x.images == 0 || x.c == 0) return cudaSuccess;
    if (a.channels_last)
        return channels_last_forward(a, x, gamma, beta, y, saved_mean, saved_inv_std, running_mean, running_var,
                                     scratch, stream);
    const std::uint32_t s = channel_slices(x.images, x.h, x.w);
    const dim3 grid(s, x.c);
    double* sums = scratch;
    double* squares = scratch + std::size_t{x.c} * s;
    with_width(channel_vector_width(std::uint64_t{x.h} * x.w, {x, y}), [&](auto w) {
        constexpr int V = decltype(w)::value;
        launch(channel_moments_partials<V>, grid, threads, stream, x, sums, squares);
        launch(batch_norm_normalize<V>, grid, threads, stream, a, x, sums, squares, gamma, beta, saved_mean,
               saved_inv_std, running_mean, running_var, y);
    });
    return launched();
}

cudaError_t launch_batch_norm_backward_data(ConstDeviceImages x, ConstDeviceImages dy, ConstDeviceImages y,
                                            const float* gamma, const float* saved_mean, const float* saved_inv_std,
                                            BatchNormSums sums, DeviceImages dx, double* scratch,
                                            KernelStream stream, bool channels_last) {
    if (x.images == 0 || x.c == 0) return cudaSuccess;
    if ((sums.dgamma == nullptr) != (sums.dbeta == nullptr) || scratch == nullptr) return cudaErrorInvalidValue;
    if (channels_last) {
        const std::uint32_t s = channels_last_slices(x.images, x.c, x.h, x.w);
        launch(channels_last_backward_partials, dim3(s, channels_last_groups(x.c)), threads, stream, x, dy, y,
               saved_mean, saved_inv_std, scratch);
        auto* means = reinterpret_cast<float*>(scratch + 2 * std::size_t{x.c} * s);
        const double count = static_cast<double>(x.images) * static_cast<double>(std::uint64_t{x.h} * x.w);
        launch(channels_last_backward_means, channel_finish_blocks(x.c), channel_finish_threads, stream, x.c, s, count,
               scratch, means, sums);
        const UnitLaunch l = channels_last_launch(x, {x, dy, y, dx});
        const ChannelsLastBackward b{gamma, saved_mean, saved_inv_std, means, means + x.c};
        with_width(l.width, [&](auto w) {
            launch(channels_last_dx<decltype(w)::value>, blocks_for(l.grid.units), threads, stream, b, l.grid, x, dy, y,
                   dx);
        });
        return launched();
    }
    const dim3 grid(channel_slices(x.images, x.h, x.w), x.c);
    const std::uint64_t plane = std::uint64_t{x.h} * x.w;
    // The sums walk with the width backward_weight's walk has (it reads the
    // same views), so shared sums get its bits whatever dx's alignment.
    with_width(channel_vector_width(plane, {x, dy, y}), [&](auto w) {
        launch(batch_norm_backward_partials<decltype(w)::value>, grid, threads, stream, x, dy, y, saved_mean,
               saved_inv_std, scratch);
    });
    with_width(channel_vector_width(plane, {x, dy, dx, y}), [&](auto w) {
        launch(batch_norm_backward_dx<decltype(w)::value>, grid, threads, stream, x, dy, y, gamma, saved_mean,
               saved_inv_std, scratch, sums, dx);
    });
    return launched();
}

cudaError_t launch_batch_norm_backward_weight(ConstDeviceImages x, ConstDeviceImages dy, ConstDeviceImages y,
                                              const float* saved_mean, const float* saved_inv_std, float* dgamma,
                                              float* dbeta, double* scratch, KernelStream stream,
                                              bool channels_last) {
    if (x.images == 0 || x.c == 0) return cudaSuccess;
    if (channels_last) {
        const std::uint32_t s = channels_last_slices(x.images, x.c, x.h, x.w);
        launch(channels_last_backward_partials, dim3(s, channels_last_groups(x.c)), threads, stream, x, dy, y,
               saved_mean, saved_inv_std, scratch);
        launch(batch_norm_weight_gradients, channel_finish_blocks(x.c), channel_finish_threads, stream, x.c, s, scratch,
               dgamma, dbeta);
        return launched();
    }
    const std::uint32_t s = channel_slices(x.images, x.h, x.w);
    with_width(channel_vector_width(std::uint64_t{x.h} * x.w, {x, dy, y}), [&](auto w) {
        constexpr int V = decltype(w)::value;
        launch(batch_norm_backward_partials<V>, dim3(s, x.c), threads, stream, x, dy, y, saved_mean, saved_inv_std,
               scratch);
    });
    launch(batch_norm_weight_gradients, channel_finish_blocks(x.c), channel_finish_threads, stream, x.c, s, scratch,
           dgamma, dbeta);
    return launched();
}

cudaError_t launch_channel_sum(ConstDeviceImages dy, float* db, double* scratch, KernelStream stream,
                               bool channels_last) {
    if (dy.images == 0 || dy.c == 0) return cudaSuccess;
    if (channels_last) {
        const std::uint32_t s = channels_last_slices(dy.images, dy.c, dy.h, dy.w);
        launch(channels_last_partials<false>, dim3(s, channels_last_groups(dy.c)), threads, stream, dy, scratch,
               nullptr);
        launch(channel_sum_finish, channel_finish_blocks(dy.c), channel_finish_threads, stream, dy.c, s, scratch, db);
        return launched();
    }
    const std::uint32_t s = channel_slices(dy.images, dy.h, dy.w);
    with_width(channel_vector_width(std::uint64_t{dy.h} * dy.w, {dy}), [&](auto w) {
        constexpr int V = decltype(w)::value;
        launch(channel_sum_partials<V>, dim3(s, dy.c), threads, stream, dy, scratch);
    });
    launch(channel_sum_finish, channel_finish_blocks(dy.c), channel_finish_threads, stream, dy.c, s, scratch, db);
    return launched();
}

cudaError_t launch_feature_sum(ConstDeviceImages dy, float* db, KernelStream stream) {
    const std::uint64_t features = dy.image_elements();
    if (features == 0) return cudaSuccess;
    launch(feature_sum_kernel, blocks_for(features), threads, stream, dy, db);
    return launched();
}

cudaError_t launch_softmax_loss_forward(ConstDeviceImages logits, const std::int32_t* labels,
                                        DeviceImages probabilities, float* per_image_loss, std::uint32_t first_image,
                                        KernelStream stream) {
    if (logits.images == 0) return cudaSuccess;
    launch(softmax_loss_forward_kernel, logits.images, threads, stream, logits, labels, probabilities, per_image_loss,
           first_image);
    return launched();
}

cudaError_t launch_softmax_loss_sum(const float* per_image_loss, std::uint32_t images, float weight, float* loss,
                                    KernelStream stream) {
    launch(softmax_loss_sum_kernel, 1, 1, stream, per_image_loss, images, weight, loss);
    return launched();
}

cudaError_t launch_softmax_loss_backward(ConstDeviceImages probabilities, const std::int32_t* labels,
                                         DeviceImages dlogits, float scale, std::uint32_t first_image,
                                         KernelStream stream) {
    const std::uint64_t total = std::uint64_t{probabilities.images} * probabilities.image_elements();
    if (total == 0) return cudaSuccess;
    launch(softmax_loss_backward_kernel, blocks_for(total), threads, stream, probabilities, labels, dlogits, scale,
           first_image, total);
    return launched();
}

cudaError_t launch_sgd(const SgdArgs& a, const SgdTensor* tensors, std::uint32_t count, KernelStream stream) {
    if (count == 0) return cudaSuccess;
    if (count > max_sgd_tensors) return cudaErrorInvalidValue;
    static_assert(sizeof(SgdArgs) + sizeof(SgdBatch) <= 4096, "kernel parameters fit the classic 4 KB");
    SgdBatch batch{};
    const std::uint64_t blocks = sgd_batch(tensors, count, batch);
    if (blocks > 0x7fffffffu) return cudaErrorInvalidValue;
    if (blocks == 0) return cudaSuccess;
    launch(sgd_kernel, static_cast<unsigned>(blocks), threads, stream, a, batch);
    return launched();
}

cudaError_t launch_synthetic_data(const SyntheticDataArgs& a, DeviceImages images, std::int32_t* labels,
                                  KernelStream stream) {
    const std::uint64_t total = std::uint64_t{images.images} * images.image_elements();
    if (total == 0) return cudaSuccess;
    launch(synthetic_data_kernel, blocks_for(total), threads, stream, a, images, labels, total);
    return launched();
}

cudaError_t launch_advance_step(std::uint64_t* step, KernelStream stream) {
    launch(advance_step_kernel, 1, 1, stream, step);
    return launched();
}

cudaError_t own_kernels_ptx_version(int* version) {
    cudaFuncAttributes attributes{};
    const cudaError_t status = cudaFuncGetAttributes(&attributes, advance_step_kernel);
    if (status == cudaSuccess) *version = attributes.ptxVersion;
    return status;
}

}  // namespace braid::samples::cuda
