// A lane made by hand: what CudaBackend gives a body (a stream, cuDNN and
// cuBLAS handles bound to it, their workspaces, scratch), without a
// backend or a plan. For programs that call the CUDA layers directly: the
// GPU tests and bench-gpu-conv.
#pragma once

#include <cublas_v2.h>
#include <cudnn.h>

#include <cstddef>

#include "braid/cuda/backend.hpp"

namespace braid::samples::cuda {

class StandaloneLane {
public:
    explicit StandaloneLane(std::size_t cudnn_workspace_bytes = std::size_t{64} << 20,
                            std::size_t cublas_workspace_bytes = std::size_t{32} << 20)
        : stream_(braid::cuda::create_stream()), cublas_(braid::cuda::create_cublas()),
          cudnn_(braid::cuda::create_cudnn()), cublas_ws_(cublas_workspace_bytes), cudnn_ws_(cudnn_workspace_bytes) {
        braid::cuda::check(cublasSetStream(cublas_.get(), stream_.get()), "cublasSetStream");
        braid::cuda::check(cublasSetWorkspace(cublas_.get(), cublas_ws_.get(), cublas_ws_.bytes()),
                           "cublasSetWorkspace");
        braid::cuda::check(cudnnSetStream(cudnn_.get(), stream_.get()), "cudnnSetStream");
        lane_.stream = stream_.get();
        lane_.cublas = cublas_.get();
        lane_.cudnn = cudnn_.get();
        lane_.cublas_workspace = cublas_ws_.get();
        lane_.cublas_workspace_bytes = cublas_ws_.bytes();
        lane_.cudnn_workspace = cudnn_ws_.get();
        lane_.cudnn_workspace_bytes = cudnn_ws_.bytes();
    }
    StandaloneLane(const StandaloneLane&) = delete;
    StandaloneLane& operator=(const StandaloneLane&) = delete;
    ~StandaloneLane() { braid::cuda::check_noexcept(cudaStreamSynchronize(stream_.get()), "cudaStreamSynchronize"); }

    // The lane for one body: its scratch starts empty, and may grow unless
    // the body is being captured into a CUDA graph.
    braid::CudaLane& operator()(bool capturing = false) {
        lane_.scratch.begin_body(capturing);
        return lane_;
    }
    cudaStream_t stream() const noexcept { return stream_.get(); }
    void sync() const { braid::cuda::check(cudaStreamSynchronize(stream_.get()), "cudaStreamSynchronize"); }

private:
    braid::cuda::Stream stream_;
    braid::cuda::CublasHandle cublas_;
    braid::cuda::CudnnHandle cudnn_;
    braid::cuda::DeviceBuffer cublas_ws_, cudnn_ws_;
    braid::CudaLane lane_;
};

}  // namespace braid::samples::cuda
