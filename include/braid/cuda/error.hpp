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

// "api failed: what at file:line", the message of every CUDA and library error.
inline std::string failure_message(const char* api, const std::string& what, const std::source_location& where) {
    return std::string(api) + " failed: " + what + " at " + where.file_name() + ":" + std::to_string(where.line());
}

// The error policies for libraries whose calls return a status (cuBLAS,
// cuDNN): throw, or report on stderr for destructors.
inline void throw_library_error(int status, const char* api, const std::string& what, const std::source_location& where) {
    throw LibraryError(api, status, failure_message(api, what, where));
}
inline void report_library_error(const char* api, const std::string& what, const std::source_location& where) noexcept {
    std::fprintf(stderr, "braid: %s\n", failure_message(api, what, where).c_str());
}

inline std::string describe(cudaError_t code, const char* api, const std::source_location& where) {
    return failure_message(api, std::string(cudaGetErrorName(code)) + " (" + cudaGetErrorString(code) + ")", where);
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
