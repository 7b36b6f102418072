// probe_kernel: static and dynamic shared memory and a handful of registers,
// so every field of a CUPTI kernel record has a value to compare.
#include <cuda_runtime_api.h>

#include "probe_kernels.h"

__global__ void probe_kernel(float* out) {
    __shared__ float fixed[96];  // 384 bytes of static shared memory
    extern __shared__ float dynamic[];
    const unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    const unsigned threads = blockDim.x * blockDim.y * blockDim.z;
    const unsigned b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    if (t < 96) fixed[t] = static_cast<float>(t);
    dynamic[t] = static_cast<float>(b);
    __syncthreads();
    out[b * threads + t] = fixed[(t + 1) % 96 % threads] + dynamic[(t + 1) % threads];
}

void launch_probe(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                  std::size_t dynamic_smem_bytes, float* out, cudaStream_t stream) {
    probe_kernel<<<dim3(gx, gy, gz), dim3(bx, by, bz), dynamic_smem_bytes, stream>>>(out);
}

const void* probe_kernel_address() { return reinterpret_cast<const void*>(&probe_kernel); }
