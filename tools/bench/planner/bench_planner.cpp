// Planner speed: time to plan training-shaped graphs with each strategy, a
// scaling table up to 20,000 ops, and the key lines plan_ms_nimble_2000ops
// and plan_ms_braid_2000ops (targets: <= 50 ms and <= 2,000 ms).
#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include <benchmark/benchmark.h>

#include "braid/planner/make_plan.hpp"
#include "key_reporter.hpp"
#include "test_graphs.hpp"

namespace {

using braid::testing::TestGraph;

// A training step with 4 ops per layer: layers = ops / 4.
const TestGraph& training_graph(int ops) {
    static std::map<int, std::unique_ptr<TestGraph>> cache;
    auto& slot = cache[ops];
    if (!slot) slot = std::make_unique<TestGraph>(braid::testing::training_dag(77, ops / 4, 4, "training"));
    return *slot;
}

void plan_with(benchmark::State& state, const char* strategy) {
    const TestGraph& t = training_graph(static_cast<int>(state.range(0)));
    const braid::DeviceSpec& dev = braid::find_device("h200");
    braid::PlanOptions opt;
    opt.strategy = strategy;
    std::size_t streams = 0;
    for (auto _ : state) {
        braid::Plan p = braid::make_plan(t.graph, dev, t.costs, opt);
        streams = p.stream_count();
        benchmark::DoNotOptimize(p);
    }
    state.counters["ops"] = static_cast<double>(t.graph.op_count());
    state.counters["streams"] = static_cast<double>(streams);
}

void BM_plan_serial(benchmark::State& s) { plan_with(s, "serial"); }
void BM_plan_nimble(benchmark::State& s) { plan_with(s, "nimble"); }
void BM_plan_glp4nn(benchmark::State& s) { plan_with(s, "glp4nn"); }
void BM_plan_braid(benchmark::State& s) { plan_with(s, "braid"); }

BENCHMARK(BM_plan_serial)->Arg(2000)->Arg(20000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_plan_nimble)->Arg(500)->Arg(2000)->Arg(5000)->Arg(10000)->Arg(20000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_plan_glp4nn)->Arg(2000)->Arg(20000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_plan_braid)->Arg(500)->Arg(2000)->Arg(5000)->Arg(10000)->Arg(20000)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace

int main(int argc, char** argv) {
    benchmark::Initialize(&argc, argv);
    braid::bench::KeyReporter reporter;
    benchmark::RunSpecifiedBenchmarks(&reporter);
    std::printf("plan_ms_nimble_2000ops: %.2f\n", 1e3 * reporter.seconds("BM_plan_nimble/2000"));
    std::printf("plan_ms_braid_2000ops: %.2f\n", 1e3 * reporter.seconds("BM_plan_braid/2000/iterations:1"));
    benchmark::Shutdown();
    return 0;
}
