// The per-thread bodies of the sample layers' own kernels (kernels.cu), as
// host-device functions: a kernel is a grid-stride loop that calls one of
// these per element, so a CPU test (samples-cuda-host) can run the same
// bodies over every index of an emulated grid and compare them bit for bit
// with the reference layers. Everything a kernel computes (index arithmetic,
// vector widths, window bounds, tie rules, summation order) lives here;
// kernels.cu adds only the loop and the launch.
#pragma once

#include <cmath>
#include <cstdint>
#include <initializer_list>

#include "cuda/kernels.h"

namespace braid::samples::cuda {

#if defined(__CUDACC__)
#define BRAID_SAMPLES_MIN(a, b) min(a, b)
#define BRAID_SAMPLES_MAX(a, b) max(a, b)
#else
#define BRAID_SAMPLES_MIN(a, b) ((a) < (b) ? (a) : (b))
#define BRAID_SAMPLES_MAX(a, b) ((a) < (b) ? (b) : (a))
#endif

// t / d with a 32-bit division when both fit (64-bit division is emulated
// on the GPU and would make memory-bound kernels compute-bound).
BRAID_SAMPLES_HOST_DEVICE inline std::uint64_t quotient(std::uint64_t t, std::uint64_t d) {
    if ((t | d) >> 32 == 0) return static_cast<std::uint32_t>(t) / static_cast<std::uint32_t>(d);
    return t / d;
}

// Which element of the reference's NCHW image float i of an image is: i
// itself, or for an NHWC image (i = pixel * C + c) c * plane + pixel. The
// data and dropout kernels key their values by it, so an NHWC run draws
// the NCHW run's images and masks, transposed.
BRAID_SAMPLES_HOST_DEVICE inline std::uint64_t nchw_element(std::uint64_t i, std::uint32_t channels,
                                                            std::uint64_t plane, bool channels_last) {
    if (!channels_last) return i;
    const std::uint64_t pixel = quotient(i, channels);
    return (i - pixel * channels) * plane + pixel;
}

// ------------------------------------------------------------ elementwise

// Elementwise kernels walk their views in units of V consecutive floats of
// one image: V = 4 (one 16-byte load or store) when vector_width says every
// view allows it, else 1. Unit u of a view of `units_per_image` units per
// image starts at float offset n * image_stride + (u - n * units_per_image) * V.
template <int V>
struct Floats {
    float v[V];
};

// One 16-byte access on the GPU for V = 4; float by float elsewhere.
#if defined(__CUDA_ARCH__)
constexpr bool device_vectors = true;
#else
constexpr bool device_vectors = false;
#endif

template <int V>
BRAID_SAMPLES_HOST_DEVICE inline Floats<V> load_floats(const float* p) {
    Floats<V> out;
    if constexpr (V == 4 && device_vectors) {
        const float4 q = *reinterpret_cast<const float4*>(p);
        out.v[0] = q.x;
        out.v[1] = q.y;
        out.v[2] = q.z;
        out.v[3] = q.w;
    } else {
        for (int k = 0; k < V; ++k) out.v[k] = p[k];
    }
    return out;
}

template <int V>
BRAID_SAMPLES_HOST_DEVICE inline void store_floats(float* p, const Floats<V>& f) {
    if constexpr (V == 4 && device_vectors) {
        float4 q;
        q.x = f.v[0];
        q.y = f.v[1];
        q.z = f.v[2];
        q.w = f.v[3];
        *reinterpret_cast<float4*>(p) = q;
    } else {
        for (int k = 0; k < V; ++k) p[k] = f.v[k];
    }
}

// Where unit u of a view starts. A single image needs no division.
BRAID_SAMPLES_HOST_DEVICE inline std::uint64_t unit_offset(std::uint64_t u, std::uint64_t units_per_image,
                                                           std::uint32_t images, std::uint64_t image_stride, int v) {
    if (images <= 1) return u * static_cast<std::uint64_t>(v);
    const std::uint64_t n = quotient(u, units_per_image);
    return n * image_stride + (u - n * units_per_image) * static_cast<std::uint64_t>(v);
}

// Whether a view allows 16-byte units: its data 16-byte aligned, and (with
// more than one image) its image stride a multiple of 4 floats.
inline bool allows_vector4(const float* data, std::uint32_t images, std::uint64_t image_stride) {
    return reinterpret_cast<std::uintptr_t>(data) % 16 == 0 && (images <= 1 || image_stride % 4 == 0);
}

// 4 when every view allows 16-byte units and an image's elements are a
// multiple of 4, else 1.
inline int vector_width(std::uint64_t image_elements, std::initializer_list<ConstDeviceImages> views) {
    if (image_elements % 4 != 0) return 1;
    for (const ConstDeviceImages& v : views)
        if (!allows_vector4(v.data, v.images, v.image_stride)) return 1;
    return 4;
}

// A contiguous batch (every view's images back to back) is one long image:
// the kernels then need no division at all.
inline bool contiguous(std::initializer_list<ConstDeviceImages> views) {
    for (const ConstDeviceImages& v : views)
        if (v.images > 1 && v.image_stride != v.image_elements()) return false;
    return true;
}

// The element operations, one float at a time, as the reference layers do them.
struct ReluForwardOp {
    BRAID_SAMPLES_HOST_DEVICE float operator()(float x) const { return x > 0.0f ? x : 0.0f; }
};
struct ReluBackwardOp {
    BRAID_SAMPLES_HOST_DEVICE float operator()(float y, float dy) const { return y > 0.0f ? dy : 0.0f; }
};
struct AddOp {
    BRAID_SAMPLES_HOST_DEVICE float operator()(float a, float b) const { return a + b; }
};
// An add with its ReLU fused: the sum rounds to float, then ReLU's select.
struct AddReluOp {
    BRAID_SAMPLES_HOST_DEVICE float operator()(float a, float b) const { return ReluForwardOp{}(AddOp{}(a, b)); }
};

// The geometry an elementwise launch passes to its kernel: `units` in all,
// `units_per_image` per image, each view's images and stride.
struct UnitGrid {
    std::uint64_t units = 0, units_per_image = 0;
    std::uint32_t images = 0;
};

BRAID_SAMPLES_HOST_DEVICE inline UnitGrid unit_grid(std::uint32_t images, std::uint64_t image_elements, int v,
                                                    bool flat) {
    const std::uint64_t per = image_elements / static_cast<std::uint64_t>(v);
    if (flat) return {per * images, per * images, 1};
    return {per * images, per, images};
}

template <int V, class Op>
BRAID_SAMPLES_HOST_DEVICE inline void unary_unit(Op op, const UnitGrid& g, ConstDeviceImages x, DeviceImages y,
                                                 std::uint64_t u) {
    Floats<V> a = load_floats<V>(x.data + unit_offset(u, g.units_per_image, g.images, x.image_stride, V));
    for (int k = 0; k < V; ++k) a.v[k] = op(a.v[k]);
    store_floats<V>(y.data + unit_offset(u, g.units_per_image, g.images, y.image_stride, V), a);
}

template <int V, class Op>
BRAID_SAMPLES_HOST_DEVICE inline void binary_unit(Op op, const UnitGrid& g, ConstDeviceImages a, ConstDeviceImages b,
                                                  DeviceImages y, std::uint64_t u) {
    Floats<V> p = load_floats<V>(a.data + unit_offset(u, g.units_per_image, g.images, a.image_stride, V));
    const Floats<V> q = load_floats<V>(b.data + unit_offset(u, g.units_per_image, g.images, b.image_stride, V));
    for (int k = 0; k < V; ++k) p.v[k] = op(p.v[k], q.v[k]);
    store_floats<V>(y.data + unit_offset(u, g.units_per_image, g.images, y.image_stride, V), p);
}

struct GradientPartials {
    const float* data[max_gradient_partials];
    std::uint64_t stride[max_gradient_partials];
    std::uint32_t count;
};

// total = ((p0 + p1) + p2) + ..., in the reference's order.
template <int V>
BRAID_SAMPLES_HOST_DEVICE inline void gradient_sum_unit(const GradientPartials& p, const UnitGrid& g,
                                                        DeviceImages total, std::uint64_t u) {
    Floats<V> acc = load_floats<V>(p.data[0] + unit_offset(u, g.units_per_image, g.images, p.stride[0], V));
    for (std::uint32_t k = 1; k < p.count; ++k) {
        const Floats<V> q = load_floats<V>(p.data[k] + unit_offset(u, g.units_per_image, g.images, p.stride[k], V));
        for (int j = 0; j < V; ++j) acc.v[j] += q.v[j];
    }
    store_floats<V>(total.data + unit_offset(u, g.units_per_image, g.images, total.image_stride, V), acc);
}

// ------------------------------------------------------------ per-channel walks

// The units (V floats of one plane) of channel c that thread `thread` of
// slice `slice` (of `slices`) handles in the per-channel kernels: flat unit
// indices j = n * units_per_plane + i in the slice's share [begin, end),
// walked with a stride of `threads`. The partition depends on the shape
// only, so every run and every lane adds the same values in the same order.
template <int V>
struct ChannelWalk {
    std::uint64_t j = 0, end = 0, n = 0, i = 0, units_per_plane = 0, step = 0;

