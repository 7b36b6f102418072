// cuDNN: check() for its statuses and an owning handle.
#pragma once

#include <cudnn.h>

#include <source_location>
#include <string>

#include "braid/cuda/error.hpp"
#include "braid/cuda/handle.hpp"

namespace braid::cuda {

inline std::string status_text(cudnnStatus_t status) {
    return std::string(cudnnGetErrorString(status)) + " (status " + std::to_string(static_cast<int>(status)) + ")";
}

inline void check(cudnnStatus_t status, const char* api, std::source_location where = std::source_location::current()) {
    if (status != CUDNN_STATUS_SUCCESS) throw_library_error(static_cast<int>(status), api, status_text(status), where);
}

inline void check_noexcept(cudnnStatus_t status, const char* api,
                           std::source_location where = std::source_location::current()) noexcept {
    if (status != CUDNN_STATUS_SUCCESS) report_library_error(api, status_text(status), where);
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
