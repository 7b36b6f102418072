// A simulated run as a Chrome/Perfetto trace (Trace Event Format, JSON):
// one track per stream with a slice per kernel, and a counter track of busy
// SMs. Open it in ui.perfetto.dev or chrome://tracing.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "braid/error.hpp"
#include "braid/sim/program.hpp"

namespace braid::sim {

// Timestamps are microseconds (the format's unit) as doubles, so nanosecond
// detail survives. Tracks: pid 1 is the GPU, tid s + 1 is stream s.
inline nlohmann::json chrome_trace(const Program& program, const Result& result, std::string_view process_name = "GPU") {
    using nlohmann::json;
    if (result.kernels.size() != program.kernels.size())
        throw SimError("chrome_trace: the result has " + std::to_string(result.kernels.size()) +
                       " kernel records but the program has " + std::to_string(program.kernels.size()) +
                       " kernels; pass the result of simulating this program");
    constexpr int pid = 1;
    constexpr double us_per_ns = 1e-3;
    json events = json::array();
    events.push_back({{"ph", "M"}, {"pid", pid}, {"tid", 0}, {"name", "process_name"},
                      {"args", {{"name", std::string(process_name)}}}});
    for (std::uint32_t s = 0; s < program.stream_count(); ++s) {
        const int priority = program.stream_priorities[s];
        events.push_back({{"ph", "M"}, {"pid", pid}, {"tid", s + 1}, {"name", "thread_name"},
                          {"args", {{"name", "stream " + std::to_string(s) + " (priority " + std::to_string(priority) + ")"}}}});
        events.push_back({{"ph", "M"}, {"pid", pid}, {"tid", s + 1}, {"name", "thread_sort_index"},
                          {"args", {{"sort_index", s}}}});
    }
    for (std::size_t k = 0; k < program.kernels.size(); ++k) {
        const Kernel& kernel = program.kernels[k];
        const KernelRecord& r = result.kernels[k];
        const KernelShape& shape = kernel.cost.shape;
        json args = {
            {"kernel", shape.name},
            {"grid", json::array({shape.grid.x, shape.grid.y, shape.grid.z})},
            {"block", json::array({shape.block.x, shape.block.y, shape.block.z})},
            {"sms_used", r.sms_used},
            {"isolated_us", kernel.cost.duration_ns * us_per_ns},
            {"issue_us", r.issue_ns * us_per_ns},
            {"runnable_us", r.runnable_ns * us_per_ns},
            {"resident_us", r.resident_ns * us_per_ns},
        };
        if (kernel.op != no_op) args["op"] = kernel.op;
        events.push_back({{"ph", "X"},
                          {"cat", "kernel"},
                          {"name", kernel.label.empty() ? shape.name : kernel.label},
                          {"pid", pid},
                          {"tid", r.stream + 1},
                          {"ts", r.start_ns * us_per_ns},
                          {"dur", (r.end_ns - r.start_ns) * us_per_ns},
                          {"args", std::move(args)}});
    }
    for (const UtilisationSample& u : result.utilisation)
        events.push_back({{"ph", "C"}, {"pid", pid}, {"name", "busy SMs"}, {"ts", u.time_ns * us_per_ns},
                          {"args", {{"busy_sms", u.busy_sms}}}});
    return json{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ns"}};
}

}  // namespace braid::sim
