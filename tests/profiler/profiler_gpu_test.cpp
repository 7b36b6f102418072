// The profiler on a real GPU: CUPTI records exactly what was launched, the
// demo network is attributed op by op (serial and concurrent plans), and the
// CUDA-event fallback makes a durations-only profile. Exit 77 without a GPU.
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

// device.hpp before cuda.hpp: device.hpp's unqualified detail::lowercase_alnum
// does not compile once braid::cuda::detail exists (resources.hpp).
#include "braid/cuda/backend.hpp"
#include "braid/cuda/device.hpp"
#include "braid/cuda/error.hpp"
#include "braid/cuda/resources.hpp"
#include "braid/exec/executor.hpp"
#include "braid/model/occupancy.hpp"
#include "braid/plan/plan_json.hpp"
#include "braid/plan/validate.hpp"
#include "braid/planner/strategies/nimble.hpp"
#include "braid/planner/strategies/serial.hpp"
#include "braid/profiler/attribution.hpp"
#include "braid/profiler/costs.hpp"
#include "braid/profiler/cuda/cupti.hpp"
#include "braid/profiler/cuda/profile_executor.hpp"
#include "braid/profiler/cuda/profile_on_cuda.hpp"
#include "braid/profiler/profile_json.hpp"
#include "demo/demo_network.hpp"
#include "probe_kernels.h"
#ifdef BRAID_TEST_PROFILE_TOOL
#include "profile_tool.hpp"
#include "train/net_settings.hpp"
#include "train/summary.hpp"
#include "train/training_graph.hpp"
#endif

using namespace braid;
using namespace braid::profiler;

namespace {

// Starts `t`, or fails the test saying why CUPTI could not start.
bool start_tracer(std::optional<CuptiTracer>& t) {
    try {
        t.emplace();
        return true;
    } catch (const CuptiError& e) {
        FAIL_CHECK("CUPTI could not start (" << to_string(e.failure()) << "): " << e.what());
    }
    return false;
}

struct DemoRun {
    demo::DemoNetwork net;
    CudaBackend backend;
    Executor<CudaBackend> executor;

    // `plan_for` makes the plan for the demo's graph.
    template <class PlanFor>
    explicit DemoRun(PlanFor plan_for) : executor(net.graph(), plan_for(net.graph()), backend, bodies(net)) {}

    static std::vector<Executor<CudaBackend>::Body> bodies(const demo::DemoNetwork& n) {
        std::vector<Executor<CudaBackend>::Body> out;
        for (const demo::DemoNetwork::Body& b : n.bodies())
            out.push_back([b](CudaLane& lane, const OpContext& ctx) { b(lane.stream, ctx); });
        return out;
    }

    CudaProfileResult profile(bool use_cupti, std::uint32_t iterations) {
        CudaProfileOptions o;
        o.warmup_iterations = 1;
        o.measured_iterations = iterations;
        o.use_cupti = use_cupti;
        o.stream_of = [this](const OpContext& ctx) { return backend.lane(ctx.lane).stream; };
        ProfileRun run;
        run.network = "demo";
        run.settings = net.config().settings();
        return profile_executor(executor, cuda::device_spec_from_cuda(0), run, o);
    }
};

// Every op of the demo has exactly the kernels and transfers it launches.
void check_demo_profile(const demo::DemoNetwork& net, const Profile& p, std::uint32_t iterations) {
    CHECK(p.timing == ProfileTiming::cupti);
    CHECK_FALSE(p.durations_only);
    CHECK(p.unattributed.empty());
    CHECK(p.dropped_records == 0);
    REQUIRE(p.ops.size() == net.graph().op_count());
    for (const Op& op : net.graph().ops()) {
        CAPTURE(op.name);
        const ProfiledOp* po = p.find_op(op.name);
        REQUIRE(po != nullptr);
        const demo::ExpectedWork& want = net.expected()[op.id];
        REQUIRE(po->kernels.size() == want.kernels.size());
        REQUIRE(po->transfers.size() == want.transfers.size());
        for (std::size_t i = 0; i < want.kernels.size(); ++i) {
            CAPTURE(po->kernels[i].shape.name);
            CHECK(po->kernels[i].shape.name.find(want.kernels[i]) != std::string::npos);
            CHECK(po->kernels[i].duration.count == iterations);
            CHECK(po->kernels[i].duration.min_ns > 0.0);
            CHECK(po->kernels[i].shape.regs_per_thread > 0);
        }
        for (std::size_t i = 0; i < want.transfers.size(); ++i) {
            CHECK(po->transfers[i].kind == want.transfers[i]);
            CHECK(po->transfers[i].duration.count == iterations);
        }
        CHECK(po->duration.count == iterations);
        CHECK(po->duration.min_ns > 0.0);
        // Every body was timed on the host, once per iteration; it launched something.
        REQUIRE(po->host);
        CHECK(po->host->count == iterations);
        CHECK(po->host->min_ns > 0.0);
    }
    REQUIRE(p.iteration);
    CHECK(p.iteration->count == iterations);
    REQUIRE(p.launch_api);
    CHECK(p.launch_api->median_ns > 0.0);
}

}  // namespace

