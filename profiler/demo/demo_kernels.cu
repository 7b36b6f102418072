// The demo network's kernels: a tiled GEMM, an elementwise ReLU, a column
// reduction, a broadcast combine and a two-kernel sum, with different launch
// shapes and resource use, so a profile shows several occupancy limiters.
// Every reduction has a fixed order: results are bitwise reproducible.
#include <cuda_runtime_api.h>

#include "demo_kernels.h"

namespace braid::demo {
namespace {

constexpr int tile = 16;

__global__ void gemm_tiled(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c, int m,
                           int n, int k) {
    __shared__ float as[tile][tile];
    __shared__ float bs[tile][tile];
    const int row = blockIdx.y * tile + threadIdx.y;
    const int col = blockIdx.x * tile + threadIdx.x;
    float acc = 0.0f;
    for (int t = 0; t < k; t += tile) {
        as[threadIdx.y][threadIdx.x] = (row < m && t + threadIdx.x < k) ? a[row * k + t + threadIdx.x] : 0.0f;
        bs[threadIdx.y][threadIdx.x] = (col < n && t + threadIdx.y < k) ? b[(t + threadIdx.y) * n + col] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int i = 0; i < tile; ++i) acc += as[threadIdx.y][i] * bs[i][threadIdx.x];
        __syncthreads();
    }
    if (row < m && col < n) c[row * n + col] = acc;
}

__global__ void relu(const float* __restrict__ in, float* __restrict__ out, size_t count) {
    const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < count) out[i] = fmaxf(in[i], 0.0f);
}

__global__ void column_sum(const float* __restrict__ c, float* __restrict__ sums, int m, int n) {
    extern __shared__ float partial[];
    const int col = blockIdx.x;
    float s = 0.0f;
    for (int row = threadIdx.x; row < m; row += blockDim.x) s += c[row * n + col];
    partial[threadIdx.x] = s;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) sums[col] = partial[0];
}

__global__ void combine(const float* __restrict__ r, const float* __restrict__ s, const float* __restrict__ c,
                        float* __restrict__ out, int m, int n) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < m && col < n) out[row * n + col] = r[row * n + col] * s[col] + 0.5f * c[row * n + col];
}

__global__ void sum_partials(const float* __restrict__ x, size_t count, float* __restrict__ partials) {
    extern __shared__ float buf[];
    float s = 0.0f;
    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
         i += static_cast<size_t>(gridDim.x) * blockDim.x)
        s += x[i];
    buf[threadIdx.x] = s;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) buf[threadIdx.x] += buf[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) partials[blockIdx.x] = buf[0];
}

__global__ void sum_final(const float* __restrict__ partials, int count, float* __restrict__ acc) {
    __shared__ float buf[64];
    float s = 0.0f;
    for (int i = threadIdx.x; i < count; i += blockDim.x) s += partials[i];
    buf[threadIdx.x] = s;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) buf[threadIdx.x] += buf[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) acc[0] += buf[0];
}

}  // namespace

void launch_gemm(const float* a, const float* b, float* c, int m, int n, int k, cudaStream_t stream) {
    const dim3 block(tile, tile);
    const dim3 grid((n + tile - 1) / tile, (m + tile - 1) / tile);
    gemm_tiled<<<grid, block, 0, stream>>>(a, b, c, m, n, k);
}

void launch_relu(const float* in, float* out, std::size_t count, cudaStream_t stream) {
    const unsigned blocks = static_cast<unsigned>((count + 255) / 256);
    relu<<<blocks, 256, 0, stream>>>(in, out, count);
}

void launch_colsum(const float* c, float* sums, int m, int n, cudaStream_t stream) {
    constexpr int threads = 128;
    column_sum<<<n, threads, threads * sizeof(float), stream>>>(c, sums, m, n);
}

void launch_combine(const float* r, const float* s, const float* c, float* out, int m, int n, cudaStream_t stream) {
    const dim3 block(32, 8);
    const dim3 grid((n + 31) / 32, (m + 7) / 8);
    combine<<<grid, block, 0, stream>>>(r, s, c, out, m, n);
}

void launch_loss(const float* x, std::size_t count, float* partials, int partial_blocks, float* acc,
                 cudaStream_t stream) {
    constexpr int threads = 256;
    sum_partials<<<partial_blocks, threads, threads * sizeof(float), stream>>>(x, count, partials);
    sum_final<<<1, 64, 0, stream>>>(partials, partial_blocks, acc);
}

const void* gemm_kernel_address() { return reinterpret_cast<const void*>(&gemm_tiled); }
const void* colsum_kernel_address() { return reinterpret_cast<const void*>(&column_sum); }

}  // namespace braid::demo
