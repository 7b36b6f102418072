// One place that decides what this build of braid can use. Everything else
// asks these macros instead of probing on its own.
#pragma once

#define BRAID_VERSION_MAJOR 0
#define BRAID_VERSION_MINOR 1
#define BRAID_VERSION_PATCH 0

#if __cplusplus < 202002L
#error "braid needs C++20 (-std=c++20)"
#endif

// The toolkit's host-only occupancy calculator (no GPU, no runtime needed).
#if defined(__has_include)
#if __has_include(<cuda_occupancy.h>)
#define BRAID_HAS_OCCUPANCY_HEADER 1
#else
#define BRAID_HAS_OCCUPANCY_HEADER 0
#endif
// The CUDA runtime API: only the opt-in headers under braid/cuda and braid/profiler/cuda use it.
#if __has_include(<cuda_runtime_api.h>)
#define BRAID_HAS_CUDA_RUNTIME 1
#else
#define BRAID_HAS_CUDA_RUNTIME 0
#endif
#else
#define BRAID_HAS_OCCUPANCY_HEADER 0
#define BRAID_HAS_CUDA_RUNTIME 0
#endif
