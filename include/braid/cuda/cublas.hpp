// cuBLAS: check() for its statuses and an owning handle.
#pragma once

#include <cublas_v2.h>

#include <source_location>
#include <string>

#include "braid/cuda/error.hpp"
#include "braid/cuda/handle.hpp"

namespace braid::cuda {

inline std::string status_text(cublasStatus_t status) {
    return std::string(cublasGetStatusName(status)) + " (" + cublasGetStatusString(status) + ")";
}

inline void check(cublasStatus_t status, const char* api, std::source_location where = std::source_location::current()) {
    if (status != CUBLAS_STATUS_SUCCESS) throw_library_error(static_cast<int>(status), api, status_text(status), where);
}

inline void check_noexcept(cublasStatus_t status, const char* api,
                           std::source_location where = std::source_location::current()) noexcept {
    if (status != CUBLAS_STATUS_SUCCESS) report_library_error(api, status_text(status), where);
}

namespace detail {
struct CublasTraits {
    using handle_type = cublasHandle_t;
    static void destroy(cublasHandle_t h) noexcept { check_noexcept(cublasDestroy(h), "cublasDestroy"); }
};
}  // namespace detail

using CublasHandle = UniqueHandle<detail::CublasTraits>;

inline CublasHandle create_cublas() {
    cublasHandle_t h = nullptr;
    check(cublasCreate(&h), "cublasCreate");
    return CublasHandle(h);
}

}  // namespace braid::cuda
