// cuBLAS: check() for its statuses and an owning handle.
#pragma once

#include <cublas_v2.h>

#include <cstdio>
#include <source_location>
#include <string>

#include "braid/backend/cuda/error.hpp"
#include "braid/backend/cuda/handle.hpp"

namespace braid::cuda {

inline std::string describe(cublasStatus_t status, const char* api, const std::source_location& where) {
    return std::string(api) + " failed: " + cublasGetStatusName(status) + " (" + cublasGetStatusString(status) +
           ") at " + where.file_name() + ":" + std::to_string(where.line());
}

inline void check(cublasStatus_t status, const char* api, std::source_location where = std::source_location::current()) {
    if (status != CUBLAS_STATUS_SUCCESS)
        throw LibraryError(api, static_cast<int>(status), describe(status, api, where));
}

inline void check_noexcept(cublasStatus_t status, const char* api,
                           std::source_location where = std::source_location::current()) noexcept {
    if (status != CUBLAS_STATUS_SUCCESS) std::fprintf(stderr, "braid: %s\n", describe(status, api, where).c_str());
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
