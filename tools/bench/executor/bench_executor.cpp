// Executor dispatch cost: host time per op of one eager iteration of a
// 2,000-op plan (4 streams, with waits) with empty bodies, on a null backend
// whose operations do nothing — the executor's own cost, without any
// backend's launch cost (target <= 200 ns/op) — and, for comparison, on the
// host backend (worker threads and latches) and with a profiling hook.
// Ends with the key line host_dispatch_ns_per_op.
#include <cstdint>
#include <cstdio>
#include <optional>
#include <vector>

#include <benchmark/benchmark.h>

#include "braid/exec/executor.hpp"
#include "braid/exec/host.hpp"
#include "dispatch_graph.hpp"
#include "key_reporter.hpp"

namespace {

// Every operation is a no-op except running the body, so what is measured is
// the executor: its walk over the compiled steps, the backend calls it makes,
// the profiling-hook check and the body call.
struct NullBackend {
    struct Lane {
        std::uint32_t index = 0;
    };
    std::vector<Lane> lanes;
    std::uint64_t calls = 0;
    bool begin_iteration(const braid::CompiledPlan& plan, braid::IterationKey) {
        if (lanes.size() < plan.stream_count()) lanes.resize(plan.stream_count());
        return true;
    }
    Lane& lane(std::uint32_t i) { return lanes[i]; }
    void wait(Lane&, std::uint32_t) { ++calls; }
    void run(Lane& l, const braid::OpContext& ctx, braid::StepRunner<Lane> runner) { runner(l, ctx); }
    void record(Lane&, std::uint32_t) { ++calls; }
    std::optional<braid::StepFailure> end_iteration() { return std::nullopt; }
    void abort_iteration() noexcept {}
};

struct EmptyHook : braid::ProfilingHook {
    std::uint64_t n = 0;
    void op_begin(const braid::OpContext&) override { ++n; }
    void op_end(const braid::OpContext&) override { ++n; }
};

const braid::OpGraph& graph() {
    static const braid::OpGraph g = braid::testing::dispatch_graph(2000, 8);
    return g;
}
const braid::Plan& plan() {
    static const braid::Plan p = braid::testing::dispatch_plan(graph(), 4, 8);
    return p;
}

template <class Backend>
std::vector<typename braid::Executor<Backend>::Body> empty_bodies() {
    return std::vector<typename braid::Executor<Backend>::Body>(
        graph().op_count(), [](typename Backend::Lane&, const braid::OpContext&) {});
}

void BM_dispatch_null(benchmark::State& state) {
    NullBackend backend;
    braid::Executor<NullBackend> ex(graph(), plan(), backend, empty_bodies<NullBackend>());
    for (auto _ : state) ex.run();
    benchmark::DoNotOptimize(backend.calls);
    state.counters["ops"] = static_cast<double>(plan().steps.size());
    state.counters["waits"] = static_cast<double>(plan().waits.size());
    state.counters["ns_per_op"] = benchmark::Counter(static_cast<double>(plan().steps.size()),
                                                     benchmark::Counter::kIsIterationInvariantRate |
                                                         benchmark::Counter::kInvert);
}

void BM_dispatch_null_hooked(benchmark::State& state) {
    NullBackend backend;
    EmptyHook hook;
    braid::Executor<NullBackend> ex(graph(), plan(), backend, empty_bodies<NullBackend>());
    ex.set_profiling_hook(&hook);
    for (auto _ : state) ex.run();
    benchmark::DoNotOptimize(hook.n);
}

void BM_host_backend(benchmark::State& state) {
    braid::HostBackend backend;
    braid::Executor<braid::HostBackend> ex(graph(), plan(), backend, empty_bodies<braid::HostBackend>());
    for (auto _ : state) ex.run();
}

BENCHMARK(BM_dispatch_null)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_dispatch_null_hooked)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_host_backend)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
    benchmark::Initialize(&argc, argv);
    braid::bench::KeyReporter reporter;
    benchmark::RunSpecifiedBenchmarks(&reporter);
    const double ops = static_cast<double>(plan().steps.size());
    std::printf("plan: %zu ops, %u streams, %zu waits\n", plan().steps.size(), plan().stream_count(),
                plan().waits.size());
    std::printf("host_dispatch_ns_per_op: %.1f\n", 1e9 * reporter.seconds("BM_dispatch_null") / ops);
    std::printf("host_dispatch_hooked_ns_per_op: %.1f\n", 1e9 * reporter.seconds("BM_dispatch_null_hooked") / ops);
    std::printf("host_backend_ns_per_op: %.1f\n", 1e9 * reporter.seconds("BM_host_backend/real_time") / ops);
    benchmark::Shutdown();
    return 0;
}
