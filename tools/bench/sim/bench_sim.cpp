// bench-sim: how fast the simulator runs a ResNet-50 training iteration
// (the bundled sample net, batch 32, roofline costs for an H200), planned by
// nimble (multi-stream) and serial (one stream). Prints Google Benchmark's
// table, then key: value lines; sim_block_events_per_s is measured in this run.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <unistd.h>
#include <vector>

#include "braid/model/device_table.hpp"
#include "braid/model/estimate.hpp"
#include "braid/plan/compiled_plan.hpp"
#include "braid/plan/sim_program.hpp"
#include "braid/planner/make_plan.hpp"
#include "braid/sim/simulator.hpp"
#include "train/training_graph.hpp"

namespace {

using braid::sim::LaunchMode;

constexpr std::uint32_t batch = 32;

const braid::DeviceSpec& device() { return braid::find_device("h200"); }

// The training step, its costs and the two plans' programs, built once.
struct ResNet50 {
    braid::samples::TrainingGraph training;
    braid::OpCosts costs;
    braid::Plan nimble, serial;
    braid::sim::Program nimble_eager, nimble_graph, serial_eager;

    ResNet50() : training(build(batch)), costs(braid::estimate_costs(device(), braid::samples::op_estimates(training))) {
        nimble = plan("nimble");
        serial = plan("serial");
        nimble_eager = program(nimble, LaunchMode::eager);
        nimble_graph = program(nimble, LaunchMode::graph);
        serial_eager = program(serial, LaunchMode::eager);
    }

    static braid::samples::TrainingGraph build(std::uint32_t n) {
        braid::samples::TrainConfig tc;
        tc.model.net = "resnet50";
        tc.model.batch = n;
        return braid::samples::build_training_graph(tc);
    }
    braid::Plan plan(const char* strategy) const {
        braid::PlanOptions o;
        o.strategy = strategy;
        return braid::make_plan(training.graph, device(), costs, o);
    }
    braid::sim::Program program(const braid::Plan& p, LaunchMode mode) const {
        return braid::to_sim_program(braid::compile(p, training.graph), training.graph, device(), costs, mode);
    }
};

const ResNet50& resnet50() {
    static const ResNet50 net;
    return net;
}

void simulate_resnet50(benchmark::State& state, const braid::sim::Program* p) {
    std::uint64_t events = 0;
    double makespan_ns = 0.0;
    for (auto _ : state) {
        const braid::sim::Result r = braid::sim::simulate(device(), *p);
        events += r.block_events;
        makespan_ns = r.makespan_ns;
        benchmark::DoNotOptimize(r.makespan_ns);
    }
    state.counters["block_events_per_s"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
    state.counters["kernels"] = static_cast<double>(p->kernels.size());
    state.counters["simulated_ms"] = makespan_ns * 1e-6;
}

// Captures the headline counter while printing the usual table.
class Reporter : public benchmark::ConsoleReporter {
public:
    // Colour only on a terminal: the table is often piped into logs.
    Reporter() : ConsoleReporter(isatty(fileno(stdout)) ? OO_Defaults : OO_Tabular) {}

    void ReportRuns(const std::vector<Run>& runs) override {
        for (const Run& r : runs)
            if (r.run_name.function_name == "resnet50_eager_nimble" && r.aggregate_name.empty()) {
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

int main(int argc, char** argv) try {
    const ResNet50& net = resnet50();
    benchmark::RegisterBenchmark("resnet50_eager_nimble", simulate_resnet50, &net.nimble_eager)
        ->Unit(benchmark::kMillisecond)
        ->MinTime(2.0)
        ->UseRealTime();  // the rate is per wall-clock second
    benchmark::RegisterBenchmark("resnet50_graph_nimble", simulate_resnet50, &net.nimble_graph)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("resnet50_eager_serial", simulate_resnet50, &net.serial_eager)
        ->Unit(benchmark::kMillisecond);
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    Reporter reporter;
    benchmark::RunSpecifiedBenchmarks(&reporter);
    benchmark::Shutdown();

    const braid::sim::Program& p = net.nimble_eager;
    const braid::sim::Result r = braid::sim::simulate(device(), p);
    std::uint64_t blocks = 0, grid_min = ~std::uint64_t{0}, grid_max = 0;
    for (const auto& k : p.kernels) {
        blocks += k.cost.shape.blocks();
        grid_min = std::min(grid_min, k.cost.shape.blocks());
        grid_max = std::max(grid_max, k.cost.shape.blocks());
    }
    std::size_t waits = 0;
    for (const auto& a : p.actions) waits += a.kind == braid::sim::ActionKind::wait;
    std::printf("resnet50_batch: %u\n", batch);
    std::printf("resnet50_ops: %zu\n", static_cast<std::size_t>(net.training.graph.op_count()));
    std::printf("resnet50_kernels: %zu\n", p.kernels.size());
    std::printf("resnet50_streams_nimble: %u\n", net.nimble.stream_count());
    std::printf("resnet50_waits_nimble: %zu\n", waits);
    std::printf("resnet50_blocks: %llu\n", static_cast<unsigned long long>(blocks));
    std::printf("resnet50_grid_blocks_min_max: %llu %llu\n", static_cast<unsigned long long>(grid_min),
                static_cast<unsigned long long>(grid_max));
    std::printf("resnet50_block_events: %llu\n", static_cast<unsigned long long>(r.block_events));
    std::printf("resnet50_simulated_ms_nimble: %.4f\n", r.makespan_ns * 1e-6);
    std::printf("resnet50_simulated_ms_serial: %.4f\n", braid::sim::simulate(device(), net.serial_eager).makespan_ns * 1e-6);
    std::printf("resnet50_mean_busy_sm_fraction_nimble: %.4f\n", r.mean_busy_sm_fraction);
    if (reporter.events_per_cpu_s > 0.0) std::printf("sim_block_events_per_cpu_s: %.0f\n", reporter.events_per_cpu_s);
    if (reporter.events_per_s > 0.0) std::printf("sim_block_events_per_s: %.0f\n", reporter.events_per_s);
    else std::printf("sim_block_events_per_s: not measured (filtered out by --benchmark_filter)\n");
    return 0;
} catch (const std::exception& e) {
    std::fprintf(stderr, "bench-sim: %s\n", e.what());
    return 1;
}