TEST_CASE("CUPTI records a kernel with exactly the grid, block, shared memory and registers it was launched with") {
    std::optional<CuptiTracer> tracer;
    REQUIRE(start_tracer(tracer));
    MESSAGE("libcupti: " << tracer->library() << " (API " << tracer->library_version() << ")");
    constexpr unsigned gx = 7, gy = 3, gz = 2, bx = 64, by = 2, bz = 1;
    constexpr std::size_t dynamic_smem = 3000;
    cuda::DeviceBuffer out(sizeof(float) * gx * gy * gz * bx * by * bz);
    cudaFuncAttributes attr{};
    cuda::check(cudaFuncGetAttributes(&attr, probe_kernel_address()), "cudaFuncGetAttributes");

    tracer->discard();
    tracer->begin_iteration(0);
    OpContext ctx;
    ctx.op = 0;
    tracer->hook().op_begin(ctx);
    launch_probe(gx, gy, gz, bx, by, bz, dynamic_smem, static_cast<float*>(out.get()), nullptr);
    tracer->hook().op_end(ctx);
    cuda::check(cudaGetLastError(), "probe_kernel launch");
    launch_probe(1, 1, 1, 32, 1, 1, 128, static_cast<float*>(out.get()), nullptr);  // outside every op
    tracer->end_iteration();
    const Trace trace = tracer->take_trace();

    const Attribution a = attribute(trace, 1);
    REQUIRE(a.iterations.size() == 1);
    REQUIRE(a.work[0][0]);
    REQUIRE(a.work[0][0]->size() == 1);
    const WorkRef& w = a.work[0][0]->front();
    REQUIRE(w.kernel);
    const KernelActivity& k = trace.kernels[w.index];
    MESSAGE("recorded '" << k.name << "': " << k.regs_per_thread << " registers, " << k.static_smem_bytes
                         << " B static shared memory; cudaFuncGetAttributes: " << attr.numRegs << ", "
                         << attr.sharedSizeBytes);
    CHECK(k.name.find("probe_kernel") != std::string::npos);
    CHECK(k.grid == Dim3{gx, gy, gz});
    CHECK(k.block == Dim3{bx, by, bz});
    CHECK(k.dynamic_smem_bytes == dynamic_smem);
    CHECK(k.static_smem_bytes == attr.sharedSizeBytes);
    // CUPTI records the launch's registers: the compiled count (cudaFuncGetAttributes), at
    // least 16 (on the H200 this 14-register kernel shows 16; model/occupancy.hpp says why).
    CHECK(k.regs_per_thread == launch_registers_per_thread(static_cast<std::uint32_t>(attr.numRegs)));
    {
        // ... and the occupancy model answers the same for either number.
        const DeviceSpec dev = cuda::device_spec_from_cuda(0);
        KernelShape compiled{"probe", {gx, gy, gz}, {bx, by, bz}, static_cast<std::uint32_t>(attr.numRegs),
                             static_cast<std::uint32_t>(attr.sharedSizeBytes), static_cast<std::uint32_t>(dynamic_smem)};
        KernelShape recorded = compiled;
        recorded.regs_per_thread = k.regs_per_thread;
        const Occupancy by_attributes = occupancy(dev, compiled), by_cupti = occupancy(dev, recorded);
        CHECK(by_attributes.blocks_per_sm == by_cupti.blocks_per_sm);
        CHECK(by_attributes.regs_per_warp == by_cupti.regs_per_warp);
    }
    CHECK(k.end_ns > k.start_ns);
    if (trace.context_id) CHECK(k.context_id == *trace.context_id);

    REQUIRE(a.unattributed.size() == 1);
    CHECK(a.unattributed[0].name.find("probe_kernel") != std::string::npos);
    CHECK(a.unattributed[0].reason.find("outside every op") != std::string::npos);
}

