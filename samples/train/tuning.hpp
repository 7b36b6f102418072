// Tuning a training step's plan where it runs (braid-train --tune, the GPU
// benchmark): braid's best plans by the model plus the baselines, timed
// interleaved on a TimingSource; the winner carries its measurement and is
// kept in the tuning cache, so the next run on the same machine starts
// tuned.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "braid/model/device_spec.hpp"
#include "braid/plan/plan.hpp"
#include "braid/planner/tune.hpp"
#include "train/training_graph.hpp"

namespace braid::samples {

struct TuningRequest {
    std::uint32_t top = 6;             // braid candidates to measure, the model's choice first
    double budget_s = 60.0;            // for the measurements (braid::TuneOptions::budget_s)
    std::uint32_t max_streams = 8;
    braid::LaunchMode mode = braid::LaunchMode::graph;
    std::optional<braid::Calibration> calibration;  // what the candidates are planned with
    std::vector<braid::ConvEngineFamily> engines;    // by OpId, or none: the backend's (planning_model)
    std::optional<int> eager_hardware_queues;        // the process's, for an eager run on a GPU (planning_model)
    std::filesystem::path cache_dir;   // empty: neither read nor write the cache
};

struct TuningOutcome {
    braid::Plan plan;                              // carries plan.measured
    bool from_cache = false;
    std::vector<braid::TuneCandidate> candidates;  // empty when from the cache
    std::optional<braid::TuneResult> result;
};

// The plan for `tg` on the machine `on` describes: the cached one when it
// was measured there, else braid's candidates (planned for `device` from
// estimates, calibrated when the request has a calibration) tuned on `source`. Says what it does on `log`, one
// line at a time.
TuningOutcome tune_training_plan(const TrainingGraph& tg, const braid::DeviceSpec& device, const braid::MeasuredOn& on,
                                 braid::TimingSource& source, const TuningRequest& request,
                                 const std::function<void(const std::string&)>& log);

// One row per candidate: median, spread, ratio to the model's choice with its
// interval, samples, and whether it was dropped or chosen.
std::string format_tune_report(const braid::TuneResult& result);

}  // namespace braid::samples