    BRAID_SAMPLES_HOST_DEVICE ChannelWalk(std::uint32_t images, std::uint64_t plane, unsigned slice, unsigned slices,
                                          unsigned thread, unsigned threads)
        : units_per_plane(plane / V), step(threads) {
        const std::uint64_t count = std::uint64_t{images} * units_per_plane;
        const std::uint64_t per = (count + slices - 1) / slices;
        const std::uint64_t begin = per * slice;
        end = begin + per < count ? begin + per : count;
        j = begin + thread;
        n = quotient(j, units_per_plane);
        i = j - n * units_per_plane;
    }
    BRAID_SAMPLES_HOST_DEVICE bool valid() const { return j < end; }
    BRAID_SAMPLES_HOST_DEVICE void next() {
        j += step;
        if (units_per_plane == 1) {  // rows of one unit each (NHWC pixel rows): no carry loop
            n = j;
            return;
        }
        i += step;
        while (i >= units_per_plane) {
            i -= units_per_plane;
            ++n;
        }
    }
    // The unit's first float in a view of `plane`-float planes.
    BRAID_SAMPLES_HOST_DEVICE std::uint64_t at(std::uint64_t image_stride, std::uint32_t c, std::uint64_t plane) const {
        return n * image_stride + std::uint64_t{c} * plane + i * V;
    }
    // Channel c of the unit's pixel in an NHWC view of `channels` channels (V = 1).
    BRAID_SAMPLES_HOST_DEVICE std::uint64_t at_channels_last(std::uint64_t image_stride, std::uint32_t channels,
                                                             std::uint32_t c) const {
        static_assert(V == 1, "an NHWC pixel's channel is one float");
        return n * image_stride + i * channels + c;
    }
};

// NHWC per-channel reductions (batch norm with channels-last views): a
// block of channels_last_rows x channels_last_lanes threads covers
// `lanes` adjacent channels (channel group blockIdx.y) over one slice of
// the pixels (blockIdx.x of `slices`). Thread t is lane t % lanes, channel
// group * lanes + lane, and row t / lanes, which walks the slice's pixels
// as thread `row` of `rows` (a ChannelWalk<1>): a warp reads 32 adjacent
// floats of one pixel. The rows' sums of a lane then add in a fixed tree,
// so the partition and the order depend on the shape only.
inline constexpr unsigned channels_last_lanes = 32;
inline constexpr unsigned channels_last_rows = 8;

BRAID_SAMPLES_HOST_DEVICE inline std::uint32_t channels_last_groups(std::uint32_t channels) {
    return (channels + channels_last_lanes - 1) / channels_last_lanes;
}

// Pixel slices of an NHWC reduction: about 16 pixels a thread, and no
// more slices than make about 1024 blocks over the channel groups (beyond
// that, more blocks only lengthen the per-channel sums of the partials).
BRAID_SAMPLES_HOST_DEVICE inline std::uint32_t channels_last_slices(std::uint32_t images, std::uint32_t channels,
                                                                    std::uint32_t h, std::uint32_t w) {
    const std::uint64_t pixels = std::uint64_t{images} * h * w;
    const std::uint64_t by_work = (pixels + 16 * channels_last_rows - 1) / (16 * channels_last_rows);
    const std::uint64_t groups = channels_last_groups(channels);
    const std::uint64_t by_blocks = groups == 0 ? 1 : (1024 + groups - 1) / groups;
    const std::uint64_t s = BRAID_SAMPLES_MIN(by_work, by_blocks);
    return static_cast<std::uint32_t>(s < 1 ? 1 : s);
}

// Channel of the first float of elementwise unit u (V floats) over NHWC
// views of `channels` channels: V divides `channels`, so a unit's floats
// are channels c .. c + V - 1 of one pixel. A flat grid (one long image)
// gives the same channels, since every image holds whole pixels.
BRAID_SAMPLES_HOST_DEVICE inline std::uint32_t channels_last_unit_channel(const UnitGrid& g, std::uint32_t channels,
                                                                          int v, std::uint64_t u) {
    const std::uint64_t n = g.images <= 1 ? 0 : quotient(u, g.units_per_image);
    const std::uint64_t e = (u - n * g.units_per_image) * static_cast<std::uint64_t>(v);
    return static_cast<std::uint32_t>(e - quotient(e, channels) * channels);
}

// 4 when every view allows 16-byte units and a plane holds whole units
// (then every channel's plane starts on one too), else 1.
inline int channel_vector_width(std::uint64_t plane, std::initializer_list<ConstDeviceImages> views) {
    if (plane % 4 != 0) return 1;
    for (const ConstDeviceImages& v : views)
        if (!allows_vector4(v.data, v.images, v.image_stride)) return 1;
    return 4;
}

// ------------------------------------------------------------ batch norm

struct ChannelMoments {
    double mean, variance;
};

// A channel's mean and (biased) variance from one pass: the sums of
// d = x - shift and of d*d over `count` values, shift being one of the
// channel's own values. With the shift inside the data, E[d*d] - E[d]^2
// cancels only as many digits as the mean lies standard deviations from
// the shift, so in double it keeps what the reference's two passes keep
// (Chan, Golub & LeVeque, "Algorithms for computing the sample variance",
// 1983, the shifted-data form).
BRAID_SAMPLES_HOST_DEVICE inline ChannelMoments channel_moments(double shift, double sum, double squares,
                                                                 double count) {
    const double m = sum / count;
    const double v = squares / count - m * m;
    return {shift + m, v > 0.0 ? v : 0.0};
}

// Batch norm's elementwise passes over NHWC views, per unit of V channels
// of one pixel, with the per-channel statistics the reductions wrote: the
// expressions of the NCHW kernels, so equal statistics give equal bits.
struct ChannelsLastNormalize {
    const float* mean;     // saved_mean
    const float* inv_std;  // saved_inv_std
    const float* gamma;
    const float* beta;
    bool relu;
};

template <int V>
BRAID_SAMPLES_HOST_DEVICE inline void batch_norm_normalize_unit(const ChannelsLastNormalize& a, const UnitGrid& g,
                                                                ConstDeviceImages x, DeviceImages y, std::uint64_t u) {
    const std::uint32_t c0 = channels_last_unit_channel(g, x.c, V, u);
    Floats<V> v = load_floats<V>(x.data + unit_offset(u, g.units_per_image, g.images, x.image_stride, V));
    for (int k = 0; k < V; ++k) {
        const std::uint32_t c = c0 + static_cast<std::uint32_t>(k);
        const float n = a.gamma[c] * ((v.v[k] - a.mean[c]) * a.inv_std[c]) + a.beta[c];
        v.v[k] = a.relu ? ReluForwardOp{}(n) : n;
    }
    store_floats<V>(y.data + unit_offset(u, g.units_per_image, g.images, y.image_stride, V), v);
}

struct ChannelsLastBackward {
    const float* gamma;
    const float* mean;          // saved_mean
    const float* inv_std;       // saved_inv_std
    const float* mean_dy;       // per channel: sum(dy) / count, in float
    const float* mean_dy_xhat;  // sum(dy * xhat) / count
};

// dx of V channels of one pixel; y.data set: dy masked by a fused ReLU's output.
template <int V>
BRAID_SAMPLES_HOST_DEVICE inline void batch_norm_dx_unit(const ChannelsLastBackward& a, const UnitGrid& g,
                                                         ConstDeviceImages x, ConstDeviceImages dy,
                                                         ConstDeviceImages y, DeviceImages dx, std::uint64_t u) {
    const std::uint32_t c0 = channels_last_unit_channel(g, x.c, V, u);
    const Floats<V> xv = load_floats<V>(x.data + unit_offset(u, g.units_per_image, g.images, x.image_stride, V));
    Floats<V> gv = load_floats<V>(dy.data + unit_offset(u, g.units_per_image, g.images, dy.image_stride, V));
    if (y.data != nullptr) {
        const Floats<V> yv = load_floats<V>(y.data + unit_offset(u, g.units_per_image, g.images, y.image_stride, V));
        for (int k = 0; k < V; ++k) gv.v[k] = ReluBackwardOp{}(yv.v[k], gv.v[k]);
    }
    for (int k = 0; k < V; ++k) {
        const std::uint32_t c = c0 + static_cast<std::uint32_t>(k);
        const float scale = a.gamma[c] * a.inv_std[c];
        const float xhat = (xv.v[k] - a.mean[c]) * a.inv_std[c];
        gv.v[k] = scale * (gv.v[k] - a.mean_dy[c] - xhat * a.mean_dy_xhat[c]);
    }
    store_floats<V>(dx.data + unit_offset(u, g.units_per_image, g.images, dx.image_stride, V), gv);
}

// y[pixel, c] += bias[c] over V channels of one pixel (a convolution's
// bias over NHWC views), the reference's one float add per element.
template <int V>
BRAID_SAMPLES_HOST_DEVICE inline void channels_last_bias_unit(const UnitGrid& g, const float* bias, DeviceImages y,
                                                              std::uint64_t u) {
    const std::uint32_t c0 = channels_last_unit_channel(g, y.c, V, u);
    float* p = y.data + unit_offset(u, g.units_per_image, g.images, y.image_stride, V);
    Floats<V> v = load_floats<V>(p);
    for (int k = 0; k < V; ++k) v.v[k] = v.v[k] + bias[c0 + static_cast<std::uint32_t>(k)];
    store_floats<V>(p, v);
}

// ------------------------------------------------------------ pooling

struct PoolWindow {
    int h0, h1, w0, w1, count;
};

// As pool.cpp's window_of: the divisor is clipped to the padded image, the
// window itself to the image.
BRAID_SAMPLES_HOST_DEVICE inline PoolWindow pool_window(const PoolArgs& p, int oh, int ow) {
    const int H = static_cast<int>(p.in_h), W = static_cast<int>(p.in_w), P = static_cast<int>(p.pad),
              S = static_cast<int>(p.stride);
    int h0 = oh * S - P, w0 = ow * S - P;
    int h1 = BRAID_SAMPLES_MIN(h0 + static_cast<int>(p.kernel_h), H + P);
    int w1 = BRAID_SAMPLES_MIN(w0 + static_cast<int>(p.kernel_w), W + P);
    const int count = (h1 - h0) * (w1 - w0);
    h0 = BRAID_SAMPLES_MAX(h0, 0);
    w0 = BRAID_SAMPLES_MAX(w0, 0);
    h1 = BRAID_SAMPLES_MIN(h1, H);
    w1 = BRAID_SAMPLES_MIN(w1, W);
    return {h0, h1, w0, w1, count};
}

BRAID_SAMPLES_HOST_DEVICE inline int floor_div(int a, int b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// Element t of a pooling's images in their memory order: NCHW walks
// (image, channel, row, column), NHWC (image, row, column, channel), so
// consecutive threads touch consecutive floats in either layout.
struct PoolElement {
    std::uint64_t n;
    std::uint32_t c;
    int h, w;
};

BRAID_SAMPLES_HOST_DEVICE inline PoolElement pool_element(std::uint64_t t, std::uint32_t channels, std::uint32_t height,
                                                          std::uint32_t width, bool channels_last) {
    const std::uint64_t plane = std::uint64_t{height} * width;
    PoolElement e{};
    std::uint64_t i = 0;  // the pixel within its plane
    if (channels_last) {
        const std::uint64_t pixel = quotient(t, channels);  // n * plane + i
        e.c = static_cast<std::uint32_t>(t - pixel * channels);
        e.n = quotient(pixel, plane);
        i = pixel - e.n * plane;
    } else {
        const std::uint64_t p = quotient(t, plane);  // n * channels + c
        e.n = quotient(p, channels);
        e.c = static_cast<std::uint32_t>(p - e.n * channels);
        i = t - p * plane;
    }
    e.h = static_cast<int>(quotient(i, width));  // a 32-bit division: a plane fits
    e.w = static_cast<int>(i - static_cast<std::uint64_t>(e.h) * width);
    return e;
}

// Where pixel i of channel c lies in an image of `channels` planes of
// `plane` pixels: channel_offset + i * pixel_step.
BRAID_SAMPLES_HOST_DEVICE inline std::uint64_t channel_offset(std::uint32_t c, std::uint64_t plane, bool channels_last) {
    return channels_last ? c : std::uint64_t{c} * plane;
}
BRAID_SAMPLES_HOST_DEVICE inline std::uint64_t pixel_step(std::uint32_t channels, bool channels_last) {
    return channels_last ? channels : 1;
}
// The step between output pixels of y and dy, which may be NHWC channel slices.
BRAID_SAMPLES_HOST_DEVICE inline std::uint64_t out_pixel_step(const PoolArgs& p, std::uint32_t channels) {
    return p.channels_last && p.out_pixel_stride != 0 ? p.out_pixel_stride : pixel_step(channels, p.channels_last);
}

// Output t (over images, channels and output pixels, in the layout's order) of a pooling forward.
BRAID_SAMPLES_HOST_DEVICE inline float pool_forward_at(const PoolArgs& p, ConstDeviceImages x, std::uint64_t t) {
    const PoolElement o = pool_element(t, x.c, p.out_h, p.out_w, p.channels_last);
    const std::uint64_t step = pixel_step(x.c, p.channels_last);
    const float* xp = x.data + o.n * x.image_stride + channel_offset(o.c, std::uint64_t{p.in_h} * p.in_w, p.channels_last);
    const PoolWindow win = pool_window(p, o.h, o.w);
    if (p.max) {
        float best = -__builtin_huge_valf();
        for (int h = win.h0; h < win.h1; ++h)
            for (int w = win.w0; w < win.w1; ++w) {
                const float v = xp[static_cast<std::uint64_t>(h * static_cast<int>(p.in_w) + w) * step];
                best = best < v ? v : best;  // std::max(best, v)
            }
        return best;
    }
    float sum = 0.0f;
    for (int h = win.h0; h < win.h1; ++h)
        for (int w = win.w0; w < win.w1; ++w) sum += xp[static_cast<std::uint64_t>(h * static_cast<int>(p.in_w) + w) * step];
    return sum / static_cast<float>(win.count);
}

// Where y[n, c, :] of output t sits in a view.
BRAID_SAMPLES_HOST_DEVICE inline std::uint64_t pool_output_offset(const PoolArgs& p, std::uint32_t channels,
                                                                   std::uint64_t image_stride, std::uint64_t t) {
    const std::uint64_t per_image = std::uint64_t{channels} * p.out_h * p.out_w;
    const std::uint64_t n = quotient(t, per_image);
    const std::uint64_t e = t - n * per_image;
    if (!p.channels_last || p.out_pixel_stride == 0) return n * image_stride + e;
    const std::uint64_t pixel = quotient(e, channels);
    return n * image_stride + pixel * p.out_pixel_stride + (e - pixel * channels);
}

// Max-pool backward, first pass, output t: the plane offset of the first
// position (in raster order) of t's window whose x equals y, or -1 when
// none does (the reference routes t's gradient there, or nowhere).
BRAID_SAMPLES_HOST_DEVICE inline std::int32_t pool_argmax_at(const PoolArgs& p, ConstDeviceImages x,
                                                              ConstDeviceImages y, std::uint64_t t) {
    const PoolElement o = pool_element(t, x.c, p.out_h, p.out_w, p.channels_last);
    const std::uint64_t step = pixel_step(x.c, p.channels_last);
    const int W = static_cast<int>(p.in_w);
    const float* xp = x.data + o.n * x.image_stride + channel_offset(o.c, std::uint64_t{p.in_h} * p.in_w, p.channels_last);
    const float best = y.data[o.n * y.image_stride +
                              channel_offset(o.c, std::uint64_t{p.out_h} * p.out_w, p.channels_last) +
                              static_cast<std::uint64_t>(o.h * static_cast<int>(p.out_w) + o.w) *
                                  out_pixel_step(p, x.c)];
    const PoolWindow win = pool_window(p, o.h, o.w);
    for (int h = win.h0; h < win.h1; ++h)
        for (int w = win.w0; w < win.w1; ++w)
            if (xp[static_cast<std::uint64_t>(h * W + w) * step] == best) return h * W + w;
    return -1;
}

// Backward, input element t (in the layout's order): the sum, over the
// windows that hold it in the reference's (raster) order, of what each
// routes to it. Max pooling reads the first pass's argmax (contiguous, one
// int per output of the range, in the same order as the outputs); average
// pooling routes dy / count to every element of a window.
BRAID_SAMPLES_HOST_DEVICE inline float pool_backward_at(const PoolArgs& p, const std::int32_t* argmax,
                                                        ConstDeviceImages dy, std::uint32_t channels,
                                                        std::uint64_t t) {
    const std::uint64_t plane_out = std::uint64_t{p.out_h} * p.out_w;
    const int S = static_cast<int>(p.stride), P = static_cast<int>(p.pad);
    const int KH = static_cast<int>(p.kernel_h), KW = static_cast<int>(p.kernel_w);
    const int W = static_cast<int>(p.in_w), OW = static_cast<int>(p.out_w);
    const PoolElement e = pool_element(t, channels, p.in_h, p.in_w, p.channels_last);
    const int h = e.h, w = e.w, i = h * W + w;
    // Windows whose span holds (h, w): oh*S - P <= h < oh*S - P + K.
    const int oh_lo = BRAID_SAMPLES_MAX(0, floor_div(h + P - KH, S) + 1);
    const int oh_hi = BRAID_SAMPLES_MIN(static_cast<int>(p.out_h) - 1, (h + P) / S);
    const int ow_lo = BRAID_SAMPLES_MAX(0, floor_div(w + P - KW, S) + 1);
    const int ow_hi = BRAID_SAMPLES_MIN(OW - 1, (w + P) / S);
    // argmax is packed like the outputs of whole images; dy may be a slice.
    const std::uint64_t step = pixel_step(channels, p.channels_last), dy_step = out_pixel_step(p, channels);
    const std::uint64_t channel = channel_offset(e.c, plane_out, p.channels_last);
    const float* dyp = dy.data + e.n * dy.image_stride + channel;
    float acc = 0.0f;
    if (p.max) {
        const std::int32_t* first = argmax + e.n * channels * plane_out + channel;
        for (int oh = oh_lo; oh <= oh_hi; ++oh)
            for (int ow = ow_lo; ow <= ow_hi; ++ow) {
                const auto o = static_cast<std::uint64_t>(oh * OW + ow);
                if (first[o * step] == i) acc += dyp[o * dy_step];
            }
        return acc;
    }
    for (int oh = oh_lo; oh <= oh_hi; ++oh)
        for (int ow = ow_lo; ow <= ow_hi; ++ow) {
            const PoolWindow win = pool_window(p, oh, ow);
            if (h < win.h0 || h >= win.h1 || w < win.w0 || w >= win.w1) continue;
            acc += dyp[static_cast<std::uint64_t>(oh * OW + ow) * dy_step] / static_cast<float>(win.count);
        }
    return acc;
}

// Where dx of input element t sits in a view.
BRAID_SAMPLES_HOST_DEVICE inline std::uint64_t pool_input_offset(const PoolArgs& p, std::uint32_t channels,
                                                                  std::uint64_t image_stride, std::uint64_t t) {
    const std::uint64_t per_image = std::uint64_t{channels} * p.in_h * p.in_w;
    const std::uint64_t n = quotient(t, per_image);
    return n * image_stride + (t - n * per_image);
}

// ------------------------------------------------------------ LRN

// The layer's constants as nn/lrn.cpp forms them in float: alpha / size,
// and 2 * alpha * beta / size for the backward pass.
BRAID_SAMPLES_HOST_DEVICE inline LrnArgs lrn_args(std::uint32_t size, float alpha, float beta, float k,
                                                  bool channels_last) {
    return {size, alpha / static_cast<float>(size), beta, k, 2.0f * alpha * beta / static_cast<float>(size),
            channels_last};
}

// scale^-beta, with the platform's powf (the GPU's differs from glibc's by
// a few units in the last place at most; the CPU gives the reference's bits).
BRAID_SAMPLES_HOST_DEVICE inline float lrn_power(float scale, float beta) {
#if defined(__CUDA_ARCH__)
    return powf(scale, -beta);
#else
    return std::pow(scale, -beta);
#endif
}

// Where element t of an LRN's images (whole images, in their memory order:
// the pools' order, so consecutive threads touch consecutive floats) lies,
// and the step between its pixel's channels.
struct LrnElement {
    std::uint64_t pixel;  // offset of channel 0 of the element's pixel, image stride included
    std::uint64_t step;   // floats between adjacent channels
    int c;
};

BRAID_SAMPLES_HOST_DEVICE inline LrnElement lrn_element(const LrnArgs& a, std::uint32_t channels, std::uint32_t h,
                                                        std::uint32_t w, std::uint64_t image_stride, std::uint64_t t) {
    const PoolElement e = pool_element(t, channels, h, w, a.channels_last);
    const std::uint64_t plane = std::uint64_t{h} * w, i = static_cast<std::uint64_t>(e.h) * w + static_cast<std::uint64_t>(e.w);
    return {e.n * image_stride + i * pixel_step(channels, a.channels_last), channel_offset(1, plane, a.channels_last),
            static_cast<int>(e.c)};
}

// k + alpha / size * the sum of x^2 over channel c's window, added from the
// window's first channel on, as the reference's scale loop does.
BRAID_SAMPLES_HOST_DEVICE inline float lrn_scale(const LrnArgs& a, const float* pixel, std::uint64_t step, int c,
                                                 int channels) {
    const int half = static_cast<int>(a.size / 2);
    const int lo = BRAID_SAMPLES_MAX(0, c - half), hi = BRAID_SAMPLES_MIN(channels - 1, c + half);
    float s = 0.0f;
    for (int j = lo; j <= hi; ++j) {
        const float v = pixel[static_cast<std::uint64_t>(j) * step];
        s += v * v;
    }
    return a.k + a.alpha_over_size * s;
}

// y at element t: x * scale^-beta.
BRAID_SAMPLES_HOST_DEVICE inline void lrn_forward_at(const LrnArgs& a, ConstDeviceImages x, DeviceImages y,
                                                     std::uint64_t t) {
    const LrnElement e = lrn_element(a, x.c, x.h, x.w, x.image_stride, t);
    const LrnElement o = lrn_element(a, x.c, x.h, x.w, y.image_stride, t);
    const float* xp = x.data + e.pixel;
    const float v = xp[static_cast<std::uint64_t>(e.c) * e.step];
    y.data[o.pixel + static_cast<std::uint64_t>(o.c) * o.step] =
        v * lrn_power(lrn_scale(a, xp, e.step, e.c, static_cast<int>(x.c)), a.beta);
}

// dx at element t: dy * scale^-beta, less factor * x * dy_j * y_j / scale_j
// for every channel j whose window holds c (the windows are symmetric, so
// those of c's own window), in the reference's order. Each thread forms
// the scales it needs from x.
BRAID_SAMPLES_HOST_DEVICE inline void lrn_backward_at(const LrnArgs& a, ConstDeviceImages x, ConstDeviceImages y,
                                                      ConstDeviceImages dy, DeviceImages dx, std::uint64_t t) {
    const int channels = static_cast<int>(x.c), half = static_cast<int>(a.size / 2);
    const LrnElement ex = lrn_element(a, x.c, x.h, x.w, x.image_stride, t);
    const LrnElement ey = lrn_element(a, x.c, x.h, x.w, y.image_stride, t);
    const LrnElement ed = lrn_element(a, x.c, x.h, x.w, dy.image_stride, t);
    const LrnElement eo = lrn_element(a, x.c, x.h, x.w, dx.image_stride, t);
    const float* xp = x.data + ex.pixel;
    const float* yp = y.data + ey.pixel;
    const float* dyp = dy.data + ed.pixel;
    const int c = ex.c;
    const std::uint64_t step = ex.step;
    const float xv = xp[static_cast<std::uint64_t>(c) * step];
    float g = dyp[static_cast<std::uint64_t>(c) * step] * lrn_power(lrn_scale(a, xp, step, c, channels), a.beta);
    const int lo = BRAID_SAMPLES_MAX(0, c - half), hi = BRAID_SAMPLES_MIN(channels - 1, c + half);
    for (int j = lo; j <= hi; ++j) {
        const std::uint64_t at = static_cast<std::uint64_t>(j) * step;
        const float ratio = dyp[at] * yp[at] / lrn_scale(a, xp, step, j, channels);
        g -= a.factor * xv * ratio;
    }
    dx.data[eo.pixel + static_cast<std::uint64_t>(c) * step] = g;
}

// ------------------------------------------------------------ layout copy

// Element t of `out` (in its memory order) from `in`, which holds the same
// whole images in the other layout: NCHW to NHWC (to_channels_last) or back.
BRAID_SAMPLES_HOST_DEVICE inline void layout_copy_at(ConstDeviceImages in, DeviceImages out, bool to_channels_last,
                                                     std::uint64_t t) {
    const PoolElement e = pool_element(t, in.c, in.h, in.w, to_channels_last);
    const std::uint64_t plane = std::uint64_t{in.h} * in.w;
    const std::uint64_t i = static_cast<std::uint64_t>(e.h) * in.w + static_cast<std::uint64_t>(e.w);
    out.data[e.n * out.image_stride + (t - e.n * in.image_elements())] =
        in.data[e.n * in.image_stride + channel_offset(e.c, plane, !to_channels_last) +
                i * pixel_step(in.c, !to_channels_last)];
}

// ------------------------------------------------------------ SGD

// A multi-tensor update launch: one block per chunk of sgd_chunk elements of
// one tensor. Tensor k owns blocks [first_block[k], first_block[k + 1]); 64
// tensors and their offsets take 2.8 KB of the 4 KB of kernel parameters.
inline constexpr std::uint64_t sgd_chunk = 4096;  // 16 elements a thread of 256
struct SgdBatch {
    SgdTensor t[max_sgd_tensors];
    std::uint32_t first_block[max_sgd_tensors + 1];
    std::uint32_t count;
};

// Fills `batch` with tensors[0, count) (count <= max_sgd_tensors); returns
// the blocks the launch needs.
inline std::uint64_t sgd_batch(const SgdTensor* tensors, std::uint32_t count, SgdBatch& batch) {
    batch.count = count;
    std::uint64_t blocks = 0;
    for (std::uint32_t k = 0; k < count; ++k) {
        batch.t[k] = tensors[k];
        batch.first_block[k] = static_cast<std::uint32_t>(blocks);
        blocks += (tensors[k].elements + sgd_chunk - 1) / sgd_chunk;
    }
    batch.first_block[count] = static_cast<std::uint32_t>(blocks);
    return blocks;
}

struct SgdChunk {
    std::uint32_t tensor;
    std::uint64_t begin, end;  // elements of that tensor
};

// Block `block`'s chunk: the last tensor whose first block is at or before
// it (a tensor without elements owns no block and is passed over).
BRAID_SAMPLES_HOST_DEVICE inline SgdChunk sgd_chunk_of(const SgdBatch& batch, std::uint32_t block) {
    std::uint32_t lo = 0, hi = batch.count;
    while (hi - lo > 1) {
        const std::uint32_t mid = (lo + hi) / 2;
        if (batch.first_block[mid] <= block) lo = mid;
        else hi = mid;
    }
    const std::uint64_t begin = std::uint64_t{block - batch.first_block[lo]} * sgd_chunk;
    const std::uint64_t elements = batch.t[lo].elements;
    return {lo, begin, BRAID_SAMPLES_MIN(begin + sgd_chunk, elements)};
}

// Element i of tensor s, as nn/sgd.cpp's reference updates it.
BRAID_SAMPLES_HOST_DEVICE inline void sgd_element(const SgdArgs& a, const SgdTensor& s, std::uint64_t i) {
    float g = s.grad[i];
    if (s.decay) g = g + a.weight_decay * s.param[i];
    const float v = a.momentum * s.velocity[i] + g;
    s.velocity[i] = v;
    s.param[i] = s.param[i] - a.learning_rate * v;
}

#undef BRAID_SAMPLES_MIN
#undef BRAID_SAMPLES_MAX

}  // namespace braid::samples::cuda
