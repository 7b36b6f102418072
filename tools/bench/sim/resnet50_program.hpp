// A synthetic but realistically sized ResNet-50 training iteration as a
// simulator Program: 53 convolutions (forward, backward-data, backward-weight),
// batch norm, ReLU, residual adds, pooling, FC, loss and SGD updates, with
// cuDNN-like tilings (grids from tens to tens of thousands of blocks) and
// roofline durations for the device. Streams: 0 main path, 1 residual
// branches, 2 weight gradients, 3 updates; cross-stream edges are record+wait.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "braid/model/device_spec.hpp"
#include "braid/sim/program.hpp"

namespace braid::bench {

class ResNet50Program {
public:
    ResNet50Program(const DeviceSpec& dev, std::uint32_t batch, sim::LaunchMode mode) : dev_(dev), n_(batch) {
        p_.stream_priorities = {-1, -1, 0, 0};
        p_.mode = mode;
        build();
    }
    const sim::Program& program() const noexcept { return p_; }

private:
    static constexpr std::uint32_t main_stream = 0, branch_stream = 1, wgrad_stream = 2, update_stream = 3;

    struct Tensor {
        std::uint32_t c, h, w;
    };
    struct Conv {
        std::string name;
        Tensor in, out;
        std::uint32_t k;  // kernel size
    };

    std::uint64_t elems(const Tensor& t) const { return std::uint64_t{n_} * t.c * t.h * t.w; }

    // Effective tensor-core throughput a cuDNN convolution reaches: ~35% of peak.
    double conv_ns(double flops) const { return std::max(4000.0, flops / (0.35 * dev_.peak_bf16_tflops * 1e3)); }
    // Streaming kernels reach ~80% of DRAM bandwidth, plus a launch-sized floor.
    double stream_ns(double bytes) const { return 2000.0 + bytes / (0.8 * dev_.dram_bytes_per_ns()); }

    static std::uint32_t ceil_div(std::uint64_t a, std::uint64_t b) { return static_cast<std::uint32_t>((a + b - 1) / b); }

    void launch(std::uint32_t stream, std::string label, std::string kernel, Dim3 grid, std::uint32_t threads,
                std::uint32_t regs, std::uint32_t smem, double ns, double bytes) {
        KernelCost k;
        k.shape.name = std::move(kernel);
        k.shape.grid = grid;
        k.shape.block = {threads, 1, 1};
        k.shape.regs_per_thread = regs;
        k.shape.dynamic_smem_bytes = smem;
        k.duration_ns = ns;
        k.dram_bytes = bytes;
        p_.actions.push_back({sim::ActionKind::launch, stream, static_cast<std::uint32_t>(p_.kernels.size())});
        p_.kernels.push_back(sim::Kernel{std::move(k), op_++, std::move(label)});
    }
    std::uint32_t record(std::uint32_t stream) {
        p_.actions.push_back({sim::ActionKind::record, stream, p_.event_count});
        return p_.event_count++;
    }
    void wait(std::uint32_t stream, std::uint32_t event) { p_.actions.push_back({sim::ActionKind::wait, stream, event}); }

