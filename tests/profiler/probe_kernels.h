// A kernel with a known launch shape and resources, for checking that CUPTI's
// records carry exactly what was launched. Built by nvcc; no Boost.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

// Launches probe_kernel<<<grid, block, dynamic_smem_bytes, stream>>>(out).
// `out` needs grid * block floats.
void launch_probe(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                  std::size_t dynamic_smem_bytes, float* out, cudaStream_t stream);
const void* probe_kernel_address();
