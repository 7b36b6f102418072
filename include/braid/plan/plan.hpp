// Plan: how one iteration of an OpGraph is issued — how many streams and
// their priorities, which step (an op, or one batch part of a split op) goes
// on which stream in which order, and which steps wait for which.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "braid/graph/op.hpp"

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

struct Plan {
    static constexpr int format_version = 1;

    std::string strategy;                      // "serial", "glp4nn", "nimble", "braid", or a user's name
    nlohmann::json options = nlohmann::json::object();  // the strategy's settings, for the record
    std::string device;                        // DeviceSpec key the plan was tuned for ("" = none)
    std::string graph_fingerprint;             // OpGraph::fingerprint() of the graph it was made for
    std::vector<int> stream_priorities;        // one per stream; CUDA convention: lower = more urgent
    std::vector<PlanStep> steps;               // in issue order
    std::vector<PlanWait> waits;               // sorted by (step, after)

    std::uint32_t stream_count() const noexcept { return static_cast<std::uint32_t>(stream_priorities.size()); }

    friend bool operator==(const Plan&, const Plan&) = default;
};

}  // namespace braid