    // Implicit GEMM M x N x K with 128 x (128 or 64) tiles, 256 threads,
    // 128 registers, 64 KiB of shared memory: 2 blocks per SM.
    void gemm(std::uint32_t stream, const std::string& label, const char* kernel, std::uint64_t m, std::uint64_t n,
              std::uint64_t k, std::uint32_t split_k = 1) {
        const std::uint32_t tile_n = n >= 128 ? 128 : 64;
        const Dim3 grid{ceil_div(m, 128), ceil_div(n, tile_n), split_k};
        launch(stream, label, kernel, grid, 256, 128, 64 * 1024, conv_ns(2.0 * double(m) * double(n) * double(k)), 0.0);
    }
    // Elementwise: 256 threads, 4 elements each, bf16.
    void pointwise(std::uint32_t stream, const std::string& label, const char* kernel, std::uint64_t elements,
                   double bytes_per_elem) {
        const double bytes = double(elements) * bytes_per_elem;
        launch(stream, label, kernel, {ceil_div(elements, 1024), 1, 1}, 256, 32, 0, stream_ns(bytes), bytes);
    }
    // Per-channel reduction over N*H*W: one block per 8 KiB of input.
    void reduce(std::uint32_t stream, const std::string& label, const char* kernel, const Tensor& t) {
        const double bytes = double(elems(t)) * 2.0;
        launch(stream, label, kernel, {t.c, ceil_div(std::uint64_t{n_} * t.h * t.w, 4096), 1}, 512, 40, 4096,
               stream_ns(bytes), bytes);
    }

    void conv_forward(std::uint32_t s, const Conv& c) {
        gemm(s, c.name + "/fwd", "implicit_gemm_fprop", std::uint64_t{n_} * c.out.h * c.out.w, c.out.c,
             std::uint64_t{c.in.c} * c.k * c.k);
    }
    void bn_forward(std::uint32_t s, const std::string& name, const Tensor& t, bool relu) {
        reduce(s, name + "/fwd", "bn_fwd_stats", t);
        pointwise(s, name + "/fwd", "bn_fwd_apply", elems(t), 4.0);
        if (relu) pointwise(s, name + "_relu/fwd", "relu_fwd", elems(t), 4.0);
    }
    void bn_backward(std::uint32_t s, const std::string& name, const Tensor& t, bool relu) {
        if (relu) pointwise(s, name + "_relu/bwd", "relu_bwd", elems(t), 6.0);
        reduce(s, name + "/bwd", "bn_bwd_reduce", t);
        pointwise(s, name + "/bwd", "bn_bwd_apply", elems(t), 6.0);
        update(name, 2 * t.c);
    }
    // Data gradient on `s`; the weight gradient and its update on side
    // streams, after the output gradient is ready.
    void conv_backward(std::uint32_t s, const Conv& c) {
        const std::uint32_t dy_ready = record(s);
        gemm(s, c.name + "/dgrad", "implicit_gemm_dgrad", std::uint64_t{n_} * c.in.h * c.in.w, c.in.c,
             std::uint64_t{c.out.c} * c.k * c.k);
        wait(wgrad_stream, dy_ready);
        const std::uint64_t reduction = std::uint64_t{n_} * c.out.h * c.out.w;
        const auto split_k = static_cast<std::uint32_t>(std::clamp<std::uint64_t>(reduction / 8192, 1, 32));
        gemm(wgrad_stream, c.name + "/wgrad", "implicit_gemm_wgrad", c.out.c, std::uint64_t{c.in.c} * c.k * c.k,
             reduction, split_k);
        update(c.name, std::uint64_t{c.out.c} * c.in.c * c.k * c.k);
    }
    void update(const std::string& name, std::uint64_t params) {
        const std::uint32_t grad_ready = record(wgrad_stream);
        wait(update_stream, grad_ready);
        pointwise(update_stream, name + "/sgd", "sgd_momentum", params, 16.0);
    }

