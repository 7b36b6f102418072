// Kernels with deliberately different register and shared-memory use, so the
// occupancy model can be compared with the runtime's answer. No Boost here.
#include <cuda_runtime_api.h>

#include "occupancy_kernels.h"

namespace {

__global__ void light_kernel(float* out) {
    out[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f;
}

// Many live values: the compiler needs many registers.
__global__ void __launch_bounds__(256) heavy_registers_kernel(float* out, int n) {
    float acc[48];
#pragma unroll
    for (int i = 0; i < 48; ++i) acc[i] = out[(threadIdx.x + i * 7) % n];
#pragma unroll 1
    for (int round = 0; round < n; ++round) {
#pragma unroll
        for (int i = 0; i < 48; ++i) acc[i] = acc[i] * acc[(i + 1) % 48] + static_cast<float>(round);
    }
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < 48; ++i) s += acc[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

__global__ void static_smem_kernel(float* out) {
    __shared__ float tile[6144];  // 24 KiB
    tile[threadIdx.x] = static_cast<float>(threadIdx.x);
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = tile[(threadIdx.x * 17) % 6144];
}

__global__ void dynamic_smem_kernel(float* out) {
    extern __shared__ float dyn[];
    dyn[threadIdx.x] = static_cast<float>(threadIdx.x);
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = dyn[blockDim.x - 1 - threadIdx.x];
}

}  // namespace

const void* occupancy_test_kernel(OccupancyTestKernel which) {
    switch (which) {
        case OccupancyTestKernel::light: return reinterpret_cast<const void*>(&light_kernel);
        case OccupancyTestKernel::heavy_registers: return reinterpret_cast<const void*>(&heavy_registers_kernel);
        case OccupancyTestKernel::static_smem: return reinterpret_cast<const void*>(&static_smem_kernel);
        case OccupancyTestKernel::dynamic_smem: return reinterpret_cast<const void*>(&dynamic_smem_kernel);
    }
    return nullptr;
}
