// The built-in demo network of braid-profile: seven ops of real CUDA work
// over device buffers, with a three-way branch, until the sample networks
// (GoogLeNet, ResNet) can be profiled.
//
//   zero_acc (memset) ----------------------------------------------+
//   gemm: C = A * B --+-- relu:    R = max(C, 0) -----+             |
//                     +-- colsum:  S = column sums of C +- combine --+- loss
//                     +-- copy_c:  C' = C (memcpy)  ----+  O = R*S + C'/2   acc += sum(O)
//
// Bodies take the stream to launch on; they only enqueue work.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "braid/cuda/resources.hpp"
#include "braid/exec/op_context.hpp"
#include "braid/graph/op_graph.hpp"
#include "braid/profiler/profile.hpp"

namespace braid::demo {

struct DemoConfig {
    int m = 1024;  // rows of A and C (multiple of 16)
    int n = 1024;  // columns of B and C (multiple of 32)
    int k = 512;   // inner dimension
    int loss_blocks = 64;

    ProfileSettings settings() const { return {{"m", m}, {"n", n}, {"k", k}, {"loss_blocks", loss_blocks}}; }
};

// The demo's op graph alone (no device memory). Throws Error for a bad
// configuration.
OpGraph demo_graph(const DemoConfig& config = {});

// What an op launches, in order: kernel names (a part of the demangled name)
// and transfer kinds.
struct ExpectedWork {
    std::vector<std::string> kernels;
    std::vector<TransferKind> transfers;
};

class DemoNetwork {
public:
    using Body = std::function<void(cudaStream_t, const OpContext&)>;

    // Builds the graph, allocates and fills the buffers on the current
    // device. Throws Error for a bad configuration, CudaError for CUDA.
    explicit DemoNetwork(DemoConfig config = {});

    const DemoConfig& config() const noexcept { return config_; }
    const OpGraph& graph() const noexcept { return graph_; }
    const std::vector<Body>& bodies() const noexcept { return bodies_; }  // by OpId
    const std::vector<ExpectedWork>& expected() const noexcept { return expected_; }  // by OpId

    // acc[0] after the last iteration (waits for the device).
    float loss() const;
    // "" when loss() matches a CPU computation in double precision within
    // rounding, otherwise what differs.
    std::string check() const;

private:
    DemoConfig config_;
    OpGraph graph_;
    std::vector<Body> bodies_;
    std::vector<ExpectedWork> expected_;
    std::vector<float> host_a_, host_b_;
    cuda::DeviceBuffer a_, b_, c_, r_, s_, cc_, o_, partials_, acc_;
};

}  // namespace braid::demo
