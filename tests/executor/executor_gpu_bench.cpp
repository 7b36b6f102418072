// bench-gpu-executor: host cost per op of the CUDA backend on a 2,000-op plan
// of empty kernels over 4 streams with waits, eager launches against graph
// replay, plus the iteration time with the GPU included. No Google
// Benchmark (the GPU machine has only what tools/gpu-check provides).
// Exits 77 without a CUDA device.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "braid/cuda/backend.hpp"
#include "braid/exec/executor.hpp"
#include "dispatch_graph.hpp"
#include "executor_kernels.h"

using namespace braid;
using Clock = std::chrono::steady_clock;

namespace {

struct Timing {
    double host_ns_per_op = 0;     // run() only, nothing waited for
    double iteration_us = 0;       // run() plus the GPU finishing it
};

Timing measure(Executor<CudaBackend>& ex, CudaBackend& backend, int iterations) {
    const double ops = static_cast<double>(ex.compiled().steps.size());
    double host_ns = 0;
    const auto start = Clock::now();
    for (int i = 0; i < iterations; ++i) {
        const auto t0 = Clock::now();
        ex.run();
        host_ns += std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
        backend.synchronize();
    }
    const double total_us = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    return Timing{host_ns / iterations / ops, total_us / iterations};
}

}  // namespace

int main() {
    const std::string reason = cuda::no_device_reason();
    if (!reason.empty()) {
        std::printf("%s: skipping the GPU benchmark\n", reason.c_str());
        return 77;
    }
    try {
        const OpGraph g = testing::dispatch_graph(2000, 8);
        const Plan plan = testing::dispatch_plan(g, 4, 8);
        std::vector<Executor<CudaBackend>::Body> bodies(
            g.op_count(), [](CudaLane& lane, const OpContext&) { (void)launch_empty(lane.stream); });

        CudaBackend eager;
        Executor<CudaBackend> ex(g, plan, eager, bodies);
        measure(ex, eager, 3);  // warm-up: lanes, handles, module loading
        const Timing e = measure(ex, eager, 20);

        CudaBackend graph(CudaBackendOptions{.mode = LaunchMode::graph});
        Executor<CudaBackend> gx(g, plan, graph, bodies);
        const auto c0 = Clock::now();
        gx.run();  // capture + instantiate + launch
        graph.synchronize();
        const double capture_ms = std::chrono::duration<double, std::milli>(Clock::now() - c0).count();
        measure(gx, graph, 3);
        const Timing r = measure(gx, graph, 20);

        std::printf("bench-gpu-executor: %zu ops, %u streams, %zu waits\n", g.op_count(), plan.stream_count(),
                    plan.waits.size());
        std::printf("%-8s %18s %18s\n", "mode", "host ns/op", "iteration us");
        std::printf("%-8s %18.1f %18.1f\n", "eager", e.host_ns_per_op, e.iteration_us);
        std::printf("%-8s %18.1f %18.1f\n", "graph", r.host_ns_per_op, r.iteration_us);
        std::printf("eager_host_ns_per_op: %.1f\n", e.host_ns_per_op);
        std::printf("graph_host_ns_per_op: %.1f\n", r.host_ns_per_op);
        std::printf("eager_iteration_us: %.1f\n", e.iteration_us);
        std::printf("graph_iteration_us: %.1f\n", r.iteration_us);
        std::printf("graph_capture_ms: %.2f\n", capture_ms);
        std::printf("graph_speedup_iteration: %.2f\n", e.iteration_us / r.iteration_us);
        return 0;
    } catch (const std::exception& ex) {
        std::fprintf(stderr, "bench-gpu-executor: %s\n", ex.what());
        return 1;
    }
}