    void build() {
        const Tensor image{3, 224, 224};
        const Conv conv1{"conv1", image, {64, 112, 112}, 7};
        conv_forward(main_stream, conv1);
        bn_forward(main_stream, "bn1", conv1.out, true);
        const Tensor pooled{64, 56, 56};
        pointwise(main_stream, "pool1/fwd", "max_pool_fwd", elems(pooled), 10.0);

        struct Block {
            Conv a, b, c;
            bool downsample;
            Conv ds;
        };
        std::vector<Block> blocks;
        Tensor x = pooled;
        const std::uint32_t widths[] = {64, 128, 256, 512}, depths[] = {3, 4, 6, 3};
        for (int st = 0; st < 4; ++st)
            for (std::uint32_t i = 0; i < depths[st]; ++i) {
                const std::uint32_t w = widths[st], stride = (st > 0 && i == 0) ? 2 : 1;
                const std::string name = "res" + std::to_string(st + 2) + char('a' + i);
                const Tensor mid{w, x.h, x.w}, mid2{w, x.h / stride, x.w / stride}, out{4 * w, x.h / stride, x.w / stride};
                Block b{{name + "_1x1a", x, mid, 1}, {name + "_3x3", mid, mid2, 3}, {name + "_1x1b", mid2, out, 1}, i == 0,
                        {name + "_proj", x, out, 1}};
                blocks.push_back(b);
                x = out;
            }

        // Forward: the projection shortcut runs on the branch stream.
        for (const Block& b : blocks) {
            std::uint32_t input_ready = 0;
            if (b.downsample) {
                input_ready = record(main_stream);
                wait(branch_stream, input_ready);
                conv_forward(branch_stream, b.ds);
                bn_forward(branch_stream, b.ds.name + "_bn", b.ds.out, false);
            }
            conv_forward(main_stream, b.a);
            bn_forward(main_stream, b.a.name + "_bn", b.a.out, true);
            conv_forward(main_stream, b.b);
            bn_forward(main_stream, b.b.name + "_bn", b.b.out, true);
            conv_forward(main_stream, b.c);
            bn_forward(main_stream, b.c.name + "_bn", b.c.out, false);
            if (b.downsample) wait(main_stream, record(branch_stream));
            pointwise(main_stream, b.c.name + "_add/fwd", "add_relu_fwd", elems(b.c.out), 6.0);
        }
        pointwise(main_stream, "avgpool/fwd", "avg_pool_fwd", elems(x), 2.0);
        gemm(main_stream, "fc/fwd", "gemm_fc_fwd", n_, 1000, 2048);
        pointwise(main_stream, "loss", "softmax_xent", std::uint64_t{n_} * 1000, 8.0);

        // Backward, last block first.
        gemm(main_stream, "fc/dgrad", "gemm_fc_dgrad", n_, 2048, 1000);
        {
            const std::uint32_t ready = record(main_stream);
            wait(wgrad_stream, ready);
            gemm(wgrad_stream, "fc/wgrad", "gemm_fc_wgrad", 1000, 2048, n_);
            update("fc", 1000 * 2048);
        }
        pointwise(main_stream, "avgpool/bwd", "avg_pool_bwd", elems(x), 2.0);
        for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) {
            const Block& b = *it;
            pointwise(main_stream, b.c.name + "_add/bwd", "relu_bwd", elems(b.c.out), 6.0);
            std::uint32_t grad_out = 0;
            if (b.downsample) {
                grad_out = record(main_stream);
                wait(branch_stream, grad_out);
                bn_backward(branch_stream, b.ds.name + "_bn", b.ds.out, false);
                conv_backward(branch_stream, b.ds);
            }
            bn_backward(main_stream, b.c.name + "_bn", b.c.out, false);
            conv_backward(main_stream, b.c);
            bn_backward(main_stream, b.b.name + "_bn", b.b.out, true);
            conv_backward(main_stream, b.b);
            bn_backward(main_stream, b.a.name + "_bn", b.a.out, true);
            conv_backward(main_stream, b.a);
            if (b.downsample) wait(main_stream, record(branch_stream));
            pointwise(main_stream, b.a.name + "_sum/bwd", "add_grad", elems(b.a.in), 6.0);
        }
        pointwise(main_stream, "pool1/bwd", "max_pool_bwd", elems(pooled), 10.0);
        bn_backward(main_stream, "bn1", conv1.out, true);
        conv_backward(main_stream, conv1);
    }

    const DeviceSpec& dev_;
    std::uint32_t n_;
    sim::Program p_;
    std::uint32_t op_ = 0;
};

}  // namespace braid::bench
