// The reference CPU layers: gradients against central finite differences in
// double (tolerance 1e-6 relative to max(1, |gradient|), step 1e-6), and
// the batch-range contract: a splittable body run in parts gives exactly the
// bits of one whole-batch call and touches no other image.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <limits>

#include "nn/gradient_sum.hpp"
#include "nn/layers.hpp"
#include "nn/sgd.hpp"
#include "samples_test_util.hpp"

using namespace samples_test;

namespace {

void check_conv(ConvConfig cfg, Shape4 in) {
    const Conv2d conv(in, cfg);
    std::vector<double> x = random_values<double>(in.elements(), 1);
    std::vector<double> w = random_values<double>(conv.weight_elements(), 2);
    std::vector<double> b = random_values<double>(cfg.out_channels, 3);
    const std::vector<double> r = random_values<double>(conv.out.elements(), 4);
    const double* bias = cfg.bias ? b.data() : nullptr;
    auto loss = [&] {
        std::vector<double> y(conv.out.elements());
        conv_forward<double>(conv, cview(x, in), w.data(), bias, view(y, conv.out), whole_batch(in));
        return dot(y, r);
    };
    std::vector<double> dx(in.elements()), dw(w.size()), db(b.size());
    conv_backward_data<double>(conv, cview(r, conv.out), w.data(), view(dx, in), whole_batch(in));
    conv_backward_weight<double>(conv, cview(x, in), cview(r, conv.out), dw.data(), cfg.bias ? db.data() : nullptr);
    check_gradient(dx, numeric_gradient(x, loss), "conv dx");
    check_gradient(dw, numeric_gradient(w, loss), "conv dweight");
    if (cfg.bias) check_gradient(db, numeric_gradient(b, loss), "conv dbias");
}

}  // namespace

