// bench-sim: how fast the simulator runs a ResNet-50 training iteration
// (batch 32, H200). Prints Google Benchmark's table, then key: value lines;
// sim_block_events_per_s is measured in this run.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <unistd.h>
#include <map>
#include <string>
#include <vector>

#include "braid/model/device_table.hpp"
#include "braid/sim/chrome_trace.hpp"
#include "braid/sim/simulator.hpp"
#include "resnet50_program.hpp"

namespace {

using braid::sim::LaunchMode;

const braid::DeviceSpec& device() { return braid::find_device("h200"); }

const braid::sim::Program& resnet50(LaunchMode mode, bool one_stream) {
    static std::map<std::pair<int, bool>, braid::sim::Program> cache;
    auto key = std::pair(static_cast<int>(mode), one_stream);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
    braid::sim::Program p = braid::bench::ResNet50Program(device(), 32, mode).program();
    if (one_stream) {  // the same calls on one stream: what a framework issues
        for (auto& a : p.actions) a.stream = 0;
        p.stream_priorities = {0};
    }
    return cache.emplace(key, std::move(p)).first->second;
}

void simulate_resnet50(benchmark::State& state, LaunchMode mode, bool one_stream) {
    const braid::sim::Program& p = resnet50(mode, one_stream);
    std::uint64_t events = 0;
    double makespan_ns = 0.0;
    for (auto _ : state) {
        const braid::sim::Result r = braid::sim::simulate(device(), p);
        events += r.block_events;
        makespan_ns = r.makespan_ns;
        benchmark::DoNotOptimize(r.makespan_ns);
    }
    state.counters["block_events_per_s"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
    state.counters["kernels"] = static_cast<double>(p.kernels.size());
    state.counters["simulated_ms"] = makespan_ns * 1e-6;
}

// Captures the headline counter while printing the usual table.
class Reporter : public benchmark::ConsoleReporter {
public:
    // Colour only on a terminal: the table is often piped into logs.
    Reporter() : ConsoleReporter(isatty(fileno(stdout)) ? OO_Defaults : OO_Tabular) {}

    void ReportRuns(const std::vector<Run>& runs) override {
        for (const Run& r : runs)
            if (r.run_name.function_name == "resnet50_eager_4_streams" && r.aggregate_name.empty()) {
                auto it = r.counters.find("block_events_per_s");
                if (it == r.counters.end()) continue;
                events_per_s = it->second.value;
                // The same events over CPU time: what the rate would be on an idle machine.
                if (r.cpu_accumulated_time > 0.0)
                    events_per_cpu_s = events_per_s * r.real_accumulated_time / r.cpu_accumulated_time;
            }
        ConsoleReporter::ReportRuns(runs);
    }
    double events_per_s = 0.0;
    double events_per_cpu_s = 0.0;
};

}  // namespace

int main(int argc, char** argv) {
    benchmark::RegisterBenchmark("resnet50_eager_4_streams", simulate_resnet50, LaunchMode::eager, false)
        ->Unit(benchmark::kMillisecond)
        ->MinTime(2.0)
        ->UseRealTime();  // the rate is per wall-clock second
    benchmark::RegisterBenchmark("resnet50_graph_4_streams", simulate_resnet50, LaunchMode::graph, false)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("resnet50_eager_1_stream", simulate_resnet50, LaunchMode::eager, true)
        ->Unit(benchmark::kMillisecond);
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    Reporter reporter;
    benchmark::RunSpecifiedBenchmarks(&reporter);
    benchmark::Shutdown();

    const braid::sim::Program& p = resnet50(LaunchMode::eager, false);
    const braid::sim::Result r = braid::sim::simulate(device(), p);
    std::uint64_t blocks = 0, grid_min = ~std::uint64_t{0}, grid_max = 0;
    for (const auto& k : p.kernels) {
        blocks += k.cost.shape.blocks();
        grid_min = std::min(grid_min, k.cost.shape.blocks());
        grid_max = std::max(grid_max, k.cost.shape.blocks());
    }
    std::size_t waits = 0;
    for (const auto& a : p.actions) waits += a.kind == braid::sim::ActionKind::wait;
    std::printf("resnet50_kernels: %zu\n", p.kernels.size());
    std::printf("resnet50_waits: %zu\n", waits);
    std::printf("resnet50_blocks: %llu\n", static_cast<unsigned long long>(blocks));
    std::printf("resnet50_grid_blocks_min_max: %llu %llu\n", static_cast<unsigned long long>(grid_min),
                static_cast<unsigned long long>(grid_max));
    std::printf("resnet50_block_events: %llu\n", static_cast<unsigned long long>(r.block_events));
    std::printf("resnet50_simulated_ms_4_streams: %.4f\n", r.makespan_ns * 1e-6);
    std::printf("resnet50_simulated_ms_1_stream: %.4f\n",
                braid::sim::simulate(device(), resnet50(LaunchMode::eager, true)).makespan_ns * 1e-6);
    std::printf("resnet50_mean_busy_sm_fraction: %.4f\n", r.mean_busy_sm_fraction);
    if (reporter.events_per_cpu_s > 0.0) std::printf("sim_block_events_per_cpu_s: %.0f\n", reporter.events_per_cpu_s);
    if (reporter.events_per_s > 0.0) std::printf("sim_block_events_per_s: %.0f\n", reporter.events_per_s);
    else std::printf("sim_block_events_per_s: not measured (filtered out by --benchmark_filter)\n");
    return 0;
}
