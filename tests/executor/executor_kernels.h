// Kernels of the executor's GPU tests and GPU benchmark, compiled by nvcc
// (executor_kernels.cu, no Boost) and called from host code built by g++.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "hash_op.h"

// Runs the op's images [image_begin, image_end) (its only unit when it is not
// splittable), one block per image, on `arena` (device memory). Thread 0
// first spins for `delay_cycles`, which widens the window in which a missing
// wait would let another op see half-written bytes.
cudaError_t launch_hash_op(const hashop::OpDesc& op, std::uint32_t image_begin, std::uint32_t image_end,
                           std::uint8_t* arena, long long delay_cycles, cudaStream_t stream);

// A launch the runtime refuses: a 32x33 block, each dimension within its
// limit but 1056 threads, more than any GPU's 1024 per block. The CUDA
// runtime documents that as cudaErrorInvalidConfiguration; returns what the
// launch reported (cudaPeekAtLastError), left pending for the backend.
cudaError_t launch_invalid_configuration(cudaStream_t stream);

// An empty kernel, one block of 32 threads: the launch cost and nothing else.
cudaError_t launch_empty(cudaStream_t stream);
