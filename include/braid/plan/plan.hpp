// Plan: how one iteration of an OpGraph is issued — how many streams and
// their priorities, which step (an op, or one batch part of a split op) goes
// on which stream in which order, and which steps wait for which.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "braid/graph/op.hpp"
#include "braid/sim/launch_mode.hpp"

namespace braid {

struct PlanStep {
    OpId op = 0;
    std::uint32_t part = 0;   // which batch part, 0 when the op is not split
    std::uint32_t parts = 1;  // how many parts the op is split into
    std::uint32_t stream = 0;

    friend bool operator==(const PlanStep&, const PlanStep&) = default;
};

// Before step `step` runs, its stream waits until step `after` (issued
// earlier, on another stream) has finished.
struct PlanWait {
    std::uint32_t step = 0;
    std::uint32_t after = 0;

    friend bool operator==(const PlanWait&, const PlanWait&) = default;
};

// The settings of one of braid's own list schedules
// (planner/strategies/braid.hpp): how many streams of each kind, which ops
// stay in line, the issue order, and the stream priorities.
struct ListSchedule {
    std::uint32_t main_streams = 1;
    std::uint32_t side_streams = 0;  // for weight-gradient and update ops
    double pin_footprint = 2.0;      // ops at least this wide stay on their predecessor's stream
    bool rank_order = false;         // issue in list-schedule order instead of modelled start time
    bool batch_splits = false;
    bool critical_stream = false;    // the critical path alone on main stream 0, the most urgent
    bool equal_priorities = false;   // every stream at the default priority

    std::uint32_t streams() const noexcept { return main_streams + side_streams; }
    std::string describe() const {
        std::string d = std::to_string(main_streams) + " main + " + std::to_string(side_streams) + " side streams";
        if (pin_footprint <= 1.0)
            d += ", ops wider than " + std::to_string(static_cast<int>(pin_footprint * 100)) + "% kept in line";
        d += rank_order ? ", issued by rank" : ", issued by modelled start";
        if (batch_splits) d += ", batch splits";
        if (critical_stream) d += ", critical path on its own stream";
        if (equal_priorities) d += ", equal priorities";
        return d;
    }

    friend bool operator==(const ListSchedule&, const ListSchedule&) = default;
};

// The strategies of other systems that a judging strategy (braid) weighs
// beside its own schedules, by name.
inline const std::vector<std::string>& baseline_strategies() {
    static const std::vector<std::string> names{"serial", "nimble", "glp4nn", "ooo", "opara", "ios"};
    return names;
}

// Which of its candidates a judging strategy (braid) chose: a baseline's
// plan, or one of its own list schedules.
struct PlanChoice {
    std::string base;                       // one of baseline_strategies(); "" for a list schedule
    bool critical_path_priorities = false;  // the baseline's streams that carry the critical path made urgent
    ListSchedule schedule;                  // when base is ""

    std::string describe() const {
        if (base.empty()) return schedule.describe();
        if (critical_path_priorities) return base + " chains with critical-path priorities";
        return base + " baseline";
    }

    friend bool operator==(const PlanChoice&, const PlanChoice&) = default;
};

// How the strategy made the plan, for the record: the settings it was given
// and what it chose. Absent fields did not apply to the strategy.
struct StrategyOptions {
    std::optional<std::uint32_t> max_streams;  // the stream cap it honoured (glp4nn, ios: groups a stage, braid)
    std::optional<LaunchMode> mode;            // the launch mode it was tuned for (braid) or timed its stages in (ios)
    std::optional<std::uint32_t> chains;       // chains in the minimum chain cover (nimble)
    std::optional<PlanChoice> chosen;          // the winning candidate (braid)
    std::optional<std::uint32_t> candidates;   // candidates made (braid)
    std::optional<std::uint32_t> simulated;    // candidates judged on the simulator (braid)
    std::optional<double> predicted_ms;        // the winner's simulated iteration time (braid)

    friend bool operator==(const StrategyOptions&, const StrategyOptions&) = default;
};

// Where a tuned plan was measured: what must match for the measurement to
// hold on another run (the tuning cache's key, with the graph fingerprint).
struct MeasuredOn {
    std::string device;   // "NVIDIA H200 (sm_90, 132 SMs)", or "host (N threads)"
    std::string driver;   // CUDA driver version ("" on the host backend)
    std::string cudnn;    // cuDNN version ("" when not used)
    std::string cublas;   // cuBLAS version ("" when not used)
    std::string backend;  // "cuda" or "host"
    LaunchMode mode = LaunchMode::graph;
    std::uint32_t batch = 0;
    // What else the time depends on, in the caller's words: image size,
    // classes, stream cap, math and algorithm settings ("" when nothing).
    std::string settings;

    std::string describe() const {
        std::string d = device + ", " + backend + " backend, " + std::string(to_string(mode)) + " mode, batch " +
                        std::to_string(batch);
        if (!settings.empty()) d += ", " + settings;
        if (!driver.empty()) d += ", driver " + driver;
        if (!cudnn.empty()) d += ", cuDNN " + cudnn;
        if (!cublas.empty()) d += ", cuBLAS " + cublas;
        return d;
    }

    friend bool operator==(const MeasuredOn&, const MeasuredOn&) = default;
};

// One tuning candidate as measured.
struct MeasuredCandidate {
    std::string name;
    double median_ms = 0.0;
    double spread_pct = 0.0;  // interquartile range over the median
    std::uint32_t samples = 0;
    std::string declined;  // why it was not timed (no room on the GPU, say); "" when it was

    friend bool operator==(const MeasuredCandidate&, const MeasuredCandidate&) = default;
};

// What tuning measured: the plan is the fastest of `candidates` (or the
// model's choice, when none beat it beyond the noise).
struct PlanMeasurement {
    MeasuredOn on;
    double median_ms = 0.0;   // this plan's
    double spread_pct = 0.0;
    std::uint32_t rounds = 0;
    bool switched = false;    // not the model's choice
    std::vector<MeasuredCandidate> candidates;

    friend bool operator==(const PlanMeasurement&, const PlanMeasurement&) = default;
};

struct Plan {
    static constexpr int format_version = 1;
    // The most streams a plan file may ask for. A stream is a CUDA stream
    // (and its events) or a host worker thread; the widest bundled plan,
    // opara's for Inception-v3, has 426.
    static constexpr std::uint32_t max_stream_count = 4096;

    std::string strategy;                      // one of make_plan's strategy names, or a user's name
    StrategyOptions options;                   // the strategy's settings and choices, for the record
    std::string device;                        // DeviceSpec key the plan was tuned for ("" = none)
    std::string graph_fingerprint;             // OpGraph::fingerprint() of the graph it was made for
    std::vector<int> stream_priorities;        // one per stream; CUDA convention: lower = more urgent
    std::vector<PlanStep> steps;               // in issue order
    std::vector<PlanWait> waits;               // sorted by (step, after)
    std::optional<PlanMeasurement> measured;   // set by tuning

    std::uint32_t stream_count() const noexcept { return static_cast<std::uint32_t>(stream_priorities.size()); }

    friend bool operator==(const Plan&, const Plan&) = default;
};

}  // namespace braid
