// The own CUDA kernels' per-element bodies (samples/cuda/kernel_bodies.hpp)
// run on the CPU over every index of an emulated grid, bit for bit against
// the reference layers: pooling (forward, and the two-pass max backward
// with its tie rule; NCHW and NHWC views), LRN (NCHW and NHWC), layout
// copies, the NHWC bias add and the vectorised elementwise kernels (ReLU,
// add, gradient sum) in both vector widths, over dense views and channel slices.
// The GPU runs the same bodies (test-gpu-samples checks them there).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "cuda/kernel_bodies.hpp"
#include "cuda/layers.hpp"
#include "gpu_samples_util.hpp"
#include "nn/add.hpp"
#include "nn/batch_norm.hpp"
#include "nn/gradient_sum.hpp"
#include "nn/lrn.hpp"
#include "nn/pool.hpp"
#include "nn/relu.hpp"
#include "nn/sgd.hpp"

using namespace braid::samples;
using namespace braid::samples::cuda;
using gpu_test::transposed;

namespace {

// Values with many ties: multiples of 0.5 in [-2, 2], a third of them 0 (as after a ReLU).
std::vector<float> tied_values(std::size_t n, std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> pick(-4, 4);
    std::vector<float> v(n);
    for (float& x : v) {
        const int k = pick(rng);
        x = k < -1 ? 0.0f : 0.5f * static_cast<float>(k);
    }
    return v;
}

std::vector<float> random_floats(std::size_t n, std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    std::vector<float> v(n);
    for (float& x : v) x = d(rng);
    return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// A view of `shape` inside a wider buffer: `extra` channels' worth of
// padding after each image, starting `offset` floats in.
struct Slice {
    Shape4 shape;
    std::uint64_t offset = 0, stride = 0;
    std::vector<float> data;

    Slice(Shape4 s, std::uint64_t extra_planes, std::uint64_t off, float fill)
        : shape(s), offset(off), stride(s.image_elements() + extra_planes * s.plane_elements()),
          data(off + s.n * stride, fill) {}
    float* at(std::uint32_t n, std::uint64_t i) { return data.data() + offset + n * stride + i; }
    void set(const std::vector<float>& dense) {
        for (std::uint32_t n = 0; n < shape.n; ++n)
            std::memcpy(at(n, 0), dense.data() + n * shape.image_elements(), shape.image_elements() * sizeof(float));
    }
    std::vector<float> dense() {
        std::vector<float> out(shape.elements());
        for (std::uint32_t n = 0; n < shape.n; ++n)
            std::memcpy(out.data() + n * shape.image_elements(), at(n, 0), shape.image_elements() * sizeof(float));
        return out;
    }
    // Whether every float outside the view still holds `fill`.
    bool untouched_outside(float fill) {
        std::vector<bool> inside(data.size(), false);
        for (std::uint32_t n = 0; n < shape.n; ++n)
            for (std::uint64_t i = 0; i < shape.image_elements(); ++i) inside[offset + n * stride + i] = true;
        for (std::size_t k = 0; k < data.size(); ++k)
            if (!inside[k] && std::memcmp(&data[k], &fill, sizeof(float)) != 0) return false;
        return true;
    }
    DeviceImages images() {
        return DeviceImages{data.data() + offset, shape.n, shape.c, shape.h, shape.w, stride};
    }
};

// The launch's loop, one thread after another.
template <class F>
void emulate(std::uint64_t total, F&& body) {
    for (std::uint64_t t = 0; t < total; ++t) body(t);
}

}  // namespace

TEST_SUITE("cpu") {

TEST_CASE("pool kernel bodies: forward, and the two-pass max backward with the reference's tie rule, bit for bit, NCHW and NHWC") {
    int cases = 0;
    for (const PoolMode mode : {PoolMode::max, PoolMode::average})
        for (std::uint32_t kernel = 1; kernel <= 5; ++kernel)
            for (std::uint32_t stride = 1; stride <= 3; ++stride)
                for (std::uint32_t pad = 0; 2 * pad <= kernel; ++pad)
                    for (const bool ceil : {false, true})
                        for (const std::uint32_t size : {1u, 2u, 5u, 8u, 13u}) {
                            const Shape4 in{2, 3, size, size + 1};
                            const PoolConfig cfg{.mode = mode, .kernel = kernel, .stride = stride, .pad = pad,
                                                 .ceil_mode = ceil};
                            if (pooled_size(in.h, kernel, stride, pad, ceil) == 0 ||
                                pooled_size(in.w, kernel, stride, pad, ceil) == 0)
                                continue;
                            const Pool2d layer(in, cfg);
                            const Shape4 out = layer.out;
                            CAPTURE(to_string(in));
                            CAPTURE(kernel);
                            CAPTURE(stride);
                            CAPTURE(pad);
                            CAPTURE(ceil);
                            CAPTURE(mode == PoolMode::max);
                            const auto x = tied_values(in.elements(), 7 * kernel + stride);
                            const auto dy = random_floats(out.elements(), 11 * size + pad);
                            std::vector<float> y(out.elements()), dx(in.elements());
                            pool_forward<float>(layer, TensorView<const float>::dense(x.data(), in),
                                                TensorView<float>::dense(y.data(), out), whole_batch(in));
                            pool_backward_data<float>(layer, TensorView<const float>::dense(x.data(), in),
                                                      TensorView<const float>::dense(y.data(), out),
                                                      TensorView<const float>::dense(dy.data(), out),
                                                      TensorView<float>::dense(dx.data(), in), whole_batch(in));

                            // y and dy as channel slices of wider buffers, dx into one too.
                            const PoolArgs p = pool_args(layer);
                            Slice gy(out, 2, 5, 9.0f), gdy(out, 1, 3, -7.0f), gdx(in, 2, 1, 4.5f);
                            gdy.set(dy);
                            const ConstDeviceImages gx(x.data(), in.n, in.c, in.h, in.w, in.image_elements());
                            const DeviceImages yv = gy.images();
                            emulate(out.elements(), [&](std::uint64_t t) {
                                yv.data[pool_output_offset(p, yv.c, yv.image_stride, t)] = pool_forward_at(p, gx, t);
                            });
                            CHECK(same_bits(gy.dense(), y));
                            CHECK(gy.untouched_outside(9.0f));

                            std::vector<std::int32_t> argmax(out.elements(), -2);
                            if (p.max)
                                emulate(out.elements(), [&](std::uint64_t t) {
                                    argmax[t] = pool_argmax_at(p, gx, ConstDeviceImages(yv), t);
                                });
                            const DeviceImages dxv = gdx.images();
                            const ConstDeviceImages dyv(gdy.images());
                            emulate(in.elements(), [&](std::uint64_t t) {
                                dxv.data[pool_input_offset(p, dxv.c, dxv.image_stride, t)] =
                                    pool_backward_at(p, p.max ? argmax.data() : nullptr, dyv, dxv.c, t);
                            });
                            CHECK(same_bits(gdx.dense(), dx));
                            CHECK(gdx.untouched_outside(4.5f));

                            // NHWC views (whole images): the same bits, element for element.
                            const PoolArgs q = pool_args(layer, TensorLayout::nhwc);
                            CHECK(q.channels_last);
                            const std::vector<float> x_nhwc = transposed(x, in, true);
                            const std::vector<float> dy_nhwc = transposed(dy, out, true);
                            std::vector<float> y_nhwc(out.elements(), 9.0f), dx_nhwc(in.elements(), 4.5f);
                            const ConstDeviceImages hx(x_nhwc.data(), in.n, in.c, in.h, in.w, in.image_elements());
                            const DeviceImages hy{y_nhwc.data(), out.n, out.c, out.h, out.w, out.image_elements()};
                            emulate(out.elements(), [&](std::uint64_t t) {
                                hy.data[pool_output_offset(q, hy.c, hy.image_stride, t)] = pool_forward_at(q, hx, t);
                            });
                            CHECK(same_bits(transposed(y_nhwc, out, false), y));
                            std::vector<std::int32_t> argmax_nhwc(out.elements(), -2);
                            if (q.max)
                                emulate(out.elements(), [&](std::uint64_t t) {
                                    argmax_nhwc[t] = pool_argmax_at(q, hx, ConstDeviceImages(hy), t);
                                });
                            const ConstDeviceImages hdy(dy_nhwc.data(), out.n, out.c, out.h, out.w, out.image_elements());
                            const DeviceImages hdx{dx_nhwc.data(), in.n, in.c, in.h, in.w, in.image_elements()};
                            emulate(in.elements(), [&](std::uint64_t t) {
                                hdx.data[pool_input_offset(q, hdx.c, hdx.image_stride, t)] =
                                    pool_backward_at(q, q.max ? argmax_nhwc.data() : nullptr, hdy, hdx.c, t);
                            });
                            CHECK(same_bits(transposed(dx_nhwc, in, false), dx));

                            // y and dy as NHWC channel slices of wider buffers (a concat's: pixels
                            // out.c + 3 floats apart, from channel 2 on): the same bits, nothing else written.
                            PoolArgs r = q;
                            r.out_pixel_stride = out.c + 3;
                            const std::uint64_t pixels = std::uint64_t{out.n} * out.plane_elements();
                            std::vector<float> wide_y(pixels * r.out_pixel_stride, 9.0f),
                                wide_dy(pixels * r.out_pixel_stride, -7.0f);
                            const auto in_slice = [&](std::uint64_t k) {
                                return k % r.out_pixel_stride >= 2 && k % r.out_pixel_stride < 2 + out.c;
                            };
                            const auto slice_values = [&](const std::vector<float>& wide) {
                                std::vector<float> got;
                                for (std::uint64_t k = 0; k < wide.size(); ++k)
                                    if (in_slice(k)) got.push_back(wide[k]);
                                return got;
                            };
                            for (std::uint64_t px = 0; px < pixels; ++px)
                                for (std::uint32_t c = 0; c < out.c; ++c)
                                    wide_dy[px * r.out_pixel_stride + 2 + c] = dy_nhwc[px * out.c + c];
                            const std::uint64_t wide_image = out.plane_elements() * r.out_pixel_stride;
                            const DeviceImages sy{wide_y.data() + 2, out.n, out.c, out.h, out.w, wide_image};
                            emulate(out.elements(), [&](std::uint64_t t) {
                                sy.data[pool_output_offset(r, sy.c, sy.image_stride, t)] = pool_forward_at(r, hx, t);
                            });
                            CHECK(same_bits(slice_values(wide_y), y_nhwc));
                            bool outside = true;
                            for (std::uint64_t k = 0; k < wide_y.size(); ++k)
                                outside = outside && (in_slice(k) || wide_y[k] == 9.0f);
                            CHECK(outside);
                            std::vector<std::int32_t> argmax_slice(out.elements(), -2);
                            if (r.max)
                                emulate(out.elements(), [&](std::uint64_t t) {
                                    argmax_slice[t] = pool_argmax_at(r, hx, ConstDeviceImages(sy), t);
                                });
                            CHECK(argmax_slice == argmax_nhwc);
                            const ConstDeviceImages sdy(wide_dy.data() + 2, out.n, out.c, out.h, out.w, wide_image);
                            std::vector<float> dx_slice(in.elements(), 4.5f);
                            emulate(in.elements(), [&](std::uint64_t t) {
                                dx_slice[pool_input_offset(r, in.c, in.image_elements(), t)] =
                                    pool_backward_at(r, r.max ? argmax_slice.data() : nullptr, sdy, in.c, t);
                            });
                            CHECK(same_bits(dx_slice, dx_nhwc));
                            ++cases;
                        }
    CHECK(cases > 300);
    // The scratch the first pass takes: one int per output of the range.
    const Pool2d stem({32, 64, 112, 112}, {.kernel = 3, .stride = 2, .pad = 1});
    CHECK(pool_backward_scratch_bytes(pool_args(stem), 32, 64) == std::size_t{32} * 64 * 56 * 56 * 4);
    CHECK(pool_backward_scratch_bytes(pool_args(Pool2d({2, 3, 8, 8}, {.mode = PoolMode::average, .kernel = 2,
                                                                       .stride = 2})),
                                      2, 3) == 0);
}

TEST_CASE("pool kernel bodies: a window whose maximum is -inf routes there; one of NaNs routes nowhere, as the reference") {
    const Shape4 in{1, 1, 2, 4};
    const Pool2d layer(in, {.kernel = 2, .stride = 2});
    const float inf = __builtin_huge_valf(), nan = __builtin_nanf("");
    const std::vector<float> x = {-inf, -inf, nan, nan, -inf, -inf, nan, nan};
    const std::vector<float> dy = {1.0f, 2.0f};
    std::vector<float> y(2), dx(8);
    pool_forward<float>(layer, TensorView<const float>::dense(x.data(), in), TensorView<float>::dense(y.data(), layer.out),
                        whole_batch(in));
    pool_backward_data<float>(layer, TensorView<const float>::dense(x.data(), in),
                              TensorView<const float>::dense(y.data(), layer.out),
                              TensorView<const float>::dense(dy.data(), layer.out), TensorView<float>::dense(dx.data(), in),
                              whole_batch(in));
    const PoolArgs p = pool_args(layer);
    const ConstDeviceImages xv(x.data(), 1, 1, 2, 4, 8), yv(y.data(), 1, 1, 1, 2, 2), dyv(dy.data(), 1, 1, 1, 2, 2);
    CHECK(pool_argmax_at(p, xv, yv, 0) == 0);
    CHECK(pool_argmax_at(p, xv, yv, 1) == -1);
    std::vector<float> got(8);
    std::vector<std::int32_t> argmax = {pool_argmax_at(p, xv, yv, 0), pool_argmax_at(p, xv, yv, 1)};
    for (std::uint64_t t = 0; t < 8; ++t) got[t] = pool_backward_at(p, argmax.data(), dyv, 1, t);
    CHECK(same_bits(got, dx));
    CHECK(got[0] == 1.0f);
}

TEST_CASE("vector width: 16-byte units only where every view is aligned and images hold whole units") {
    alignas(16) static float buffer[64];
    const ConstDeviceImages a(buffer, 2, 2, 2, 2, 8), b(buffer + 16, 2, 2, 2, 2, 12);
    CHECK(vector_width(8, {a, b}) == 4);
    CHECK(vector_width(6, {a, b}) == 1);                                         // an image of 6 floats
    CHECK(vector_width(8, {a, ConstDeviceImages(buffer + 1, 2, 2, 2, 2, 8)}) == 1);  // misaligned data
    CHECK(vector_width(8, {a, ConstDeviceImages(buffer, 2, 2, 2, 2, 10)}) == 1);     // stride of 10 floats
    CHECK(vector_width(8, {a, ConstDeviceImages(buffer, 1, 2, 2, 2, 10)}) == 4);     // one image: no stride
    CHECK(contiguous({a}));
    CHECK_FALSE(contiguous({a, b}));
    CHECK(contiguous({ConstDeviceImages(buffer, 1, 2, 2, 2, 99)}));
    const UnitGrid flat = unit_grid(3, 8, 4, true), strided = unit_grid(3, 8, 4, false);
    CHECK(flat.units == 6);
    CHECK(flat.images == 1);
    CHECK(strided.units == 6);
    CHECK(strided.units_per_image == 2);
    CHECK(strided.images == 3);
    CHECK(unit_offset(5, 2, 3, 12, 4) == 2 * 12 + 4);
    CHECK(quotient(std::uint64_t{1} << 40, 3) == (std::uint64_t{1} << 40) / 3);
}

TEST_CASE("elementwise kernel bodies: ReLU, add and gradient sum over dense views and slices, widths 1 and 4, bit for bit") {
    struct Case {
        Shape4 shape;
        std::uint64_t extra_planes;  // 0: dense
    };
    const Case cases[] = {{{3, 4, 5, 4}, 0}, {{3, 4, 5, 4}, 1}, {{2, 3, 3, 3}, 0}, {{2, 3, 3, 3}, 2}, {{1, 2, 2, 2}, 0}};
    for (const Case& c : cases) {
        const Shape4 s = c.shape;
        CAPTURE(to_string(s));
        CAPTURE(c.extra_planes);
        const auto x = random_floats(s.elements(), 1), dy = random_floats(s.elements(), 2),
                   b = random_floats(s.elements(), 3), q = random_floats(s.elements(), 4);
        const auto dense = [&](const std::vector<float>& v) { return TensorView<const float>::dense(v.data(), s); };
        std::vector<float> relu_y(s.elements()), relu_dx(s.elements()), sum_y(s.elements()), grad(s.elements());
        const Relu relu(s);
        relu_forward<float>(relu, dense(x), TensorView<float>::dense(relu_y.data(), s), whole_batch(s));
        relu_backward_data<float>(relu, dense(relu_y), dense(dy), TensorView<float>::dense(relu_dx.data(), s),
                                  whole_batch(s));
        add_forward<float>(Add(s, s), dense(x), dense(b), TensorView<float>::dense(sum_y.data(), s), whole_batch(s));
        std::vector<float> sum_relu_y(s.elements());
        add_forward<float>(Add(s, s, true), dense(x), dense(b), TensorView<float>::dense(sum_relu_y.data(), s),
                           whole_batch(s));
        REQUIRE(std::count(sum_relu_y.begin(), sum_relu_y.end(), 0.0f) > 0);
        const TensorView<const float> parts[] = {dense(x), dense(b), dense(q)};
        gradient_sum<float>(parts, TensorView<float>::dense(grad.data(), s), whole_batch(s));

        for (const int v : {1, 4}) {
            if (v == 4 && s.image_elements() % 4 != 0) continue;
            CAPTURE(v);
            // Offsets of whole 16-byte units keep the slices aligned when the stride allows it.
            Slice sx(s, c.extra_planes, 4, 0.0f), sdy(s, c.extra_planes, 8, 0.0f), sb(s, c.extra_planes, 0, 0.0f),
                sq(s, c.extra_planes, 12, 0.0f), out(s, c.extra_planes, 4, 3.25f);
            sx.set(x);
            sdy.set(dy);
            sb.set(b);
            sq.set(q);
            const ConstDeviceImages vx(sx.images()), vdy(sdy.images()), vb(sb.images()), vq(sq.images());
            const DeviceImages vout = out.images();
            const bool flat = contiguous({vx, vdy, vb, vq, vout});
            CHECK(flat == (c.extra_planes == 0 || s.n == 1));
            const UnitGrid g = unit_grid(s.n, s.image_elements(), v, flat);
            const auto run = [&](auto&& unit) {
                if (v == 4) emulate(g.units, [&](std::uint64_t u) { unit(std::integral_constant<int, 4>{}, u); });
                else emulate(g.units, [&](std::uint64_t u) { unit(std::integral_constant<int, 1>{}, u); });
            };
            run([&](auto w, std::uint64_t u) { unary_unit<decltype(w)::value>(ReluForwardOp{}, g, vx, vout, u); });
            CHECK(same_bits(out.dense(), relu_y));
            CHECK(out.untouched_outside(3.25f));
            Slice sy(s, c.extra_planes, 0, 0.0f);
            sy.set(relu_y);
            const ConstDeviceImages vy(sy.images());
            run([&](auto w, std::uint64_t u) {
                binary_unit<decltype(w)::value>(ReluBackwardOp{}, g, vy, vdy, vout, u);
            });
            CHECK(same_bits(out.dense(), relu_dx));
            run([&](auto w, std::uint64_t u) { binary_unit<decltype(w)::value>(AddOp{}, g, vx, vb, vout, u); });
            CHECK(same_bits(out.dense(), sum_y));
            run([&](auto w, std::uint64_t u) { binary_unit<decltype(w)::value>(AddReluOp{}, g, vx, vb, vout, u); });
            CHECK(same_bits(out.dense(), sum_relu_y));
            GradientPartials p{};
            p.count = 3;
            const ConstDeviceImages pv[] = {vx, vb, vq};
            for (std::uint32_t k = 0; k < 3; ++k) {
                p.data[k] = pv[k].data;
                p.stride[k] = pv[k].image_stride;
            }
            run([&](auto w, std::uint64_t u) { gradient_sum_unit<decltype(w)::value>(p, g, vout, u); });
            CHECK(same_bits(out.dense(), grad));
            CHECK(out.untouched_outside(3.25f));
        }
    }
}

TEST_CASE("batch-norm moments in one shifted pass keep the two-pass reference's mean and variance, far from zero too") {
    // A channel of values around `offset` with spread `spread`: the plain
    // one-pass form E[x^2] - E[x]^2 would lose ~2*log10(offset/spread) digits.
    struct Case {
        double offset, spread;
    };
    for (const Case c : {Case{0.0, 1.0}, Case{1.0e3, 1.0e-2}, Case{-5.0e4, 3.0}, Case{1.0, 0.0}}) {
        CAPTURE(c.offset);
        CAPTURE(c.spread);
        const Shape4 s{4, 2, 5, 3};
        std::vector<float> x(s.elements());
        std::mt19937 rng(5);
        std::normal_distribution<double> d(0.0, 1.0);
        for (float& v : x) v = static_cast<float>(c.offset + c.spread * d(rng));
        const BatchNorm2d layer(s, {});
        std::vector<float> gamma(s.c, 1.0f), beta(s.c, 0.0f), y(s.elements()), mean(s.c), inv_std(s.c),
            running_mean(s.c, 0.0f), running_var(s.c, 1.0f);
        batch_norm_forward_training<float>(layer, TensorView<const float>::dense(x.data(), s), gamma.data(),
                                           beta.data(), TensorView<float>::dense(y.data(), s), mean.data(),
                                           inv_std.data(), running_mean.data(), running_var.data());
        for (std::uint32_t ch = 0; ch < s.c; ++ch) {
            // The kernel's pass: slices of any split, added in order.
            const double shift = x[ch * s.plane_elements()];
            double sum = 0.0, squares = 0.0, two_pass_mean = 0.0;
            for (std::uint32_t n = 0; n < s.n; ++n)
                for (std::uint64_t i = 0; i < s.plane_elements(); ++i) {
                    const double v = x[(n * s.c + ch) * s.plane_elements() + i];
                    sum += v - shift;
                    squares += (v - shift) * (v - shift);
                    two_pass_mean += v;
                }
            const double count = static_cast<double>(s.n) * static_cast<double>(s.plane_elements());
            const ChannelMoments m = channel_moments(shift, sum, squares, count);
            two_pass_mean /= count;
            double two_pass_var = 0.0;
            for (std::uint32_t n = 0; n < s.n; ++n)
                for (std::uint64_t i = 0; i < s.plane_elements(); ++i) {
                    const double e = x[(n * s.c + ch) * s.plane_elements() + i] - two_pass_mean;
                    two_pass_var += e * e;
                }
            two_pass_var /= count;
            CHECK(std::abs(m.mean - two_pass_mean) <= 1e-12 * std::max(1.0, std::abs(two_pass_mean)));
            CHECK(std::abs(m.variance - two_pass_var) <= 1e-9 * two_pass_var + 1e-300);
            CHECK(m.variance >= 0.0);
            // In float, what the layer saves: the same bits or one ulp away.
            CHECK(std::abs(static_cast<float>(m.mean) - mean[ch]) <= std::abs(mean[ch]) * 1.2e-7f);
            const float inv = static_cast<float>(1.0 / std::sqrt(m.variance + static_cast<double>(layer.config.epsilon)));
            CHECK(std::abs(inv - inv_std[ch]) <= inv_std[ch] * 1.2e-7f);
        }
    }
}

TEST_CASE("per-channel walks: every float of a channel once over the slices and threads, in both widths") {
    struct Case {
        std::uint32_t images, h, w;
        unsigned threads;
    };
    for (const Case c : {Case{3, 7, 7, 256}, Case{2, 4, 4, 256}, Case{5, 6, 2, 7}, Case{1, 1, 1, 256}, Case{32, 56, 56, 256},
                         Case{4, 28, 28, 32}}) {
        CAPTURE(c.images);
        CAPTURE(c.h);
        CAPTURE(c.w);
        const std::uint64_t plane = std::uint64_t{c.h} * c.w;
        const std::uint32_t channels = 3;
        const std::uint64_t stride = channels * plane + 4;  // a slice of a wider buffer
        const unsigned slices = channel_slices(c.images, c.h, c.w);
        for (const int v : {1, 4}) {
            if (plane % static_cast<std::uint64_t>(v) != 0) continue;
            CAPTURE(v);
            for (std::uint32_t ch = 0; ch < channels; ++ch) {
                std::vector<int> seen(c.images * stride, 0);
                for (unsigned slice = 0; slice < slices; ++slice)
                    for (unsigned t = 0; t < c.threads; ++t) {
                        const auto walk = [&](auto w) {
                            for (ChannelWalk<decltype(w)::value> it(c.images, plane, slice, slices, t, c.threads);
                                 it.valid(); it.next())
                                for (int k = 0; k < v; ++k) ++seen[it.at(stride, ch, plane) + static_cast<unsigned>(k)];
                        };
                        if (v == 4) walk(std::integral_constant<int, 4>{});
                        else walk(std::integral_constant<int, 1>{});
                    }
                bool exactly_the_channel = true;
                for (std::uint32_t n = 0; n < c.images; ++n)
                    for (std::uint64_t k = 0; k < stride; ++k) {
                        const bool in_channel = k >= ch * plane && k < (ch + 1) * plane;
                        exactly_the_channel = exactly_the_channel && seen[n * stride + k] == (in_channel ? 1 : 0);
                    }
                CHECK(exactly_the_channel);
            }
        }
    }
    alignas(16) static float buffer[64];
    CHECK(channel_vector_width(16, {ConstDeviceImages(buffer, 2, 1, 4, 4, 20)}) == 4);
    CHECK(channel_vector_width(49, {ConstDeviceImages(buffer, 2, 1, 7, 7, 49)}) == 1);  // a 7x7 plane
    CHECK(channel_vector_width(16, {ConstDeviceImages(buffer + 2, 2, 1, 4, 4, 20)}) == 1);
    CHECK(channel_vector_width(16, {ConstDeviceImages(buffer, 2, 1, 4, 4, 18)}) == 1);
}

TEST_CASE("batch norm over NHWC views: each channel's lane reads its floats once; the reference's statistics give its bits") {
    for (const bool relu : {false, true})
        for (const Shape4 s : {Shape4{3, 5, 7, 7}, Shape4{2, 40, 3, 4}, Shape4{1, 64, 2, 2}, Shape4{4, 8, 5, 5},
                               Shape4{2, 33, 1, 1}}) {
            CAPTURE(to_string(s));
            CAPTURE(relu);
            const std::uint64_t plane = s.plane_elements(), elements = s.image_elements();
            const std::uint32_t slices = channels_last_slices(s.n, s.c, s.h, s.w);
            const std::uint32_t groups = channels_last_groups(s.c);
            CHECK(groups * channels_last_lanes >= s.c);
            CHECK(slices >= 1);
            // The walk, on views with room after each image: every float
            // once, by the lane of its channel; nothing between images.
            const std::uint64_t stride = elements + 3;
            std::vector<int> seen(s.n * stride, 0);
            bool own_channel = true;
            for (std::uint32_t slice = 0; slice < slices; ++slice)
                for (std::uint32_t group = 0; group < groups; ++group)
                    for (unsigned t = 0; t < channels_last_lanes * channels_last_rows; ++t) {
                        const std::uint32_t c = group * channels_last_lanes + t % channels_last_lanes;
                        if (c >= s.c) continue;
                        for (ChannelWalk<1> it(s.n, plane, slice, slices, t / channels_last_lanes, channels_last_rows);
                             it.valid(); it.next()) {
                            const std::uint64_t at = it.at_channels_last(stride, s.c, c);
                            ++seen[at];
                            own_channel = own_channel && (at % stride) % s.c == c;
                        }
                    }
            CHECK(own_channel);
            bool once = true;
            for (std::uint64_t k = 0; k < seen.size(); ++k) once = once && seen[k] == (k % stride < elements ? 1 : 0);
            CHECK(once);

            const BatchNorm2d layer(s, {.relu = relu});
            const auto x = random_floats(s.elements(), 41), dy = random_floats(s.elements(), 42);
            std::vector<float> gamma = random_floats(s.c, 43), beta = random_floats(s.c, 44);
            std::vector<float> y(s.elements()), mean(s.c), inv_std(s.c), running_mean(s.c, 0.0f),
                running_var(s.c, 1.0f), dx(s.elements());
            const auto cv = [&](const std::vector<float>& v) { return TensorView<const float>::dense(v.data(), s); };
            batch_norm_forward_training<float>(layer, cv(x), gamma.data(), beta.data(),
                                               TensorView<float>::dense(y.data(), s), mean.data(), inv_std.data(),
                                               running_mean.data(), running_var.data());
            batch_norm_backward_data<float>(layer, cv(x), cv(dy), gamma.data(), mean.data(), inv_std.data(),
                                            TensorView<float>::dense(dx.data(), s), cv(y));

            const std::vector<float> hx = transposed(x, s, true), hdy = transposed(dy, s, true),
                                     hy_ref = transposed(y, s, true);
            // The statistics from the moments' sums (shift: channel c of pixel 0 of image 0).
            const double count = static_cast<double>(s.n) * static_cast<double>(plane);
            std::vector<double> sum_dy(s.c, 0.0), sum_dy_xhat(s.c, 0.0);
            for (std::uint32_t c = 0; c < s.c; ++c) {
                const double shift = hx[c];
                double sum = 0.0, squares = 0.0;
                for (std::uint64_t p = 0; p < s.n * plane; ++p) {
                    const double d = static_cast<double>(hx[p * s.c + c]) - shift;
                    sum += d;
                    squares += d * d;
                    const float g = relu ? ReluBackwardOp{}(hy_ref[p * s.c + c], hdy[p * s.c + c]) : hdy[p * s.c + c];
                    sum_dy[c] += g;
                    sum_dy_xhat[c] += static_cast<double>(g) * static_cast<double>((hx[p * s.c + c] - mean[c]) * inv_std[c]);
                }
                const ChannelMoments m = channel_moments(shift, sum, squares, count);
                CHECK(std::abs(static_cast<float>(m.mean) - mean[c]) <= std::abs(mean[c]) * 1.2e-7f + 1e-12f);
            }
            std::vector<float> mean_dy(s.c), mean_dy_xhat(s.c);
            for (std::uint32_t c = 0; c < s.c; ++c) {
                mean_dy[c] = static_cast<float>(sum_dy[c] / count);
                mean_dy_xhat[c] = static_cast<float>(sum_dy_xhat[c] / count);
            }
            // The elementwise passes in both widths, one long image or per image.
            for (const int v : {1, 4}) {
                if (s.c % static_cast<std::uint32_t>(v) != 0) continue;
                for (const bool flat : {false, true}) {
                    CAPTURE(v);
                    CAPTURE(flat);
                    const UnitGrid g = unit_grid(s.n, elements, v, flat);
                    std::vector<float> hy(s.elements(), 7.0f), hdx(s.elements(), 7.0f);
                    const ConstDeviceImages xv(hx.data(), s.n, s.c, s.h, s.w, elements),
                        dyv(hdy.data(), s.n, s.c, s.h, s.w, elements);
                    const DeviceImages yv{hy.data(), s.n, s.c, s.h, s.w, elements},
                        dxv{hdx.data(), s.n, s.c, s.h, s.w, elements};
                    const ChannelsLastNormalize n{mean.data(), inv_std.data(), gamma.data(), beta.data(), relu};
                    const ChannelsLastBackward b{gamma.data(), mean.data(), inv_std.data(), mean_dy.data(),
                                                 mean_dy_xhat.data()};
                    const ConstDeviceImages mask = relu ? ConstDeviceImages(yv) : ConstDeviceImages{};
                    emulate(g.units, [&](std::uint64_t u) {
                        if (v == 4) batch_norm_normalize_unit<4>(n, g, xv, yv, u);
                        else batch_norm_normalize_unit<1>(n, g, xv, yv, u);
                    });
                    CHECK(same_bits(transposed(hy, s, false), y));
                    emulate(g.units, [&](std::uint64_t u) {
                        if (v == 4) batch_norm_dx_unit<4>(b, g, xv, dyv, mask, dxv, u);
                        else batch_norm_dx_unit<1>(b, g, xv, dyv, mask, dxv, u);
                    });
                    const std::vector<float> got = transposed(hdx, s, false);
                    double worst = 0.0, scale = 0.0;
                    for (std::size_t k = 0; k < got.size(); ++k) {
                        worst = std::max(worst, std::abs(static_cast<double>(got[k]) - dx[k]));
                        scale = std::max(scale, std::abs(static_cast<double>(dx[k])));
                    }
                    CHECK(worst <= 1e-6 * scale);
                }
            }
        }
    // Scratch: the partials of two sums per channel and slice, then two floats per channel.
    const std::uint32_t s = channels_last_slices(32, 256, 56, 56);
    CHECK(channel_reduction_scratch_bytes(32, 256, 56, 56, true) ==
          2 * std::size_t{256} * s * sizeof(double) + 2 * std::size_t{256} * sizeof(float));
    CHECK(s * channels_last_groups(256) <= 1024 + channels_last_groups(256));
    CHECK(channels_last_slices(1, 2048, 1, 1) == 1);
}

TEST_CASE("NHWC channel slices as rows of pixels: batch norm visits the pixels in the whole-image order and writes the same bits") {
    for (const Shape4 s : {Shape4{3, 8, 7, 7}, Shape4{2, 40, 3, 4}, Shape4{1, 12, 2, 2}, Shape4{2, 6, 5, 5}}) {
        CAPTURE(to_string(s));
        const std::uint64_t plane = s.plane_elements(), pixels = std::uint64_t{s.n} * plane;
        const auto rows = static_cast<std::uint32_t>(pixels);
        // The reduction's partition: the same slices, and each thread the same pixels in the same order.
        const std::uint32_t slices = channels_last_slices(s.n, s.c, s.h, s.w);
        CHECK(channels_last_slices(rows, s.c, 1, 1) == slices);
        const std::uint32_t wide = s.c + 8;  // the concat's channels; this slice starts at channel 4
        bool same_order = true;
        for (std::uint32_t slice = 0; slice < slices; ++slice)
            for (unsigned row = 0; row < channels_last_rows; ++row) {
                std::vector<std::uint64_t> whole, sliced;
                for (ChannelWalk<1> it(s.n, plane, slice, slices, row, channels_last_rows); it.valid(); it.next())
                    whole.push_back(it.at_channels_last(s.image_elements(), s.c, 0) / s.c);
                for (ChannelWalk<1> it(rows, 1, slice, slices, row, channels_last_rows); it.valid(); it.next())
                    sliced.push_back(it.at_channels_last(wide, s.c, 0) / wide);
                same_order = same_order && whole == sliced;
            }
        CHECK(same_order);

        // Normalize into y and dx from dy, y and dy slices of wide buffers, as the launches walk them.
        const auto hx = random_floats(s.elements(), 51), hdy = random_floats(s.elements(), 52);
        const auto gamma = random_floats(s.c, 53), beta = random_floats(s.c, 54), mean = random_floats(s.c, 55);
        std::vector<float> inv_std = random_floats(s.c, 56), mean_dy = random_floats(s.c, 57),
                           mean_dy_xhat = random_floats(s.c, 58);
        for (float& v : inv_std) v = std::abs(v) + 0.5f;
        std::vector<float> wide_y(pixels * wide, 7.0f), wide_dy(pixels * wide, -3.0f);
        for (std::uint64_t p = 0; p < pixels; ++p)
            std::memcpy(&wide_dy[p * wide + 4], &hdy[p * s.c], s.c * sizeof(float));
        const auto slice_of = [&](std::vector<float>& v) {
            return TensorView<float>{v.data() + 4, s, plane * wide, wide};
        };
        const TensorView<float> y_view = slice_of(wide_y), dy_view = slice_of(wide_dy);
        const ConstDeviceView x_view = TensorView<const float>::dense(hx.data(), s);
        CHECK(walk_for({x_view, y_view}) == Walk::pixel_rows);
        CHECK(walk_for({x_view}) == Walk::images);
        const ImageRange all = whole_batch(s);
        const ConstDeviceImages xr = images_of(x_view, all, Walk::pixel_rows);
        const DeviceImages yr = images_of(y_view, all, Walk::pixel_rows);
        const ConstDeviceImages dyr = images_of(ConstDeviceView(dy_view), all, Walk::pixel_rows);
        CHECK(xr.images == rows);
        CHECK(xr.image_stride == s.c);
        CHECK(yr.image_stride == wide);
        CHECK(yr.h * yr.w == 1);
        for (const bool relu : {false, true})
            for (const int v : {1, 4}) {
                if (s.c % static_cast<std::uint32_t>(v) != 0) continue;
                CAPTURE(relu);
                CAPTURE(v);
                const ChannelsLastNormalize n{mean.data(), inv_std.data(), gamma.data(), beta.data(), relu};
                const ChannelsLastBackward b{gamma.data(), mean.data(), inv_std.data(), mean_dy.data(),
                                             mean_dy_xhat.data()};
                // The whole-image reference: dense NHWC views, per image.
                std::vector<float> y(s.elements()), dx(s.elements()), dx_rows(s.elements(), 5.0f);
                const UnitGrid g = unit_grid(s.n, s.image_elements(), v, false);
                const ConstDeviceImages xd(hx.data(), s.n, s.c, s.h, s.w, s.image_elements()),
                    dyd(hdy.data(), s.n, s.c, s.h, s.w, s.image_elements());
                const DeviceImages yd{y.data(), s.n, s.c, s.h, s.w, s.image_elements()},
                    dxd{dx.data(), s.n, s.c, s.h, s.w, s.image_elements()};
                const UnitGrid gr = unit_grid(rows, s.c, v, contiguous({xr, ConstDeviceImages(yr)}));
                CHECK(gr.units == g.units);
                std::fill(wide_y.begin(), wide_y.end(), 7.0f);
                emulate(g.units, [&](std::uint64_t u) {
                    if (v == 4) {
                        batch_norm_normalize_unit<4>(n, g, xd, yd, u);
                        batch_norm_normalize_unit<4>(n, gr, xr, yr, u);
                    } else {
                        batch_norm_normalize_unit<1>(n, g, xd, yd, u);
                        batch_norm_normalize_unit<1>(n, gr, xr, yr, u);
                    }
                });
                std::vector<float> got, outside;
                for (std::uint64_t k = 0; k < wide_y.size(); ++k)
                    (k % wide >= 4 && k % wide < 4 + s.c ? got : outside).push_back(wide_y[k]);
                CHECK(same_bits(got, y));
                CHECK(std::all_of(outside.begin(), outside.end(), [](float f) { return f == 7.0f; }));
                // dx: dy and the fused ReLU's y are slices, dx whole.
                const ConstDeviceImages mask_d = relu ? ConstDeviceImages(yd) : ConstDeviceImages{};
                const ConstDeviceImages mask_r = relu ? ConstDeviceImages(yr) : ConstDeviceImages{};
                const DeviceImages dxr = images_of(TensorView<float>::dense(dx_rows.data(), s), all, Walk::pixel_rows);
                emulate(g.units, [&](std::uint64_t u) {
                    if (v == 4) {
                        batch_norm_dx_unit<4>(b, g, xd, dyd, mask_d, dxd, u);
                        batch_norm_dx_unit<4>(b, gr, xr, dyr, mask_r, dxr, u);
                    } else {
                        batch_norm_dx_unit<1>(b, g, xd, dyd, mask_d, dxd, u);
                        batch_norm_dx_unit<1>(b, gr, xr, dyr, mask_r, dxr, u);
                    }
                });
                CHECK(same_bits(dx_rows, dx));
            }
    }
    // A slice reaching a kernel of whole images is refused; an NCHW slice has no rows of pixels.
    std::vector<float> buffer(2 * 4 * 3 * 3);
    const TensorView<float> nhwc_slice{buffer.data(), {2, 2, 3, 3}, 36, 4};
    CHECK_THROWS_WITH_AS(images_of(nhwc_slice, {0, 2}),
                         doctest::Contains("an NHWC channel slice (2x2x3x3, pixels 4 floats apart) reached a kernel "
                                           "that takes whole images only"),
                         ShapeError);
    CHECK(images_of(nhwc_slice, {0, 2}, Walk::pixel_stride).image_stride == 36);
    const TensorView<float> nchw_slice{buffer.data(), {2, 2, 3, 3}, 36};
    CHECK_THROWS_WITH_AS(images_of(nchw_slice, {0, 2}, Walk::pixel_rows),
                         doctest::Contains("an NCHW channel slice (2x2x3x3, images 36 floats apart) cannot be walked"),
                         ShapeError);
    CHECK(images_of(nchw_slice, {1, 2}, Walk::pixel_rows).images == 9);
}

TEST_CASE("LRN kernel bodies over NCHW and NHWC views, strided images too, give the float reference's bits, forward and backward") {
    for (const Shape4 s : {Shape4{2, 7, 4, 4}, Shape4{1, 3, 5, 2}, Shape4{3, 16, 3, 3}, Shape4{2, 1, 2, 3}})
        for (const LrnConfig cfg : {LrnConfig{}, LrnConfig{.size = 3, .alpha = 0.5f, .beta = 0.6f, .k = 2.0f},
                                    LrnConfig{.size = 9, .alpha = 0.2f, .beta = 1.25f, .k = 1.5f}}) {
            CAPTURE(to_string(s));
            CAPTURE(cfg.size);
            const Lrn layer(s, cfg);
            std::vector<float> x = random_floats(s.elements(), 51), dy = random_floats(s.elements(), 52);
            for (float& v : x) v *= 3.0f;
            std::vector<float> y(s.elements()), dx(s.elements());
            const auto cv = [&](const std::vector<float>& v) { return TensorView<const float>::dense(v.data(), s); };
            lrn_forward<float>(layer, cv(x), TensorView<float>::dense(y.data(), s), whole_batch(s));
            lrn_backward_data<float>(layer, cv(x), cv(y), cv(dy), TensorView<float>::dense(dx.data(), s), whole_batch(s));
            for (const bool cl : {false, true}) {
                CAPTURE(cl);
                const LrnArgs a = lrn_args(cfg.size, cfg.alpha, cfg.beta, cfg.k, cl);
                const auto laid = [&](const std::vector<float>& v) { return cl ? transposed(v, s, true) : v; };
                // Every view with a plane's worth of other floats after each image;
                // the inputs' are NaN, which a stray read would carry into the results.
                const float nan = std::numeric_limits<float>::quiet_NaN();
                Slice sx(s, 1, 3, nan), sy(s, 1, 5, 7.0f), sdy(s, 1, 0, nan), sdx(s, 1, 2, 7.0f);
                sx.set(laid(x));
                sdy.set(laid(dy));
                emulate(s.elements(), [&](std::uint64_t t) { lrn_forward_at(a, sx.images(), sy.images(), t); });
                CHECK(same_bits(sy.dense(), laid(y)));
                CHECK(sy.untouched_outside(7.0f));
                emulate(s.elements(), [&](std::uint64_t t) {
                    lrn_backward_at(a, sx.images(), sy.images(), sdy.images(), sdx.images(), t);
                });
                CHECK(same_bits(sdx.dense(), laid(dx)));
                CHECK(sdx.untouched_outside(7.0f));
            }
        }
}

TEST_CASE("nchw_element: each float of an NHWC image names the NCHW element a transpose puts there") {
    for (const Shape4 s : {Shape4{1, 8, 4, 4}, Shape4{1, 5, 2, 3}, Shape4{1, 1, 3, 3}, Shape4{1, 6, 1, 1}}) {
        CAPTURE(to_string(s));
        std::vector<float> index(s.elements());
        for (std::size_t i = 0; i < index.size(); ++i) index[i] = static_cast<float>(i);
        const std::vector<float> nhwc = transposed(index, s, true);
        bool same = true;
        for (std::uint64_t i = 0; i < nhwc.size(); ++i) {
            same = same && nchw_element(i, s.c, s.plane_elements(), true) == static_cast<std::uint64_t>(nhwc[i]);
            same = same && nchw_element(i, s.c, s.plane_elements(), false) == i;
        }
        CHECK(same);
    }
}

TEST_CASE("layout copies turn NCHW images into NHWC and back; the NHWC bias add adds each channel's bias, widths 1 and 4") {
    for (const Shape4 s : {Shape4{2, 8, 4, 4}, Shape4{3, 5, 2, 3}, Shape4{1, 12, 1, 1}}) {
        CAPTURE(to_string(s));
        const std::vector<float> x = random_floats(s.elements(), 61), bias = random_floats(s.c, 62);
        Slice nchw(s, 1, 1, 0.0f), nhwc(s, 2, 4, 7.0f), back(s, 0, 0, 7.0f);
        nchw.set(x);
        emulate(s.elements(), [&](std::uint64_t t) { layout_copy_at(nchw.images(), nhwc.images(), true, t); });
        CHECK(same_bits(nhwc.dense(), transposed(x, s, true)));
        CHECK(nhwc.untouched_outside(7.0f));
        emulate(s.elements(), [&](std::uint64_t t) { layout_copy_at(nhwc.images(), back.images(), false, t); });
        CHECK(same_bits(back.dense(), x));

        std::vector<float> expected = x;  // the NCHW reference: one float add per element
        for (std::uint64_t i = 0; i < expected.size(); ++i)
            expected[i] = expected[i] + bias[i / s.plane_elements() % s.c];
        for (const int v : {1, 4}) {
            if (s.c % static_cast<std::uint32_t>(v) != 0) continue;
            for (const bool flat : {false, true}) {
                CAPTURE(v);
                CAPTURE(flat);
                std::vector<float> y = transposed(x, s, true);
                const DeviceImages yv{y.data(), s.n, s.c, s.h, s.w, s.image_elements()};
                const UnitGrid g = unit_grid(s.n, s.image_elements(), v, flat);
                emulate(g.units, [&](std::uint64_t u) {
                    if (v == 4) channels_last_bias_unit<4>(g, bias.data(), yv, u);
                    else channels_last_bias_unit<1>(g, bias.data(), yv, u);
                });
                CHECK(same_bits(transposed(y, s, false), expected));
            }
        }
    }
}

TEST_CASE("multi-tensor SGD: every element of every tensor updated once, by the chunk its block owns, as the reference") {
    const SgdConfig config{0.05f, 0.9f, 1e-3f};
    const SgdArgs args{config.learning_rate, config.momentum, config.weight_decay};
    // Sizes on and around the chunk, empty ones first, last and between.
    const std::vector<std::uint64_t> sizes{0, 1, 4095, 4096, 4097, 0, 12288, 7, 0, 10000, 0};
    std::vector<std::vector<float>> param, grad, velocity, want_param, want_velocity;
    std::mt19937 rng(17);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (std::uint64_t n : sizes) {
        std::vector<float> p(n), g(n), v(n);
        for (std::uint64_t i = 0; i < n; ++i) {
            p[i] = u(rng);
            g[i] = u(rng);
            v[i] = u(rng);
        }
        param.push_back(p);
        grad.push_back(g);
        velocity.push_back(v);
    }
    want_param = param;
    want_velocity = velocity;
    std::vector<SgdTensor> tensors;
    for (std::size_t k = 0; k < sizes.size(); ++k) {
        const bool decay = k % 2 == 1;
        tensors.push_back({param[k].data(), grad[k].data(), velocity[k].data(), sizes[k], decay});
        sgd_momentum_update<float>(config, want_param[k].data(), grad[k].data(), want_velocity[k].data(), sizes[k],
                                   decay);
    }
    SgdBatch batch{};
    const std::uint64_t blocks = sgd_batch(tensors.data(), static_cast<std::uint32_t>(tensors.size()), batch);
    CHECK(blocks == 0 + 1 + 1 + 1 + 2 + 0 + 3 + 1 + 0 + 3 + 0);
    std::vector<std::uint64_t> chunks(sizes.size(), 0);
    for (std::uint32_t b = 0; b < blocks; ++b) {
        const SgdChunk c = sgd_chunk_of(batch, b);
        CAPTURE(b);
        REQUIRE(c.tensor < sizes.size());
        CHECK(sizes[c.tensor] > 0);
        CHECK(c.begin < c.end);
        CHECK(c.end <= sizes[c.tensor]);
        ++chunks[c.tensor];
        for (std::uint32_t thread = 0; thread < 256; ++thread)  // the kernel's loop, thread by thread
            for (std::uint64_t i = c.begin + thread; i < c.end; i += 256) sgd_element(args, batch.t[c.tensor], i);
    }
    for (std::size_t k = 0; k < sizes.size(); ++k) {
        CAPTURE(k);
        CHECK(chunks[k] == (sizes[k] + sgd_chunk - 1) / sgd_chunk);
        CHECK(same_bits(param[k], want_param[k]));
        CHECK(same_bits(velocity[k], want_velocity[k]));
    }
}

}  // TEST_SUITE