TEST_CASE("only one CUPTI tracer at a time, and the refusal says why") {
    std::optional<CuptiTracer> first;
    REQUIRE(start_tracer(first));
    try {
        CuptiTracer second;
        FAIL("a second tracer started");
    } catch (const CuptiError& e) {
        CHECK(e.failure() == CuptiFailure::another_profiler);
        CHECK(std::string(e.what()).find("another braid CuptiTracer") != std::string::npos);
    }
}

TEST_CASE("profiling the demo network on a serial plan attributes every kernel to its op") {
    const DeviceSpec dev = cuda::device_spec_from_cuda(0);
    DemoRun run([&](const OpGraph& g) { return strategy::serial(g, dev.key); });
    const CudaProfileResult r = run.profile(true, 3);
    REQUIRE_MESSAGE(!r.cupti_error, (r.cupti_error ? r.cupti_error->what() : ""));
    for (const std::string& w : r.warnings) MESSAGE("warning: " << w);
    check_demo_profile(run.net, r.profile, 3);
    CHECK(run.net.check() == "");
    // The profile plans.
    const OpCosts costs = costs_from_profile(r.profile, run.net.graph(), dev);
    CHECK(costs[run.net.graph().op_id("loss")].kernels.size() == 2);
}

TEST_CASE("attribution holds when ops run concurrently on several streams") {
    const DeviceSpec dev = cuda::device_spec_from_cuda(0);
    DemoRun run([&](const OpGraph& g) { return strategy::nimble(g, dev.key); });
    CHECK(run.executor.compiled().stream_count() >= 3);  // the three branches after the GEMM
    const CudaProfileResult r = run.profile(true, 2);
    REQUIRE_MESSAGE(!r.cupti_error, (r.cupti_error ? r.cupti_error->what() : ""));
    check_demo_profile(run.net, r.profile, 2);
    CHECK(run.net.check() == "");
}

TEST_CASE("profile_executor runs a graph-mode executor eagerly, then gives the mode back and clears the hook") {
    const DeviceSpec dev = cuda::device_spec_from_cuda(0);
    DemoRun run([&](const OpGraph& g) { return strategy::serial(g, dev.key); });
    run.backend.set_mode(LaunchMode::graph);
    const CudaProfileResult r = run.profile(true, 2);
    REQUIRE_MESSAGE(!r.cupti_error, (r.cupti_error ? r.cupti_error->what() : ""));
    check_demo_profile(run.net, r.profile, 2);
    CHECK(r.profile.run.warmup_iterations == 1);
    CHECK(r.profile.run.measured_iterations == 2);
    CHECK(run.backend.mode() == LaunchMode::graph);
    CHECK(run.backend.counters().eager_iterations == 3);
    CHECK(run.backend.counters().captures == 0);
    run.executor.run();  // graph mode again: captured, and no hook left to call
    CHECK(run.backend.counters().captures == 1);
    CHECK(run.net.check() == "");
}

