// Launchers of the demo network's kernels (demo_kernels.cu, built by nvcc).
// Plain C++ on both sides: no Boost, no braid headers. Each launcher only
// enqueues on `stream`; the caller checks cudaGetLastError (the CUDA backend
// does after every op body).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace braid::demo {

// C[m x n] = A[m x k] * B[k x n], row-major; m, n multiples of 16.
// 16 x 16 thread blocks over 16 x 16 tiles, 2 KiB of static shared memory.
void launch_gemm(const float* a, const float* b, float* c, int m, int n, int k, cudaStream_t stream);

// out[i] = max(in[i], 0): one thread per element, 256-thread blocks.
void launch_relu(const float* in, float* out, std::size_t count, cudaStream_t stream);

// sums[j] = sum over rows i of c[i][j]: one 128-thread block per column,
// a tree reduction in dynamic shared memory (deterministic).
void launch_colsum(const float* c, float* sums, int m, int n, cudaStream_t stream);

// out[i][j] = r[i][j] * s[j] + 0.5 * c[i][j]: 32 x 8 blocks; m a multiple of
// 8, n of 32.
void launch_combine(const float* r, const float* s, const float* c, float* out, int m, int n, cudaStream_t stream);

// acc[0] += sum of x[0..count): `partial_blocks` blocks of 256 threads write
// one partial sum each (dynamic shared memory), then one 64-thread block adds
// the partials in a fixed order. Two kernels, deterministic.
void launch_loss(const float* x, std::size_t count, float* partials, int partial_blocks, float* acc,
                 cudaStream_t stream);

// The kernels' addresses, for cudaFuncGetAttributes.
const void* gemm_kernel_address();
const void* colsum_kernel_address();

}  // namespace braid::demo
