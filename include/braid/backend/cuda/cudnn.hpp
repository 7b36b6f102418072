// cuDNN: check() for its statuses and an owning handle.
#pragma once

#include <cudnn.h>

#include <cstdio>
#include <source_location>
#include <string>

#include "braid/backend/cuda/error.hpp"
#include "braid/backend/cuda/handle.hpp"

namespace braid::cuda {

inline std::string describe(cudnnStatus_t status, const char* api, const std::source_location& where) {
    return std::string(api) + " failed: " + cudnnGetErrorString(status) + " (status " +
           std::to_string(static_cast<int>(status)) + ") at " + where.file_name() + ":" + std::to_string(where.line());
}

inline void check(cudnnStatus_t status, const char* api, std::source_location where = std::source_location::current()) {
    if (status != CUDNN_STATUS_SUCCESS)
        throw LibraryError(api, static_cast<int>(status), describe(status, api, where));
}

inline void check_noexcept(cudnnStatus_t status, const char* api,
                           std::source_location where = std::source_location::current()) noexcept {
    if (status != CUDNN_STATUS_SUCCESS) std::fprintf(stderr, "braid: %s\n", describe(status, api, where).c_str());
}

namespace detail {
struct CudnnTraits {
    using handle_type = cudnnHandle_t;
    static void destroy(cudnnHandle_t h) noexcept { check_noexcept(cudnnDestroy(h), "cudnnDestroy"); }
};
}  // namespace detail

using CudnnHandle = UniqueHandle<detail::CudnnTraits>;

inline CudnnHandle create_cudnn() {
    cudnnHandle_t h = nullptr;
    check(cudnnCreate(&h), "cudnnCreate");
    return CudnnHandle(h);
}

}  // namespace braid::cuda
