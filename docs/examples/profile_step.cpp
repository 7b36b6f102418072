// The profiling example of docs/integration.md, compiled and run as a test
// (suite gpu; exit 77 without a CUDA device): a trainer's own step, run by
// an Executor<CudaBackend>, profiled with profile_executor, written as a
// profile, and planned from its measured costs.
#include <cstdio>
#include <string>
#include <vector>

#include <braid/braid.hpp>
#include <braid/cuda/backend.hpp>
#include <braid/cuda/device.hpp>
#include <braid/profiler/cuda/profile_executor.hpp>

int main() {
    if (const std::string why = braid::cuda::no_device_reason(); !why.empty()) {
        std::printf("%s\n", why.c_str());
        return 77;
    }
    try {
        braid::OpGraphBuilder g;
        const auto x = g.add_buffer("x", 1 << 20), a = g.add_buffer("a", 1 << 20), b = g.add_buffer("b", 1 << 20);
        g.add_op({"fill_x", braid::OpKind::forward, "x", {}, {x}});
        g.add_op({"copy_a", braid::OpKind::forward, "a", {x}, {a}});
        g.add_op({"copy_b", braid::OpKind::forward, "b", {x}, {b}});
        const braid::OpGraph graph = g.finalize();
        braid::cuda::DeviceBuffer dx(1 << 20), da(1 << 20), db(1 << 20);
        using Exec = braid::Executor<braid::CudaBackend>;
        const std::vector<Exec::Body> bodies{
            [&](braid::CudaLane& lane, const braid::OpContext&) {
                braid::cuda::check(cudaMemsetAsync(dx.get(), 1, 1 << 20, lane.stream), "cudaMemsetAsync");
            },
            [&](braid::CudaLane& lane, const braid::OpContext&) {
                braid::cuda::check(cudaMemcpyAsync(da.get(), dx.get(), 1 << 20, cudaMemcpyDeviceToDevice, lane.stream),
                                   "cudaMemcpyAsync");
            },
            [&](braid::CudaLane& lane, const braid::OpContext&) {
                braid::cuda::check(cudaMemcpyAsync(db.get(), dx.get(), 1 << 20, cudaMemcpyDeviceToDevice, lane.stream),
                                   "cudaMemcpyAsync");
            },
        };

        // [profile]
        // Your executor, on a serial plan: profile its iterations (they run for real).
        braid::CudaBackend backend;
        Exec executor(graph, braid::strategy::serial(graph), backend, bodies);
        braid::ProfileRun run;
        run.network = "my-net";
        const braid::DeviceSpec device = braid::cuda::device_spec_from_cuda(backend.device());
        const braid::profiler::CudaProfileResult result = braid::profiler::profile_executor(executor, device, run);
        for (const std::string& w : result.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
        braid::save_profile(result.profile, "my-net.profile.json");  // or: braid-plan --profile my-net.profile.json

        // Plan from what was measured.
        const braid::OpCosts costs = braid::costs_from_profile(result.profile, graph, device);
        braid::PlanOptions options;
        options.strategy = "braid";
        const braid::Plan plan = braid::make_plan(graph, device, costs, options);
        std::printf("%s", braid::profiler::format_layer_table(result.profile, graph, device).c_str());
        // [profile end]

        std::remove("my-net.profile.json");
        braid::validate(plan, graph);
        const bool every_op = result.profile.ops.size() == graph.op_count();
        // Ten measured iterations (CudaProfileOptions' default); CUPTI also saw each op's copy.
        bool measured = result.profile.run.measured_iterations == 10;
        for (const braid::ProfiledOp& op : result.profile.ops)
            measured = measured && op.duration.count == 10 && (result.profile.durations_only || !op.transfers.empty());
        std::printf("profiled %zu ops (%s), planned on %u streams: %s\n", result.profile.ops.size(),
                    std::string(braid::to_string(result.profile.timing)).c_str(), plan.stream_count(),
                    every_op && measured ? "ok" : "WRONG");
        return every_op && measured ? 0 : 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "profile example: %s\n", e.what());
        return 1;
    }
}
