// Owning CUDA runtime objects: streams, events, graphs, executable graphs and
// device memory. Creation throws CudaError (check); destruction never throws
// (check_noexcept).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

#include "braid/cuda/error.hpp"
#include "braid/cuda/handle.hpp"

namespace braid::cuda {

namespace detail {
struct StreamTraits {
    using handle_type = cudaStream_t;
    static void destroy(cudaStream_t s) noexcept { check_noexcept(cudaStreamDestroy(s), "cudaStreamDestroy"); }
};
struct EventTraits {
    using handle_type = cudaEvent_t;
    static void destroy(cudaEvent_t e) noexcept { check_noexcept(cudaEventDestroy(e), "cudaEventDestroy"); }
};
struct GraphTraits {
    using handle_type = cudaGraph_t;
    static void destroy(cudaGraph_t g) noexcept { check_noexcept(cudaGraphDestroy(g), "cudaGraphDestroy"); }
};
struct GraphExecTraits {
    using handle_type = cudaGraphExec_t;
    static void destroy(cudaGraphExec_t g) noexcept {
        check_noexcept(cudaGraphExecDestroy(g), "cudaGraphExecDestroy");
    }
};
}  // namespace detail

using Stream = UniqueHandle<detail::StreamTraits>;
using Event = UniqueHandle<detail::EventTraits>;
using Graph = UniqueHandle<detail::GraphTraits>;
using GraphExec = UniqueHandle<detail::GraphExecTraits>;

// A stream with a CUDA priority (lower = more urgent); non-blocking by
// default, so it never synchronises with the legacy default stream.
inline Stream create_stream(int priority = 0, unsigned flags = cudaStreamNonBlocking) {
    cudaStream_t s = nullptr;
    check(cudaStreamCreateWithPriority(&s, flags, priority), "cudaStreamCreateWithPriority");
    return Stream(s);
}

// Events only order work here, so they skip timing by default.
inline Event create_event(unsigned flags = cudaEventDisableTiming) {
    cudaEvent_t e = nullptr;
    check(cudaEventCreateWithFlags(&e, flags), "cudaEventCreateWithFlags");
    return Event(e);
}

// cudaMalloc'ed device memory.
class DeviceBuffer {
public:
    DeviceBuffer() noexcept = default;
    explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
        if (bytes > 0) check(cudaMalloc(&ptr_, bytes), "cudaMalloc");
    }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    DeviceBuffer(DeviceBuffer&& o) noexcept
        : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
    DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
        if (this != &o) {
            reset();
            ptr_ = std::exchange(o.ptr_, nullptr);
            bytes_ = std::exchange(o.bytes_, 0);
        }
        return *this;
    }
    ~DeviceBuffer() { reset(); }

    void* get() const noexcept { return ptr_; }
    std::size_t bytes() const noexcept { return bytes_; }
    explicit operator bool() const noexcept { return ptr_ != nullptr; }

    [[nodiscard]] void* release() noexcept {
        bytes_ = 0;
        return std::exchange(ptr_, nullptr);
    }
    void reset() noexcept {
        if (ptr_ != nullptr) check_noexcept(cudaFree(ptr_), "cudaFree");
        ptr_ = nullptr;
        bytes_ = 0;
    }

private:
    void* ptr_ = nullptr;
    std::size_t bytes_ = 0;
};

}  // namespace braid::cuda
