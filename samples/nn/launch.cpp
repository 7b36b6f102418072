#include "nn/launch.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "nn/channel_reduction.hpp"

namespace braid::samples {

static_assert(channel_reduction_max_channels == braid::LaunchLimits::max_grid_yz,
              "a channel reduction's grid rows are CUDA's grid y");

namespace {

std::uint32_t ceil_div_u32(std::uint64_t a, std::uint64_t b) {
    const std::uint64_t q = (a + b - 1) / b;
    return static_cast<std::uint32_t>(std::min<std::uint64_t>(q, std::numeric_limits<std::int32_t>::max()));
}

std::string math_name(braid::MathMode m) {
    switch (m) {
        case braid::MathMode::fp32: return "fp32";
        case braid::MathMode::tf32: return "tf32";
        case braid::MathMode::fp16: return "fp16";
        case braid::MathMode::bf16: return "bf16";
    }
    return "fp32";
}

}  // namespace

GemmTile choose_gemm_tile(const GemmProblem& p, braid::MathMode math) {
    // Big tiles when both sides can fill them, 64-wide tiles otherwise: the
    // heuristic cuBLAS and cuDNN apply to keep tiles mostly full.
    const std::uint32_t tm = p.m >= 128 ? 128 : 64;
    const std::uint32_t tn = p.n >= 128 ? 128 : 64;
    const std::uint32_t big = std::max(tm, tn), small = std::min(tm, tn);
    GemmTile t;
    t.m = tm;
    t.n = tn;
    if (math == braid::MathMode::fp32) {
        // CUDA-core SGEMM (cuBLAS "sgemm_128x128x8"-style): double-buffered
        // static shared memory, 8 x 8 outputs per thread.
        t.k = 8;
        t.stages = 2;
        t.threads = (tm * tn) / 64;
        t.regs_per_thread = 128;
        t.smem_bytes = t.stages * (tm + tn) * t.k * 4;
        t.dynamic_smem = false;
        return t;
    }
    // Tensor-core tiles after CUTLASS's Ampere defaults, which cuDNN's
    // implicit-GEMM kernels mirror: 4 warps, a cp.async pipeline of 3 stages
    // of (tm + tn) x 32 elements in dynamic shared memory.
    const std::uint32_t element_bytes = (math == braid::MathMode::tf32) ? 4 : 2;
    t.k = 32;
    t.stages = 3;
    t.threads = 128;
    t.regs_per_thread = big == 128 && small == 128 ? 232 : (big == 128 ? 168 : 128);
    t.smem_bytes = t.stages * (tm + tn) * t.k * element_bytes;
    t.dynamic_smem = true;
    return t;
}

std::vector<braid::KernelEstimate> gemm_kernels(const std::string& name, const GemmProblem& p, double dram_bytes,
                                                braid::MathMode math, bool allow_split_k, braid::KernelClass kind) {
    const GemmTile t = choose_gemm_tile(p, math);
    const std::uint32_t tiles_m = ceil_div_u32(p.m, t.m), tiles_n = ceil_div_u32(p.n, t.n);
    const std::uint64_t tiles = std::uint64_t{tiles_m} * tiles_n * p.batch;

    // Split the k loop when the output alone gives fewer than ~128 tiles (a
    // wave on a big GPU) and each slice still has >= 2048 of k to run.
    std::uint32_t split = 1;
    if (allow_split_k && tiles < 128 && p.k >= 4096) {
        const std::uint64_t by_fill = (128 + tiles - 1) / tiles;
        const std::uint64_t by_length = p.k / 2048;
        split = static_cast<std::uint32_t>(std::clamp<std::uint64_t>(std::min(by_fill, by_length), 1, 32));
    }

    const double flops = 2.0 * static_cast<double>(p.m) * static_cast<double>(p.n) * static_cast<double>(p.k) *
                         static_cast<double>(p.batch);
    const double outputs = static_cast<double>(p.m) * static_cast<double>(p.n) * p.batch;

    braid::KernelEstimate main;
    main.shape.name = name + "_" + math_name(math) + "_" + std::to_string(t.m) + "x" + std::to_string(t.n) +
                      (split > 1 ? "_splitk" + std::to_string(split) : "");
    // CUDA caps grid y and z at 65535; past that the tiles run along x, as
    // GEMM libraries lay out large problems (an FC layer on 2048x2048 images
    // has 262144 column tiles).
    const std::uint64_t slices = std::uint64_t{p.batch} * split;
    if (tiles_n > braid::LaunchLimits::max_grid_yz || slices > braid::LaunchLimits::max_grid_yz)
        main.shape.grid = {static_cast<std::uint32_t>(std::min<std::uint64_t>(tiles * split, braid::LaunchLimits::max_grid_x)),
                           1, 1};
    else
        main.shape.grid = {tiles_m, tiles_n, static_cast<std::uint32_t>(slices)};
    main.shape.block = {t.threads, 1, 1};
    main.shape.regs_per_thread = t.regs_per_thread;
    if (t.dynamic_smem)
        main.shape.dynamic_smem_bytes = t.smem_bytes;
    else
        main.shape.static_smem_bytes = t.smem_bytes;
    main.flops = flops;
    main.dram_bytes = dram_bytes + (split > 1 ? float_bytes(static_cast<std::uint64_t>(outputs)) * (split - 1) : 0.0);
    main.math = math;
    main.kind = kind;
    main.tile_flops = 2.0 * static_cast<double>(tiles_m) * t.m * static_cast<double>(tiles_n) * t.n *
                      static_cast<double>(p.k) * static_cast<double>(p.batch);

    std::vector<braid::KernelEstimate> out{main};
    if (split > 1) {
        out.push_back(elementwise_kernel(name + "_splitk_reduce", static_cast<std::uint64_t>(outputs),
                                         outputs * (split - 1), outputs * 4.0 * (split + 1), braid::KernelClass::reduction));
        out.back().library_helper = true;
    }
    return out;
}

braid::KernelEstimate elementwise_kernel(const std::string& name, std::uint64_t elements, double flops,
                                         double dram_bytes, braid::KernelClass kind, std::uint32_t elements_per_thread) {
    const std::uint64_t per_block = std::uint64_t{256} * std::max<std::uint32_t>(1, elements_per_thread);
    braid::KernelEstimate k;
    k.shape.name = name;
    k.shape.grid = {std::max<std::uint32_t>(1, ceil_div_u32(elements, per_block)), 1, 1};
    k.shape.block = {256, 1, 1};
    k.shape.regs_per_thread = 32;
    k.flops = flops;
    k.dram_bytes = dram_bytes;
    k.math = braid::MathMode::fp32;
    k.kind = kind;
    return k;
}

braid::KernelEstimate row_reduction_kernel(const std::string& name, std::uint64_t rows, double flops,
                                           double dram_bytes, braid::KernelClass kind, std::uint32_t threads) {
    braid::KernelEstimate k;
    k.shape.name = name;
    k.shape.grid = {std::max<std::uint32_t>(1, ceil_div_u32(rows, 1)), 1, 1};
    k.shape.block = {std::max<std::uint32_t>(1, threads), 1, 1};
    k.shape.regs_per_thread = 40;
    k.shape.static_smem_bytes = k.shape.block.x * 8;  // a double per thread
    k.flops = flops;
    k.dram_bytes = dram_bytes;
    k.math = braid::MathMode::fp32;
    k.kind = kind;
    return k;
}

braid::KernelEstimate channel_grid_kernel(const std::string& name, std::uint32_t images, std::uint32_t channels,
                                          std::uint32_t h, std::uint32_t w, double flops, double dram_bytes,
                                          braid::KernelClass kind) {
    braid::KernelEstimate k = row_reduction_kernel(name, 1, flops, dram_bytes, kind, channel_block_threads);
    k.shape.grid = {channel_slices(images, h, w), std::max<std::uint32_t>(1, channels), 1};
    k.shape.regs_per_thread = 32;
    return k;
}

braid::KernelEstimate channel_finish_kernel(const std::string& name, std::uint32_t channels, double flops,
                                            double dram_bytes, braid::KernelClass kind) {
    braid::KernelEstimate k = row_reduction_kernel(name, channel_finish_blocks(std::max<std::uint32_t>(1, channels)),
                                                   flops, dram_bytes, kind, channel_finish_threads);
    k.shape.static_smem_bytes = 0;
    return k;
}

}  // namespace braid::samples
