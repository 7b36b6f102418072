// CUDA errors with the API that failed, the error's name and text, and the
// call site. Three policies: check() throws (normal calls), check_noexcept()
// reports and carries on (destructors, which never throw), and plain
// cudaError_t returns where a hot path must not throw.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdio>
#include <source_location>
#include <string>

#include "braid/error.hpp"

namespace braid::cuda {

class CudaError : public Error {
public:
    CudaError(cudaError_t code, std::string api, const std::string& message)
        : Error(message), code_(code), api_(std::move(api)) {}
    cudaError_t code() const noexcept { return code_; }
    const std::string& api() const noexcept { return api_; }

private:
    cudaError_t code_;
    std::string api_;
};

// A failed call of a CUDA library (cuBLAS, cuDNN): the API, the status's
// name and text. cublas.hpp and cudnn.hpp add check() overloads that throw it.
class LibraryError : public Error {
public:
    LibraryError(std::string api, int status, const std::string& message)
        : Error(message), api_(std::move(api)), status_(status) {}
    const std::string& api() const noexcept { return api_; }
    int status() const noexcept { return status_; }

private:
    std::string api_;
    int status_;
};

inline std::string describe(cudaError_t code, const char* api, const std::source_location& where) {
    return std::string(api) + " failed: " + cudaGetErrorName(code) + " (" + cudaGetErrorString(code) + ") at " +
           where.file_name() + ":" + std::to_string(where.line());
}

inline void check(cudaError_t code, const char* api, std::source_location where = std::source_location::current()) {
    if (code != cudaSuccess) throw CudaError(code, api, describe(code, api, where));
}

// For destructors: report on stderr, never throw.
inline void check_noexcept(cudaError_t code, const char* api,
                           std::source_location where = std::source_location::current()) noexcept {
    if (code != cudaSuccess) std::fprintf(stderr, "braid: %s\n", describe(code, api, where).c_str());
}

// "no CUDA device" when the runtime finds none (or no driver); otherwise "".
inline std::string no_device_reason() {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();  // clear it
        return std::string("no CUDA device (") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e) + ")";
    }
    if (count == 0) return "no CUDA device (the driver reports 0 devices)";
    return "";
}

}  // namespace braid::cuda
