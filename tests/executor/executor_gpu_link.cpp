// A second translation unit of test-gpu-executor that includes the CUDA
// backend: the header-only backend links twice without ODR trouble.
#include "braid/cuda/backend.hpp"

static_assert(braid::ExecutionBackend<braid::CudaBackend>);

// Used by executor_gpu_test.cpp.
std::size_t cuda_backend_lanes_from_other_tu(const braid::CudaBackend& backend) { return backend.lane_count(); }