TEST_SUITE("cpu") {

TEST_CASE("convolution gradients: stride, padding, groups, bias, rectangular kernels") {
    SUBCASE("3x3, stride 2, padding 1, 2 groups, bias") {
        check_conv(ConvConfig{6, 3, 2, 1, 2, true}, Shape4{2, 4, 7, 6});
    }
    SUBCASE("7x7, stride 2, padding 3, no bias (ResNet's stem)") {
        check_conv(ConvConfig{3, 7, 2, 3, 1, false}, Shape4{2, 3, 8, 8});
    }
    SUBCASE("5x5, padding 2 (inception 5x5)") { check_conv(ConvConfig{2, 5, 1, 2, 1, true}, Shape4{1, 3, 5, 5}); }
    SUBCASE("1x1, stride 2 (projection shortcut)") { check_conv(ConvConfig{4, 1, 2, 0, 1, false}, Shape4{2, 3, 5, 5}); }
    // Inception-v3's factorised convolutions, on inputs that are not square either.
    SUBCASE("1x7, padding 0x3") { check_conv(ConvConfig{3, {1, 7}, 1, {0, 3}, 1, false}, Shape4{2, 2, 4, 9}); }
    SUBCASE("7x1, padding 3x0, stride 2, 2 groups, bias") {
        check_conv(ConvConfig{4, {7, 1}, 2, {3, 0}, 2, true}, Shape4{2, 4, 9, 5});
    }
    SUBCASE("1x3 and 3x1 without padding") {
        check_conv(ConvConfig{2, {1, 3}, 1, 0, 1, true}, Shape4{1, 3, 3, 6});
        check_conv(ConvConfig{2, {3, 1}, 1, 0, 1, false}, Shape4{1, 3, 6, 3});
    }
}

// y[n][k][oh][ow] = b[k] + sum over c, r, s of x[n][c][oh*stride - pad_h + r][ow*stride - pad_w + s] * w[k][c][r][s],
// written out without the reference's column ranges: gradient checks alone
// would pass a forward that swapped height and width consistently.
TEST_CASE("rectangular convolutions: forward by the definition, shapes, parameters, work and errors") {
    struct Case {
        ConvConfig cfg;
        Shape4 in;
    };
    for (const Case& t : {Case{{3, {1, 7}, 1, {0, 3}, 1, true}, {2, 2, 5, 11}}, Case{{4, {7, 1}, 2, {3, 0}, 2, false}, {1, 4, 10, 6}},
                          Case{{2, {3, 1}, 1, {1, 0}, 1, true}, {1, 3, 4, 7}}}) {
        CAPTURE(to_string(t.cfg.kernel));
        const Conv2d conv(t.in, t.cfg);
        const ConvConfig& c = t.cfg;
        const std::uint32_t cg = t.in.c / c.groups, kg = c.out_channels / c.groups;
        const auto x = random_values<double>(t.in.elements(), 21), w = random_values<double>(conv.weight_elements(), 22),
                   b = random_values<double>(c.out_channels, 23);
        std::vector<double> y(conv.out.elements());
        conv_forward<double>(conv, cview(x, t.in), w.data(), c.bias ? b.data() : nullptr, view(y, conv.out),
                             whole_batch(t.in));
        const Shape4 o = conv.out;
        CHECK(o.h == (t.in.h + 2 * c.pad.h - c.kernel.h) / c.stride + 1);
        CHECK(o.w == (t.in.w + 2 * c.pad.w - c.kernel.w) / c.stride + 1);
        double worst = 0.0;
        for (std::uint32_t n = 0; n < o.n; ++n)
            for (std::uint32_t k = 0; k < o.c; ++k)
                for (std::int64_t oh = 0; oh < o.h; ++oh)
                    for (std::int64_t ow = 0; ow < o.w; ++ow) {
                        double sum = c.bias ? b[k] : 0.0;
                        for (std::uint32_t cc = 0; cc < cg; ++cc)
                            for (std::int64_t r = 0; r < c.kernel.h; ++r)
                                for (std::int64_t q = 0; q < c.kernel.w; ++q) {
                                    const std::int64_t ih = oh * c.stride - c.pad.h + r, iw = ow * c.stride - c.pad.w + q;
                                    if (ih < 0 || iw < 0 || ih >= t.in.h || iw >= t.in.w) continue;
                                    const std::uint32_t ch = k / kg * cg + cc;
                                    sum += x[((n * t.in.c + ch) * t.in.h + ih) * t.in.w + iw] *
                                           w[((k * cg + cc) * c.kernel.h + r) * c.kernel.w + q];
                                }
                        worst = std::max(worst, std::abs(sum - y[((n * o.c + k) * o.h + oh) * o.w + ow]));
                    }
        CHECK(worst < 1e-12);
        // Weights [K][C/g][R][S]; work and estimates count R*S taps.
        const ParamSpec weight = conv.parameters().front();
        CHECK(weight.shape == Shape4{c.out_channels, cg, c.kernel.h, c.kernel.w});
        CHECK(weight.fan_in == std::uint64_t{cg} * c.kernel.h * c.kernel.w);
        CHECK(conv.macs() == o.elements() * cg * c.kernel.h * c.kernel.w);
        const std::vector<braid::KernelEstimate> fwd = conv.kernels(Pass::forward, EstimateOptions{});
        REQUIRE(!fwd.empty());
        CHECK(fwd.front().flops == doctest::Approx(2.0 * static_cast<double>(conv.macs())));
    }
    // torchvision's Mixed_6b.branch7x7_2 and _3 keep 17x17; without padding a 1x7 kernel narrows only the width.
    CHECK(Conv2d(Shape4{1, 128, 17, 17}, ConvConfig{128, {1, 7}, 1, {0, 3}, 1, false}).out == Shape4{1, 128, 17, 17});
    CHECK(Conv2d(Shape4{1, 128, 17, 17}, ConvConfig{192, {7, 1}, 1, {3, 0}, 1, false}).out == Shape4{1, 192, 17, 17});
    CHECK(Conv2d(Shape4{1, 8, 17, 17}, ConvConfig{8, {1, 7}, 1, 0, 1, false}).out == Shape4{1, 8, 17, 11});
    CHECK(ConvConfig{8, 3, 1, 1}.kernel == Size2{3, 3});  // one number: a square
    CHECK_THROWS_WITH_AS(Conv2d(Shape4{1, 3, 9, 5}, ConvConfig{4, {1, 7}, 1, 0, 1, false}),
                         "convolution: a 1x7 kernel with padding 0 does not fit a 9x5 input", ShapeError);
    CHECK_THROWS_WITH_AS(Conv2d(Shape4{1, 3, 5, 5}, ConvConfig{4, {7, 1}, 1, {0, 3}, 1, false}),
                         "convolution: a 7x1 kernel with padding 0x3 does not fit a 5x5 input", ShapeError);
    CHECK_THROWS_WITH_AS(Conv2d(Shape4{1, 3, 5, 5}, ConvConfig{4, {3, 0}, 1, 0, 1, false}),
                         doctest::Contains("kernel and stride must be >= 1, got a 3x0 kernel"), ShapeError);
}

TEST_CASE("convolution shapes and errors") {
    CHECK(Conv2d(Shape4{1, 3, 224, 224}, ConvConfig{64, 7, 2, 3, 1, false}).out == Shape4{1, 64, 112, 112});
    CHECK_THROWS_WITH_AS(Conv2d(Shape4{1, 3, 2, 2}, ConvConfig{4, 5, 1, 1, 1, true}),
                         doctest::Contains("does not fit a 2x2 input"), ShapeError);
    CHECK_THROWS_WITH_AS(Conv2d(Shape4{1, 3, 8, 8}, ConvConfig{4, 3, 1, 1, 2, true}),
                         doctest::Contains("do not divide into 2 groups"), ShapeError);
}

TEST_CASE("batch norm with a fused ReLU: the bits of batch norm then ReLU, and its output is required") {
    const Shape4 in{3, 2, 4, 5};
    BatchNormConfig with_relu;
    with_relu.relu = true;
    const BatchNorm2d plain(in, {}), fused(in, with_relu);
    const Relu relu(in);
    const std::size_t n = in.elements();
    const auto x = random_values<float>(n, 81, -2.0, 2.0);
    const auto dy = random_values<float>(n, 82);
    const std::vector<float> gamma{1.25f, 0.5f}, beta{0.25f, -0.5f};
    std::vector<float> bn_y(n), y(n), dbn(n), dx(n), mean(2), inv(2), rmean(2, 0.0f), rvar(2, 1.0f), dgamma(2), dbeta(2);
    batch_norm_forward_training<float>(plain, cview(x, in), gamma.data(), beta.data(), view(bn_y, in), mean.data(),
                                       inv.data(), rmean.data(), rvar.data());
    relu_forward<float>(relu, cview(bn_y, in), view(y, in), whole_batch(in));
    relu_backward_data<float>(relu, cview(y, in), cview(dy, in), view(dbn, in), whole_batch(in));
    batch_norm_backward_data<float>(plain, cview(x, in), cview(dbn, in), gamma.data(), mean.data(), inv.data(),
                                    view(dx, in));
    batch_norm_backward_weight<float>(plain, cview(x, in), cview(dbn, in), mean.data(), inv.data(), dgamma.data(),
                                      dbeta.data());

    std::vector<float> fy(n), fdx(n), fmean(2), finv(2), frmean(2, 0.0f), frvar(2, 1.0f), fdgamma(2), fdbeta(2);
    batch_norm_forward_training<float>(fused, cview(x, in), gamma.data(), beta.data(), view(fy, in), fmean.data(),
                                       finv.data(), frmean.data(), frvar.data());
    batch_norm_backward_data<float>(fused, cview(x, in), cview(dy, in), gamma.data(), fmean.data(), finv.data(),
                                    view(fdx, in), cview(fy, in));
    batch_norm_backward_weight<float>(fused, cview(x, in), cview(dy, in), fmean.data(), finv.data(), fdgamma.data(),
                                      fdbeta.data(), cview(fy, in));
    CHECK(std::count(y.begin(), y.end(), 0.0f) > 0);  // the mask has work to do
    CHECK(same_bits(fy, y));
    CHECK(same_bits(fdx, dx));
    CHECK(same_bits(fdgamma, dgamma));
    CHECK(same_bits(fdbeta, dbeta));
    CHECK(same_bits(frvar, rvar));
    CHECK_THROWS_WITH_AS(batch_norm_backward_data<float>(fused, cview(x, in), cview(dy, in), gamma.data(),
                                                         fmean.data(), finv.data(), view(fdx, in)),
                         doctest::Contains("batch norm backward_data: the layer has a fused ReLU and needs its output"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(batch_norm_backward_weight<float>(fused, cview(x, in), cview(dy, in), fmean.data(),
                                                           finv.data(), fdgamma.data(), fdbeta.data()),
                         doctest::Contains("backward_weight: the layer has a fused ReLU"), ShapeError);
}

TEST_CASE("batch norm with shared sums: one backward pass writes dx, dgamma and dbeta with the two passes' bits") {
    const Shape4 in{3, 2, 4, 5};
    for (bool relu : {false, true}) {
        CAPTURE(relu);
        BatchNormConfig plain_config, shared_config;
        plain_config.relu = relu;
        shared_config.relu = relu;
        shared_config.share_sums = true;
        const BatchNorm2d plain(in, plain_config), shared(in, shared_config);
        const std::size_t n = in.elements();
        const auto x = random_values<float>(n, 91, -2.0, 2.0);
        const auto dy = random_values<float>(n, 92);
        const std::vector<float> gamma{1.25f, 0.5f}, beta{0.25f, -0.5f};
        std::vector<float> y(n), mean(2), inv(2), rmean(2, 0.0f), rvar(2, 1.0f), dgamma(2), dbeta(2), dx(n);
        batch_norm_forward_training<float>(plain, cview(x, in), gamma.data(), beta.data(), view(y, in), mean.data(),
                                           inv.data(), rmean.data(), rvar.data());
        const TensorView<const float> mask = relu ? cview(y, in) : TensorView<const float>{};
        batch_norm_backward_data<float>(plain, cview(x, in), cview(dy, in), gamma.data(), mean.data(), inv.data(),
                                        view(dx, in), mask);
        batch_norm_backward_weight<float>(plain, cview(x, in), cview(dy, in), mean.data(), inv.data(), dgamma.data(),
                                          dbeta.data(), mask);
        std::vector<float> sdx(n), sdgamma(2, 7.0f), sdbeta(2, 7.0f);
        batch_norm_backward_data<float>(shared, cview(x, in), cview(dy, in), gamma.data(), mean.data(), inv.data(),
                                        view(sdx, in), mask, sdgamma.data(), sdbeta.data());
        CHECK(same_bits(sdx, dx));
        CHECK(same_bits(sdgamma, dgamma));
        CHECK(same_bits(sdbeta, dbeta));
        // Without shared sums dgamma and dbeta are not written.
        std::vector<float> untouched(2, 7.0f), untouched2(2, 7.0f);
        batch_norm_backward_data<float>(plain, cview(x, in), cview(dy, in), gamma.data(), mean.data(), inv.data(),
                                        view(sdx, in), mask, untouched.data(), untouched2.data());
        CHECK(untouched == std::vector<float>(2, 7.0f));
        CHECK_THROWS_WITH_AS(batch_norm_backward_data<float>(shared, cview(x, in), cview(dy, in), gamma.data(),
                                                             mean.data(), inv.data(), view(sdx, in), mask,
                                                             sdgamma.data(), nullptr),
                             doctest::Contains("batch norm backward_data: the layer shares its sums and writes "
                                               "dgamma and dbeta too: give both"),
                             ShapeError);
        // Work: one pass's more bytes (dgamma, dbeta) instead of a second op.
        CHECK(shared.kernels(Pass::backward_data, {}).size() == 2);
        CHECK(shared.work(Pass::backward_data).dram_bytes >
              plain.work(Pass::backward_data).dram_bytes);
        CHECK(shared.work(Pass::backward_data).dram_bytes <
              plain.work(Pass::backward_data).dram_bytes + plain.work(Pass::backward_weight).dram_bytes);
    }
}

TEST_CASE("batch norm gradients and statistics (training mode)") {
    const Shape4 in{3, 2, 3, 4};
    const BatchNorm2d bn(in, BatchNormConfig{1e-5f, 0.1f});
    std::vector<double> x = random_values<double>(in.elements(), 11);
    std::vector<double> gamma = random_values<double>(in.c, 12, 0.5, 1.5);
    std::vector<double> beta = random_values<double>(in.c, 13);
    const std::vector<double> r = random_values<double>(in.elements(), 14);
    std::vector<double> mean(in.c), inv_std(in.c), running_mean(in.c, 0.0), running_var(in.c, 1.0);
    auto loss = [&] {
        std::vector<double> y(in.elements()), m(in.c), s(in.c), rm(in.c, 0.0), rv(in.c, 1.0);
        batch_norm_forward_training<double>(bn, cview(x, in), gamma.data(), beta.data(), view(y, in), m.data(),
                                            s.data(), rm.data(), rv.data());
        return dot(y, r);
    };
    std::vector<double> y(in.elements());
    batch_norm_forward_training<double>(bn, cview(x, in), gamma.data(), beta.data(), view(y, in), mean.data(),
                                        inv_std.data(), running_mean.data(), running_var.data());
    // Batch statistics over N*H*W; running statistics move 10% toward them
    // with the unbiased variance.
    for (std::uint32_t c = 0; c < in.c; ++c) {
        double sum = 0, sq = 0;
        const double m = 3.0 * 12.0;
        for (std::uint32_t n = 0; n < in.n; ++n)
            for (std::uint32_t i = 0; i < 12; ++i) sum += x[(n * in.c + c) * 12 + i];
        const double mu = sum / m;
        for (std::uint32_t n = 0; n < in.n; ++n)
            for (std::uint32_t i = 0; i < 12; ++i) sq += (x[(n * in.c + c) * 12 + i] - mu) * (x[(n * in.c + c) * 12 + i] - mu);
        CHECK(mean[c] == doctest::Approx(mu).epsilon(1e-12));
        CHECK(inv_std[c] == doctest::Approx(1.0 / std::sqrt(sq / m + 1e-5)).epsilon(1e-9));
        const double momentum = static_cast<double>(0.1f);
        CHECK(running_mean[c] == doctest::Approx(momentum * mu).epsilon(1e-12));
        CHECK(running_var[c] == doctest::Approx(1.0 - momentum + momentum * sq / (m - 1)).epsilon(1e-12));
    }
    std::vector<double> dx(in.elements()), dgamma(in.c), dbeta(in.c);
    batch_norm_backward_data<double>(bn, cview(x, in), cview(r, in), gamma.data(), mean.data(), inv_std.data(),
                                     view(dx, in));
    batch_norm_backward_weight<double>(bn, cview(x, in), cview(r, in), mean.data(), inv_std.data(), dgamma.data(),
                                       dbeta.data());
    check_gradient(dx, numeric_gradient(x, loss), "batch norm dx", 1e-5);
    check_gradient(dgamma, numeric_gradient(gamma, loss), "batch norm dgamma");
    check_gradient(dbeta, numeric_gradient(beta, loss), "batch norm dbeta");
}

TEST_CASE("estimates list the per-channel reductions' kernels on the grids the CUDA layers launch") {
    const auto grid = [](const braid::KernelEstimate& k) {
        return std::array<std::uint32_t, 4>{k.shape.grid.x, k.shape.grid.y, k.shape.grid.z, k.shape.block.x};
    };
    using G = std::array<std::uint32_t, 4>;  // grid x, y, z, threads
    // Grids the H200 profile of ResNet-50 at batch 8 recorded for bn1
    // (8x64x112x112: 25 slices) and layer1.0.bn1 (8x64x56x56: 7 slices).
    for (const std::pair<Shape4, unsigned>& c : {std::pair{Shape4{8, 64, 112, 112}, 25u},
                                                 std::pair{Shape4{8, 64, 56, 56}, 7u},
                                                 std::pair{Shape4{128, 64, 112, 112}, 64u}}) {  // at most 64
        const Shape4 in = c.first;
        const unsigned slices = c.second;
        CAPTURE(to_string(in));
        const BatchNorm2d bn(in, BatchNormConfig{});
        for (const Pass p : {Pass::forward, Pass::backward_data}) {
            const std::vector<braid::KernelEstimate> ks = bn.kernels(p, {});
            REQUIRE(ks.size() == 2);
            CHECK(grid(ks[0]) == G{slices, 64, 1, 256});
            CHECK(grid(ks[1]) == G{slices, 64, 1, 256});
        }
        const std::vector<braid::KernelEstimate> weight = bn.kernels(Pass::backward_weight, {});
        REQUIRE(weight.size() == 2);
        CHECK(grid(weight[0]) == G{slices, 64, 1, 256});
        CHECK(grid(weight[1]) == G{1, 1, 1, 128});  // a thread per channel finishes
        for (const braid::KernelEstimate& k : weight) CHECK(k.kind == braid::KernelClass::normalization);
    }
    CHECK(grid(BatchNorm2d(Shape4{8, 200, 7, 7}, BatchNormConfig{}).kernels(Pass::backward_weight, {})[1]) ==
          G{2, 1, 1, 128});
    // A convolution's bias gradient after the library's weight gradient, as
    // GoogLeNet's inception_5b/pool_proj at batch 8 ran it (8x128x7x7 out).
    ConvConfig cfg;
    cfg.out_channels = 128;
    const Conv2d conv(Shape4{8, 832, 7, 7}, cfg);
    const std::vector<braid::KernelEstimate> wgrad = conv.kernels(Pass::backward_weight, {});
    REQUIRE(wgrad.size() >= 3);
    CHECK(grid(wgrad[wgrad.size() - 2]) == G{1, 128, 1, 256});
    CHECK(grid(wgrad.back()) == G{1, 1, 1, 128});
    CHECK_FALSE(wgrad.back().library_helper);
    cfg.bias = false;
    CHECK(Conv2d(Shape4{8, 832, 7, 7}, cfg).kernels(Pass::backward_weight, {}).size() == wgrad.size() - 2);
    // A fully connected bias gradient: a thread per feature; the loss: a
    // block per image, then one thread.
    const FullyConnected fc(Shape4{8, 1024, 1, 1}, FullyConnectedConfig{1000, true});
    CHECK(grid(fc.kernels(Pass::backward_weight, {}).back()) == G{4, 1, 1, 256});
    const SoftmaxCrossEntropy loss(Shape4{8, 1000, 1, 1}, SoftmaxLossConfig{});
    CHECK(grid(loss.kernels(Pass::forward, {}).front()) == G{8, 1, 1, 256});
    CHECK(grid(loss.loss_sum_kernels().front()) == G{1, 1, 1, 1});
}

TEST_CASE("relu gradient") {
    const Shape4 in{2, 3, 4, 4};
    const Relu relu(in);
    std::vector<double> x = random_values<double>(in.elements(), 21);
    const std::vector<double> r = random_values<double>(in.elements(), 22);
    auto loss = [&] {
        std::vector<double> y(in.elements());
        relu_forward<double>(relu, cview(x, in), view(y, in), whole_batch(in));
        return dot(y, r);
    };
    std::vector<double> y(in.elements()), dx(in.elements());
    relu_forward<double>(relu, cview(x, in), view(y, in), whole_batch(in));
    relu_backward_data<double>(relu, cview(y, in), cview(r, in), view(dx, in), whole_batch(in));
    check_gradient(dx, numeric_gradient(x, loss), "relu dx");
}

TEST_CASE("pooling: ceil mode sizes, clipped windows, gradients") {
    // Caffe/PyTorch rounding: GoogLeNet's 112 -> 56, 56 -> 28, 14 -> 7 and
    // the 2x2 -> 1x1 a 32x32 GoogLeNet needs; ResNet's floor-mode 112 -> 56.
    CHECK(pooled_size(112, 3, 2, 0, true) == 56);
    CHECK(pooled_size(56, 3, 2, 0, true) == 28);
    CHECK(pooled_size(14, 3, 2, 0, true) == 7);
    CHECK(pooled_size(14, 5, 3, 0, true) == 4);
    CHECK(pooled_size(2, 3, 2, 0, true) == 1);
    CHECK(pooled_size(2, 3, 2, 0, false) == 0);
    CHECK(pooled_size(112, 3, 2, 1, false) == 56);
    CHECK(pooled_size(28, 3, 1, 1, true) == 28);
    CHECK(pooled_size(5, 2, 2, 1, true) == 3);  // the last window would start in the right padding: dropped

    struct Case {
        const char* name;
        PoolConfig config;
        Shape4 in;
        Shape4 out;
    };
    const Case cases[] = {
        {"max 3x3/2 ceil", {PoolMode::max, 3, 2, 0, true, false}, {2, 2, 6, 6}, {2, 2, 3, 3}},
        {"max 3x3/1 pad 1 ceil (inception)", {PoolMode::max, 3, 1, 1, true, false}, {1, 2, 4, 4}, {1, 2, 4, 4}},
        {"max 3x3/2 pad 1 floor (ResNet)", {PoolMode::max, 3, 2, 1, false, false}, {2, 2, 7, 7}, {2, 2, 4, 4}},
        {"avg 3x3/2 pad 1 ceil", {PoolMode::average, 3, 2, 1, true, false}, {2, 2, 6, 6}, {2, 2, 4, 4}},
        {"avg 5x5/3 ceil (auxiliary head)", {PoolMode::average, 5, 3, 0, true, false}, {1, 2, 9, 9}, {1, 2, 3, 3}},
        {"global avg", {PoolMode::average, 0, 1, 0, false, true}, {2, 3, 3, 5}, {2, 3, 1, 1}},
    };
    for (const Case& c : cases) {
        const std::string name = c.name;
        CAPTURE(name);
        const Pool2d pool(c.in, c.config);
        REQUIRE(pool.out == c.out);
        std::vector<double> x = random_values<double>(c.in.elements(), 31);
        const std::vector<double> r = random_values<double>(c.out.elements(), 32);
        auto loss = [&] {
            std::vector<double> y(c.out.elements());
            pool_forward<double>(pool, cview(x, c.in), view(y, c.out), whole_batch(c.in));
            return dot(y, r);
        };
        std::vector<double> y(c.out.elements()), dx(c.in.elements());
        pool_forward<double>(pool, cview(x, c.in), view(y, c.out), whole_batch(c.in));
        pool_backward_data<double>(pool, cview(x, c.in), cview(y, c.out), cview(r, c.out), view(dx, c.in),
                                   whole_batch(c.in));
        check_gradient(dx, numeric_gradient(x, loss), c.name);
    }
    // A clipped ceil-mode average window divides by its part inside the
    // (padded) image: the last 3x3/2 window of 6 columns covers columns 4, 5.
    const Pool2d avg(Shape4{1, 1, 3, 6}, PoolConfig{PoolMode::average, 3, 2, 0, true, false});
    REQUIRE(avg.out == Shape4{1, 1, 1, 3});
    std::vector<double> x{1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6}, y(3);
    pool_forward<double>(avg, cview(x, avg.in), view(y, avg.out), whole_batch(avg.in));
    CHECK(y[0] == 2.0);
    CHECK(y[1] == 4.0);
    CHECK(y[2] == 5.5);
    CHECK_THROWS_AS(Pool2d(Shape4{1, 1, 2, 2}, PoolConfig{PoolMode::max, 3, 2, 0, false, false}), ShapeError);
}

TEST_CASE("local response normalization gradient") {
    // A large alpha, so the normalization term matters to the check.
    const Shape4 in{2, 7, 3, 2};
    const Lrn lrn(in, LrnConfig{5, 0.5f, 0.75f, 2.0f});
    std::vector<double> x = random_values<double>(in.elements(), 41);
    const std::vector<double> r = random_values<double>(in.elements(), 42);
    auto loss = [&] {
        std::vector<double> y(in.elements());
        lrn_forward<double>(lrn, cview(x, in), view(y, in), whole_batch(in));
        return dot(y, r);
    };
    std::vector<double> y(in.elements()), dx(in.elements());
    lrn_forward<double>(lrn, cview(x, in), view(y, in), whole_batch(in));
    // y = x * (k + alpha/size * window sum of squares)^-beta, at channel 0
    // (window: channels 0..2) of image 0, pixel 0.
    const double s0 = 2.0 + 0.5 / 5 * (x[0] * x[0] + x[6] * x[6] + x[12] * x[12]);
    CHECK(y[0] == doctest::Approx(x[0] * std::pow(s0, -0.75)).epsilon(1e-12));
    lrn_backward_data<double>(lrn, cview(x, in), cview(y, in), cview(r, in), view(dx, in), whole_batch(in));
    check_gradient(dx, numeric_gradient(x, loss), "lrn dx");
    CHECK_THROWS_AS(Lrn(in, LrnConfig{4, 1e-4f, 0.75f, 1.0f}), ShapeError);
}

TEST_CASE("fully connected gradients") {
    const Shape4 in{3, 2, 2, 3};
    const FullyConnected fc(in, FullyConnectedConfig{5, true});
    REQUIRE(fc.out == Shape4{3, 5, 1, 1});
    std::vector<double> x = random_values<double>(in.elements(), 51);
    std::vector<double> w = random_values<double>(5 * 12, 52);
    std::vector<double> b = random_values<double>(5, 53);
    const std::vector<double> r = random_values<double>(fc.out.elements(), 54);
    auto loss = [&] {
        std::vector<double> y(fc.out.elements());
        fully_connected_forward<double>(fc, cview(x, in), w.data(), b.data(), view(y, fc.out), whole_batch(in));
        return dot(y, r);
    };
    std::vector<double> dx(in.elements()), dw(w.size()), db(b.size());
    fully_connected_backward_data<double>(fc, cview(r, fc.out), w.data(), view(dx, in), whole_batch(in));
    fully_connected_backward_weight<double>(fc, cview(x, in), cview(r, fc.out), dw.data(), db.data());
    check_gradient(dx, numeric_gradient(x, loss), "fc dx");
    check_gradient(dw, numeric_gradient(w, loss), "fc dweight");
    check_gradient(db, numeric_gradient(b, loss), "fc dbias");
}

TEST_CASE("dropout: seeded mask from (seed, layer, iteration, element), gradient, drop rate") {
    const Shape4 in{4, 8, 8, 8};
    const Dropout drop(in, DropoutConfig{0.4f});
    const DropoutKey key{7, 3, 11};
    std::vector<double> x = random_values<double>(in.elements(), 61);
    const std::vector<double> r = random_values<double>(in.elements(), 62);
    std::vector<double> y(in.elements()), dx(in.elements());
    dropout_forward<double>(drop, key, cview(x, in), view(y, in), whole_batch(in));
    std::size_t dropped = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        const bool keep = dropout_keeps(drop, key, i);
        dropped += keep ? 0 : 1;
        CHECK(y[i] == (keep ? x[i] * static_cast<double>(1.0f / 0.6f) : 0.0));
    }
    CHECK(static_cast<double>(dropped) / static_cast<double>(x.size()) == doctest::Approx(0.4).epsilon(0.05));
    // Another iteration or layer draws another mask.
    std::size_t same_next_iteration = 0, same_other_layer = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        same_next_iteration += dropout_keeps(drop, key, i) == dropout_keeps(drop, DropoutKey{7, 3, 12}, i);
        same_other_layer += dropout_keeps(drop, key, i) == dropout_keeps(drop, DropoutKey{7, 4, 11}, i);
    }
    CHECK(same_next_iteration < x.size() * 7 / 10);
    CHECK(same_other_layer < x.size() * 7 / 10);
    auto loss = [&] {
        std::vector<double> yy(in.elements());
        dropout_forward<double>(drop, key, cview(x, in), view(yy, in), whole_batch(in));
        return dot(yy, r);
    };
    dropout_backward_data<double>(drop, key, cview(r, in), view(dx, in), whole_batch(in));
    check_gradient(dx, numeric_gradient(x, loss), "dropout dx");
}

TEST_CASE("add and gradient sum") {
    const Shape4 in{2, 2, 2, 2};
    const Add add(in, in);
    std::vector<float> a = random_values<float>(16, 71), b = random_values<float>(16, 72), y(16);
    add_forward<float>(add, cview(a, in), cview(b, in), view(y, in), whole_batch(in));
    for (std::size_t i = 0; i < 16; ++i) CHECK(y[i] == a[i] + b[i]);
    CHECK_THROWS_AS(Add(in, Shape4{2, 3, 2, 2}), ShapeError);
    CHECK_FALSE(add.has_pass(Pass::backward_data));

    // With a fused ReLU: the bits of add then ReLU, and ReLU's backward pass to run.
    const Add fused(in, in, true);
    const Relu relu(in);
    std::vector<float> fy(16), ry(16);
    add_forward<float>(fused, cview(a, in), cview(b, in), view(fy, in), whole_batch(in));
    relu_forward<float>(relu, cview(y, in), view(ry, in), whole_batch(in));
    CHECK(same_bits(fy, ry));
    CHECK(std::count(fy.begin(), fy.end(), 0.0f) > 0);
    CHECK(fused.has_pass(Pass::backward_data));
    CHECK(fused.splittable(Pass::backward_data));
    CHECK(fused.kernels(Pass::backward_data, {}).size() == 1);
    CHECK(fused.work(Pass::backward_data).dram_bytes == relu.work(Pass::backward_data).dram_bytes);

    // ((p0 + p1) + p2), in that order, elementwise.
    std::vector<float> p0 = random_values<float>(16, 73), p1 = random_values<float>(16, 74),
                       p2 = random_values<float>(16, 75), total(16);
    const std::vector<TensorView<const float>> parts{cview(p0, in), cview(p1, in), cview(p2, in)};
    gradient_sum<float>(parts, view(total, in), whole_batch(in));
    for (std::size_t i = 0; i < 16; ++i) CHECK(total[i] == (p0[i] + p1[i]) + p2[i]);
}

TEST_CASE("softmax cross-entropy: loss, weighted mean, gradient") {
    const Shape4 in{3, 5, 1, 1};
    const SoftmaxCrossEntropy loss_layer(in, SoftmaxLossConfig{0.3f});
    std::vector<double> z = random_values<double>(in.elements(), 81, -3.0, 3.0);
    const std::vector<std::int32_t> labels{4, 0, 2};
    auto loss = [&] {
        std::vector<double> p(in.elements()), per(3);
        double total = 0.0;
        softmax_loss_forward<double>(loss_layer, cview(z, in), labels.data(), view(p, in), per.data(), whole_batch(in));
        softmax_loss_sum<double>(loss_layer, per.data(), &total);
        return total;
    };
    std::vector<double> p(in.elements()), per(3), dz(in.elements());
    softmax_loss_forward<double>(loss_layer, cview(z, in), labels.data(), view(p, in), per.data(), whole_batch(in));
    double sum = 0.0;
    for (std::uint32_t c = 0; c < 5; ++c) sum += std::exp(z[c]);
    CHECK(per[0] == doctest::Approx(std::log(sum) - z[4]).epsilon(1e-12));
    CHECK(loss() == doctest::Approx(static_cast<double>(0.3f) * (per[0] + per[1] + per[2]) / 3).epsilon(1e-12));
    softmax_loss_backward_data<double>(loss_layer, cview(p, in), labels.data(), view(dz, in), whole_batch(in));
    check_gradient(dz, numeric_gradient(z, loss), "softmax loss dlogits");
    const std::vector<std::int32_t> bad{0, 5, 1};
    CHECK_THROWS_WITH_AS(softmax_loss_forward<double>(loss_layer, cview(z, in), bad.data(), view(p, in), per.data(),
                                                      whole_batch(in)),
                         doctest::Contains("image 1 has label 5"), ShapeError);
}

TEST_CASE("layer constants must be finite: inf or NaN would turn the whole training step to NaN") {
    const Shape4 in{2, 4, 3, 3};
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    CHECK_NOTHROW(Lrn(in, LrnConfig{3, 0.0f, 0.75f, 1.0f}));
    CHECK_THROWS_WITH_AS(Lrn(in, LrnConfig{3, nan, 0.75f, 1.0f}), "lrn: alpha must be a finite number >= 0, got nan", ShapeError);
    CHECK_THROWS_WITH_AS(Lrn(in, LrnConfig{3, inf, 0.75f, 1.0f}), "lrn: alpha must be a finite number >= 0, got inf", ShapeError);
    CHECK_THROWS_WITH_AS(Lrn(in, LrnConfig{3, -1e-4f, 0.75f, 1.0f}), doctest::Contains("alpha must be"), ShapeError);
    CHECK_THROWS_WITH_AS(Lrn(in, LrnConfig{3, 1e-4f, -inf, 1.0f}), "lrn: beta must be a finite number, got -inf", ShapeError);
    CHECK_THROWS_WITH_AS(Lrn(in, LrnConfig{3, 1e-4f, 0.75f, inf}), "lrn: k must be a finite number > 0, got inf", ShapeError);
    CHECK_THROWS_WITH_AS(BatchNorm2d(in, BatchNormConfig{inf, 0.1f}),
                         "batch norm: epsilon must be a finite number > 0, got inf", ShapeError);
    CHECK_THROWS_WITH_AS(SoftmaxCrossEntropy(Shape4{2, 5, 1, 1}, SoftmaxLossConfig{nan}),
                         "softmax loss: the weight must be a finite number > 0, got nan", ShapeError);
    CHECK_THROWS_WITH_AS(SoftmaxCrossEntropy(Shape4{2, 5, 1, 1}, SoftmaxLossConfig{inf}),
                         "softmax loss: the weight must be a finite number > 0, got inf", ShapeError);
    ConvConfig conv{8, 3, 1, 1, 1, true};
    conv.bias_init = 0.2f;
    CHECK_NOTHROW(Conv2d(in, conv));
    conv.bias_init = nan;
    CHECK_THROWS_WITH_AS(Conv2d(in, conv), "convolution: the bias must start at a finite value, got nan", ShapeError);
}

TEST_CASE("GEMM estimates stay launchable when a dimension has more than 65535 tiles") {
    // An FC layer on 2048x2048 RGB images: 12.6M inputs, 262144 column tiles of dx.
    const FullyConnected fc(Shape4{1, 3, 2048, 2048}, FullyConnectedConfig{10, true});
    for (const Pass p : {Pass::forward, Pass::backward_data, Pass::backward_weight}) {
        CAPTURE(static_cast<int>(p));
        for (const braid::KernelEstimate& k : fc.kernels(p, EstimateOptions{})) {
            CAPTURE(k.shape.name);
            CHECK(braid::launch_problem(k.shape).empty());
        }
    }
    const std::vector<braid::KernelEstimate> dx = fc.kernels(Pass::backward_data, EstimateOptions{});
    REQUIRE_FALSE(dx.empty());
    CHECK(dx.front().shape.grid.y == 1);
    CHECK(dx.front().shape.blocks() > braid::LaunchLimits::max_grid_yz);
}

TEST_CASE("per-channel reductions: layers refuse more channels than a CUDA grid has rows, naming the limit") {
    // 65535 channels still plan: each reduction kernel's grid fits.
    const BatchNorm2d widest(Shape4{1, 65535, 1, 1}, BatchNormConfig{});
    for (const Pass p : {Pass::forward, Pass::backward_data, Pass::backward_weight})
        for (const braid::KernelEstimate& k : widest.kernels(p, EstimateOptions{})) {
            CAPTURE(k.shape.name);
            CHECK(braid::launch_problem(k.shape).empty());
        }
    CHECK_THROWS_WITH_AS(BatchNorm2d(Shape4{1, 65536, 1, 1}, BatchNormConfig{}),
                         "batch norm: 65536 channels, more than the 65535 braid's batch norm kernels reduce (one CUDA grid "
                         "row per channel)",
                         ShapeError);
    CHECK_THROWS_WITH_AS(Conv2d(Shape4{1, 3, 4, 4}, ConvConfig{70000, 1, 1, 0, 1, true}),
                         "convolution: a bias over 70000 output channels: braid's bias gradient reduces at most 65535 "
                         "channels (one CUDA grid row each); leave the bias out",
                         ShapeError);
    CHECK_NOTHROW(Conv2d(Shape4{1, 3, 4, 4}, ConvConfig{70000, 1, 1, 0, 1, false}));
}

TEST_CASE("SGD with momentum and weight decay") {
    const SgdConfig sgd{0.1f, 0.9f, 0.01f};
    std::vector<float> w{1.0f, -2.0f}, g{0.5f, 0.25f}, v{0.2f, 0.0f};
    sgd_momentum_update<float>(sgd, w.data(), g.data(), v.data(), 2, true);
    // v = 0.9 v + (g + 0.01 w); w -= 0.1 v
    CHECK(v[0] == 0.9f * 0.2f + (0.5f + 0.01f * 1.0f));
    CHECK(w[0] == 1.0f - 0.1f * v[0]);
    CHECK(v[1] == 0.9f * 0.0f + (0.25f + 0.01f * -2.0f));
    std::vector<float> b{1.0f}, gb{0.5f}, vb{0.0f};
    sgd_momentum_update<float>(sgd, b.data(), gb.data(), vb.data(), 1, false);  // not decayed
    CHECK(vb[0] == 0.5f);
    CHECK(b[0] == 1.0f - 0.1f * 0.5f);
}

TEST_CASE("splittable bodies: parts give the whole-batch bits and touch only their images") {
    const Shape4 in{5, 4, 6, 6};
    const std::vector<ImageRange> parts{{0, 2}, {2, 3}, {3, 5}};
    const std::vector<float> x = random_values<float>(in.elements(), 91);
    const std::vector<float> dy_in = random_values<float>(in.elements(), 92);
    const float sentinel = std::numeric_limits<float>::quiet_NaN();

    // Runs `body(range, out)` once over the batch and once per part into a
    // NaN-filled buffer; after each part, only its images may have changed.
    auto check_parts = [&](const char* name, Shape4 out_shape, auto&& body) {
        CAPTURE(name);
        std::vector<float> whole(out_shape.elements(), sentinel), split(out_shape.elements(), sentinel);
        body(whole_batch(out_shape), whole);
        const std::uint64_t per_image = out_shape.image_elements();
        for (const ImageRange& r : parts) {
            body(r, split);
            for (std::uint32_t n = r.end; n < out_shape.n; ++n)
                for (std::uint64_t i = 0; i < per_image; ++i) REQUIRE(std::isnan(split[n * per_image + i]));
        }
        CHECK(same_bits(whole, split));
    };

    const Conv2d conv(in, ConvConfig{3, 3, 2, 1, 1, true});
    const std::vector<float> w = random_values<float>(conv.weight_elements(), 93), b = random_values<float>(3, 94);
    const std::vector<float> conv_dy = random_values<float>(conv.out.elements(), 95);
    check_parts("conv forward", conv.out, [&](ImageRange r, std::vector<float>& y) {
        conv_forward<float>(conv, cview(x, in), w.data(), b.data(), view(y, conv.out), r);
    });
    check_parts("conv backward_data", in, [&](ImageRange r, std::vector<float>& dx) {
        conv_backward_data<float>(conv, cview(conv_dy, conv.out), w.data(), view(dx, in), r);
    });
    const Conv2d conv1x7(in, ConvConfig{3, {1, 7}, 1, {0, 3}, 1, false});
    const std::vector<float> w1x7 = random_values<float>(conv1x7.weight_elements(), 101);
    const std::vector<float> dy1x7 = random_values<float>(conv1x7.out.elements(), 102);
    check_parts("1x7 conv forward", conv1x7.out, [&](ImageRange r, std::vector<float>& y) {
        conv_forward<float>(conv1x7, cview(x, in), w1x7.data(), nullptr, view(y, conv1x7.out), r);
    });
    check_parts("1x7 conv backward_data", in, [&](ImageRange r, std::vector<float>& dx) {
        conv_backward_data<float>(conv1x7, cview(dy1x7, conv1x7.out), w1x7.data(), view(dx, in), r);
    });
    const Relu relu(in);
    check_parts("relu forward", in,
                [&](ImageRange r, std::vector<float>& y) { relu_forward<float>(relu, cview(x, in), view(y, in), r); });
    check_parts("relu backward_data", in, [&](ImageRange r, std::vector<float>& dx) {
        relu_backward_data<float>(relu, cview(x, in), cview(dy_in, in), view(dx, in), r);
    });
    for (PoolMode mode : {PoolMode::max, PoolMode::average}) {
        const Pool2d pool(in, PoolConfig{mode, 3, 2, 0, true, false});
        std::vector<float> y(pool.out.elements());
        pool_forward<float>(pool, cview(x, in), view(y, pool.out), whole_batch(in));
        const std::vector<float> pdy = random_values<float>(pool.out.elements(), 96);
        check_parts("pool forward", pool.out, [&](ImageRange r, std::vector<float>& out) {
            pool_forward<float>(pool, cview(x, in), view(out, pool.out), r);
        });
        check_parts("pool backward_data", in, [&](ImageRange r, std::vector<float>& dx) {
            pool_backward_data<float>(pool, cview(x, in), cview(y, pool.out), cview(pdy, pool.out), view(dx, in), r);
        });
    }
    const Lrn lrn(in, LrnConfig{});
    std::vector<float> lrn_y(in.elements());
    lrn_forward<float>(lrn, cview(x, in), view(lrn_y, in), whole_batch(in));
    check_parts("lrn forward",
                in, [&](ImageRange r, std::vector<float>& y) { lrn_forward<float>(lrn, cview(x, in), view(y, in), r); });
    check_parts("lrn backward_data", in, [&](ImageRange r, std::vector<float>& dx) {
        lrn_backward_data<float>(lrn, cview(x, in), cview(lrn_y, in), cview(dy_in, in), view(dx, in), r);
    });
    const Dropout drop(in, DropoutConfig{0.5f});
    const DropoutKey key{1, 2, 3};
    check_parts("dropout forward", in, [&](ImageRange r, std::vector<float>& y) {
        dropout_forward<float>(drop, key, cview(x, in), view(y, in), r);
    });
    check_parts("dropout backward_data", in, [&](ImageRange r, std::vector<float>& dx) {
        dropout_backward_data<float>(drop, key, cview(dy_in, in), view(dx, in), r);
    });
    const Add add(in, in);
    check_parts("add forward", in, [&](ImageRange r, std::vector<float>& y) {
        add_forward<float>(add, cview(x, in), cview(dy_in, in), view(y, in), r);
    });
    check_parts("gradient sum", in, [&](ImageRange r, std::vector<float>& y) {
        const std::vector<TensorView<const float>> p{cview(x, in), cview(dy_in, in), cview(x, in)};
        gradient_sum<float>(p, view(y, in), r);
    });
    const FullyConnected fc(in, FullyConnectedConfig{7, true});
    const std::vector<float> fw = random_values<float>(7 * in.image_elements(), 97), fb = random_values<float>(7, 98);
    const std::vector<float> fdy = random_values<float>(fc.out.elements(), 99);
    check_parts("fc forward", fc.out, [&](ImageRange r, std::vector<float>& y) {
        fully_connected_forward<float>(fc, cview(x, in), fw.data(), fb.data(), view(y, fc.out), r);
    });
    check_parts("fc backward_data", in, [&](ImageRange r, std::vector<float>& dx) {
        fully_connected_backward_data<float>(fc, cview(fdy, fc.out), fw.data(), view(dx, in), r);
    });
    const Shape4 logits{5, 6, 1, 1};
    const SoftmaxCrossEntropy loss(logits, SoftmaxLossConfig{1.0f});
    const std::vector<float> z = random_values<float>(logits.elements(), 100);
    const std::vector<std::int32_t> labels{0, 5, 2, 3, 1};
    std::vector<float> probs(logits.elements()), per(5);
    softmax_loss_forward<float>(loss, cview(z, logits), labels.data(), view(probs, logits), per.data(),
                                whole_batch(logits));
    check_parts("softmax loss forward", logits, [&](ImageRange r, std::vector<float>& p) {
        std::vector<float> scratch(5);
        softmax_loss_forward<float>(loss, cview(z, logits), labels.data(), view(p, logits), scratch.data(), r);
    });
    check_parts("softmax loss backward_data", logits, [&](ImageRange r, std::vector<float>& g) {
        softmax_loss_backward_data<float>(loss, cview(probs, logits), labels.data(), view(g, logits), r);
    });
}

TEST_CASE("layers say which passes they have and which split") {
    const Shape4 in{2, 4, 8, 8};
    const LayerSpec conv = Conv2d(in, ConvConfig{4, 3, 1, 1, 1, true});
    CHECK(splittable(conv, Pass::forward));
    CHECK(splittable(conv, Pass::backward_data));
    CHECK_FALSE(splittable(conv, Pass::backward_weight));
    const LayerSpec bn = BatchNorm2d(in, BatchNormConfig{});
    CHECK_FALSE(splittable(bn, Pass::forward));
    CHECK_FALSE(splittable(bn, Pass::backward_data));
    const LayerSpec add = Add(in, in);
    CHECK(has_pass(add, Pass::forward));
    CHECK_FALSE(has_pass(add, Pass::backward_data));  // identity: the graph aliases the gradients
    const LayerSpec concat = Concat({in, in});
    CHECK_FALSE(has_pass(concat, Pass::forward));  // views
    CHECK(output_of(concat) == Shape4{2, 8, 8, 8});
}

}  // TEST_SUITE
