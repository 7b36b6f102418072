// A TimingSource without a GPU: each candidate's "true" time is the
// simulator's for costs of the caller's choosing (say, the model's costs
// perturbed the way a real GPU disagrees with them), and every measurement
// adds the noise a GPU shows: log-normal jitter, rare slow outliers, and a
// slow drift common to all candidates (clocks, temperature). The clock is
// virtual, so a tuning run is deterministic for a seed.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "braid/graph/op_graph.hpp"
#include "braid/model/cost.hpp"
#include "braid/model/device_spec.hpp"
#include "braid/planner/predict.hpp"
#include "braid/planner/tune.hpp"
#include "braid/sim/program.hpp"

namespace braid {

struct TimingNoise {
    double sigma = 0.02;                // log-normal spread of one measurement
    double outlier_probability = 0.02;  // chance that one measurement is an outlier
    double outlier_max = 0.5;           // an outlier is up to this much slower (uniformly)
    double drift = 0.0;                 // amplitude of the common slow drift (0.03: +-3 %)
    double drift_period = 200.0;        // measurements per drift cycle
    std::uint64_t seed = 1;
};

class SimulatedTiming : public TimingSource {
public:
    // Keeps references to the graph, device and costs: they must outlive it.
    // `prepare_ns` is charged to the clock per candidate by prepare() (a
    // capture and instantiation), `overhead_ns` per measurement (the sync).
    SimulatedTiming(const OpGraph& graph, const DeviceSpec& dev, std::span<const OpCost> true_costs, sim::LaunchMode mode,
                    const sim::Params& params, const TimingNoise& noise, double prepare_ns = 0.0, double overhead_ns = 0.0)
        : graph_(graph), dev_(dev), costs_(true_costs), mode_(mode), params_(params), noise_(noise),
          prepare_ns_(prepare_ns), overhead_ns_(overhead_ns), rng_(noise.seed) {
        require_costs_for<PlanError>(graph.op_count(), true_costs.size(), "SimulatedTiming");
    }

    std::vector<std::string> prepare(std::span<const TuneCandidate> candidates) override {
        true_ns_.clear();
        for (const TuneCandidate& c : candidates) {
            true_ns_.push_back(simulate_plan(graph_, c.plan, dev_, costs_, mode_, params_).result.makespan_ns);
            clock_ns_ += prepare_ns_;
        }
        return {};
    }

    double measure_ns(std::size_t candidate) override {
        double t = true_ns_.at(candidate) * std::exp(noise_.sigma * normal_(rng_));
        if (uniform_(rng_) < noise_.outlier_probability) t *= 1.0 + noise_.outlier_max * uniform_(rng_);
        if (noise_.drift > 0.0 && noise_.drift_period > 0.0)
            t *= 1.0 + noise_.drift * std::sin(2.0 * std::numbers::pi * static_cast<double>(measurements_) /
                                               noise_.drift_period);
        ++measurements_;
        clock_ns_ += t + overhead_ns_;
        return t;
    }

    double now_ns() override { return clock_ns_; }

    // The noiseless time of each candidate prepared last.
    const std::vector<double>& true_ns() const noexcept { return true_ns_; }
    std::uint64_t measurements() const noexcept { return measurements_; }

private:
    const OpGraph& graph_;
    const DeviceSpec& dev_;
    std::span<const OpCost> costs_;
    sim::LaunchMode mode_;
    sim::Params params_;
    TimingNoise noise_;
    double prepare_ns_, overhead_ns_;
    std::mt19937_64 rng_;
    std::normal_distribution<double> normal_{0.0, 1.0};
    std::uniform_real_distribution<double> uniform_{0.0, 1.0};
    std::vector<double> true_ns_;
    double clock_ns_ = 0.0;
    std::uint64_t measurements_ = 0;
};

}  // namespace braid
