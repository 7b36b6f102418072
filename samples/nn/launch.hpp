// Launch-shape models of the kernels the sample layers run on a GPU: what
// cuDNN, cuBLAS and simple elementwise kernels typically launch, reduced to
// three families. Shapes do not depend on the device; estimate_costs()
// turns them into times for any DeviceSpec. docs/samples.md lists the
// assumptions and where they come from.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "braid/model/estimate.hpp"

namespace braid::samples {

// C[m x n] = A[m x k] * B[k x n], `batch` independent times (convolution
// groups). For an implicit-GEMM convolution m is the output pixels of the
// batch (N*OH*OW), so the grid's x dimension grows with the batch.
struct GemmProblem {
    std::uint64_t m = 0;
    std::uint64_t n = 0;
    std::uint64_t k = 0;
    std::uint32_t batch = 1;
};

// The thread-block tile a GEMM kernel of `math` uses for a problem, and the
// resources such a kernel is compiled with.
struct GemmTile {
    std::uint32_t m = 0;
    std::uint32_t n = 0;
    std::uint32_t k = 0;
    std::uint32_t stages = 0;
    std::uint32_t threads = 0;
    std::uint32_t regs_per_thread = 0;
    std::uint32_t smem_bytes = 0;
    bool dynamic_smem = false;  // multistage (cp.async) kernels size shared memory at launch
};
GemmTile choose_gemm_tile(const GemmProblem& p, braid::MathMode math);

// The GEMM kernel, plus a reduction kernel when the k dimension is long and
// the output has too few tiles to fill a GPU (split-K, as deterministic
// cuDNN weight-gradient and cuBLAS kernels do: partial products are summed
// by a second kernel in a fixed order, never with atomics).
// `dram_bytes`: the operands' and result's bytes, moved once.
// `kind` classes the GEMM kernel; a split-K reduction is a reduction.
std::vector<braid::KernelEstimate> gemm_kernels(const std::string& name, const GemmProblem& p, double dram_bytes,
                                                braid::MathMode math, bool allow_split_k, braid::KernelClass kind);

// One thread per `elements_per_thread` elements, 256-thread blocks.
braid::KernelEstimate elementwise_kernel(const std::string& name, std::uint64_t elements, double flops,
                                         double dram_bytes, braid::KernelClass kind = braid::KernelClass::elementwise,
                                         std::uint32_t elements_per_thread = 4);

// One `threads`-thread block per row (an image for softmax), reducing the
// row in shared memory.
braid::KernelEstimate row_reduction_kernel(const std::string& name, std::uint64_t rows, double flops,
                                           double dram_bytes, braid::KernelClass kind = braid::KernelClass::reduction,
                                           std::uint32_t threads = 256);

// The kernels of a per-channel reduction over NCHW activations of `images`
// x `channels` x h x w, as the CUDA layers launch them
// (nn/channel_reduction.hpp): one over the (slice, channel) grid (partial
// sums in shared memory, or a pass that uses them), and the one thread per
// channel that finishes the partials.
braid::KernelEstimate channel_grid_kernel(const std::string& name, std::uint32_t images, std::uint32_t channels,
                                          std::uint32_t h, std::uint32_t w, double flops, double dram_bytes,
                                          braid::KernelClass kind);
braid::KernelEstimate channel_finish_kernel(const std::string& name, std::uint32_t channels, double flops,
                                            double dram_bytes, braid::KernelClass kind);

// Bytes of `elements` floats.
constexpr double float_bytes(std::uint64_t elements) { return static_cast<double>(elements) * 4.0; }

}  // namespace braid::samples