TEST_CASE("the CUDA-event fallback times every op and makes a durations-only profile") {
    const DeviceSpec dev = cuda::device_spec_from_cuda(0);
    DemoRun run([&](const OpGraph& g) { return strategy::serial(g, dev.key); });
    const CudaProfileResult r = run.profile(false, 4);
    CHECK_FALSE(r.cupti_error);
    const Profile& p = r.profile;
    CHECK(p.timing == ProfileTiming::cuda_events);
    CHECK(p.durations_only);
    REQUIRE(p.ops.size() == run.net.graph().op_count());
    for (const ProfiledOp& op : p.ops) {
        CAPTURE(op.name);
        CHECK(op.kernels.empty());
        CHECK(op.duration.count == 4);
        CHECK(op.duration.min_ns > 0.0);
        REQUIRE(op.host);
        CHECK(op.host->count == 4);
    }
    REQUIRE(p.iteration);
    CHECK(p.iteration->count == 4);
    CHECK(run.net.check() == "");
    const OpCosts costs = costs_from_profile(p, run.net.graph(), dev);
    for (const OpCost& c : costs) {
        REQUIRE(c.kernels.size() == 1);
        CHECK(footprint(dev, occupancy(dev, c.kernels[0].shape), c.kernels[0].shape.blocks()).fraction == 1.0);
    }
}

#ifdef BRAID_TEST_PROFILE_TOOL
TEST_CASE("braid-profile's run writes a profile and a plan that load and fit the demo graph") {
    for (const bool no_cupti : {false, true}) {
        CAPTURE(no_cupti);
        tool::ProfileToolOptions o;
        o.warmup = 1;
        o.iters = 3;
        o.no_cupti = no_cupti;
        o.kernels = true;
        const std::filesystem::path dir = std::filesystem::temp_directory_path();
        o.out_profile = (dir / (no_cupti ? "braid-gpu-test.events.profile.json" : "braid-gpu-test.profile.json")).string();
        o.out_plan = (dir / (no_cupti ? "braid-gpu-test.events.plan.json" : "braid-gpu-test.plan.json")).string();
        REQUIRE(tool::run_profile_tool(o) == 0);
        const Profile p = load_profile(o.out_profile);
        CHECK(p.durations_only == no_cupti);
        CHECK(p.run.network == "demo");
        CHECK(p.run.measured_iterations == 3);
        const OpGraph graph = demo::demo_graph();
        CHECK(p.graph_fingerprint == graph.fingerprint());
        CHECK(p.ops.size() == graph.op_count());
        const Plan plan = load_plan(o.out_plan, graph);
        CHECK(plan.strategy == "braid");
        validate(plan, graph);
        std::remove(o.out_profile.c_str());
        std::remove(o.out_plan.c_str());
    }
}

TEST_CASE("braid-profile --net profiles a bundled net's training step: every op, its settings, a plan that fits") {
    tool::ProfileToolOptions o;
    o.network = "googlenet";
    o.net.image = 47;
    o.net.width_scale = 0.125;
    o.net.batch = 4;
    o.net.classes = 5;
    o.net.aux_classifiers = false;
    o.warmup = 1;
    o.iters = 2;
    const std::filesystem::path dir = std::filesystem::temp_directory_path();
    o.out_profile = (dir / "braid-gpu-test.googlenet.profile.json").string();
    o.out_plan = (dir / "braid-gpu-test.googlenet.plan.json").string();
    REQUIRE(tool::run_profile_tool(o) == 0);
    const Profile p = load_profile(o.out_profile);
    samples::TrainConfig config;
    config.model = o.net;
    config.model.net = o.network;
    const samples::TrainingGraph tg = samples::build_training_graph(config);
    CHECK(p.graph_fingerprint == tg.graph.fingerprint());
    CHECK(p.ops.size() == tg.graph.op_count());
    CHECK(p.timing == ProfileTiming::cupti);
    CHECK(p.unattributed.empty());
    CHECK(p.run.network == samples::describe_network(config.model));
    CHECK(p.run.settings == samples::net_settings(config.model));
    const std::optional<samples::NetConfig> back = samples::net_config_from_settings(p.run.settings);
    REQUIRE(back);
    CHECK(back->net == "googlenet");
    CHECK_FALSE(back->aux_classifiers);
    CHECK(back->image == 47);
    for (const ProfiledOp& op : p.ops) {
        CAPTURE(op.name);
        CHECK(op.duration.count == 2);
        REQUIRE(op.host);
        CHECK(op.host->count == 2);
    }
    validate(load_plan(o.out_plan, tg.graph), tg.graph);
    std::remove(o.out_profile.c_str());
    std::remove(o.out_plan.c_str());
}
#endif
