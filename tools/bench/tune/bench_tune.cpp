// Tuning against a GPU that disagrees with the model: GoogLeNet and
// ResNet-50 training at batch 8 and 32, braid's best plans by the model
// (roofline costs for an H200) tuned on a simulated GPU whose costs differ
// from the model's per op (log-normal, sigma 25 %), in some cases with
// fewer resident kernels or hardware queues too, and whose measurements
// are noisy (jitter, outliers, drift). Prints one row per case and
// `tune_regret_pct:` — how much slower the tuned plan truly is than the
// truly best candidate, worst over all cases — beside the regret of
// trusting the model alone.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "braid/braid.hpp"
#include "braid/planner/sim_timing.hpp"
#include "braid/planner/tune_candidates.hpp"
#include "train/training_graph.hpp"

namespace {

// The "GPU": every op's kernels take longer or shorter than the model says
// by one factor per op, as measured profiles disagree with roofline ones.
braid::OpCosts disagreeing_costs(const braid::OpCosts& model, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> normal(0.0, 0.25);
    braid::OpCosts out = model;
    for (braid::OpCost& op : out) {
        const double factor = std::exp(normal(rng));
        for (braid::KernelCost& k : op.kernels) k.duration_ns *= factor;
    }
    return out;
}

// How else the "GPU" departs from the model: as the model says; fewer
// kernels resident at once and a slower dispatch; fewer hardware queues.
struct GpuCase {
    const char* name;
    braid::sim::Params params;
};

std::vector<GpuCase> gpu_cases() {
    braid::sim::Params crowded;
    crowded.max_resident_kernels = 8;
    crowded.dispatch_latency_ns = 3000.0;
    braid::sim::Params queues;
    queues.graph_hardware_queues = 4;
    return {{"ops", {}}, {"crowded", crowded}, {"queues", queues}};
}

struct NoiseCase {
    const char* name;
    braid::TimingNoise noise;
};

}  // namespace

int main() try {
    using clock = std::chrono::steady_clock;
    const braid::DeviceSpec& dev = braid::find_device("h200");
    const std::vector<NoiseCase> noises{
        {"quiet", braid::TimingNoise{0.01, 0.01, 0.3, 0.0, 200.0, 0}},
        {"noisy", braid::TimingNoise{0.03, 0.05, 0.5, 0.03, 150.0, 0}},
    };
    constexpr std::size_t top = 8;
    const std::vector<GpuCase> gpus = gpu_cases();
    fmt::print("{:<10} {:>5} {:<8} {:<6} {:>5} {:>6} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8}  {}\n", "net", "batch", "gpu",
               "noise", "cands", "rounds", "best ms", "model ms", "tuned ms", "model %", "tuned %", "tune s", "picked");
    double worst_regret = 0.0, worst_model_regret = 0.0, worst_elapsed = 0.0;
    int cases = 0, switched = 0;
    const auto t_all = clock::now();
    for (const char* net : {"googlenet", "resnet50"})
        for (std::uint32_t batch : {8u, 32u}) {
            braid::samples::TrainConfig tc;
            tc.model.net = net;
            tc.model.batch = batch;
            const braid::samples::TrainingGraph tg = braid::samples::build_training_graph(tc);
            const braid::OpCosts model = braid::estimate_costs(dev, braid::samples::op_estimates(tg));
            braid::strategy::BraidOptions bo;
            bo.mode = braid::sim::LaunchMode::graph;
            bo.complete_top = top;
            const braid::strategy::BraidResult planned = braid::strategy::braid_plan(tg.graph, dev, model, bo);
            const std::vector<braid::TuneCandidate> candidates = braid::tune_candidates(planned, top);
            for (std::size_t g = 0; g < gpus.size(); ++g) {
                const std::uint64_t seed = g + 1;
                const braid::OpCosts truth = disagreeing_costs(model, 1000u * batch + seed);
                for (const NoiseCase& nc : noises) {
                    braid::TimingNoise noise = nc.noise;
                    noise.seed = seed * 7919u + batch;
                    // A capture and instantiation per candidate, a sync per replay: an H200's costs.
                    braid::SimulatedTiming source(tg.graph, dev, truth, braid::sim::LaunchMode::graph, gpus[g].params,
                                                  noise, 0.3e9, 20e3);
                    const braid::TuneResult r = braid::tune(tg.graph, candidates, source);
                    const std::vector<double>& t = source.true_ns();
                    const double best = *std::min_element(t.begin(), t.end());
                    const double regret = 100.0 * (t[r.winner] / best - 1.0);
                    const double model_regret = 100.0 * (t[r.favourite] / best - 1.0);
                    worst_regret = std::max(worst_regret, regret);
                    worst_model_regret = std::max(worst_model_regret, model_regret);
                    worst_elapsed = std::max(worst_elapsed, r.elapsed_s);
                    ++cases;
                    switched += r.switched() ? 1 : 0;
                    fmt::print("{:<10} {:>5} {:<8} {:<6} {:>5} {:>6} {:>9.3f} {:>9.3f} {:>9.3f} {:>8.2f} {:>8.2f} {:>8.1f}  {}\n",
                               net, batch, gpus[g].name, nc.name, candidates.size(), r.rounds, best / 1e6, t[r.favourite] / 1e6,
                               t[r.winner] / 1e6, model_regret, regret, r.elapsed_s, r.chosen().name);
                }
            }
        }
    fmt::print("\n('best', 'model', 'tuned': true times of the truly best candidate, the model's choice and the tuned "
               "choice; '%': how much slower than the best; 'tune s': the tuner's time on the simulated clock)\n\n");
    fmt::print("tune_cases: {}\n", cases);
    fmt::print("tune_switched_from_model: {}\n", switched);
    fmt::print("tune_model_regret_pct: {:.3f}\n", worst_model_regret);
    fmt::print("tune_regret_pct: {:.3f}\n", worst_regret);
    fmt::print("tune_simulated_seconds_max: {:.1f}\n", worst_elapsed);
    fmt::print("tune_bench_wall_s: {:.1f}\n", std::chrono::duration<double>(clock::now() - t_all).count());
    return 0;
} catch (const std::exception& e) {
    std::fprintf(stderr, "bench-tune: %s\n", e.what());
    return 1;
}
