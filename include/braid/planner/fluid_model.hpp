// A fast, coarse model of a plan's iteration time, used to rank many
// candidate plans before the block-level simulator judges the best few.
// Each step is a fluid job: it needs duration x footprint units of GPU work
// and may use at most `footprint` of the GPU at once (its kernels' share of
// the SMs' block slots); running steps share the GPU in stream-priority
// order. Streams (on their hardware queues), waits and host issue latency
// follow the simulator's rules.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "braid/error.hpp"
#include "braid/plan/compiled_plan.hpp"
#include "braid/sim/program.hpp"

namespace braid {

struct FluidStep {
    double duration_ns = 0.0;   // isolated
    double footprint = 1.0;     // (0, 1]: share of the GPU it can use alone
    std::uint32_t launches = 0; // kernels it launches (host issue cost)
};

// `steps` parallels plan.steps.
inline double fluid_makespan_ns(const CompiledPlan& plan, std::span<const FluidStep> steps, sim::LaunchMode mode,
                                const sim::Params& params) {
    const std::size_t n = plan.steps.size();
    constexpr double inf = std::numeric_limits<double>::infinity();
    // Host issue time of each step.
    std::vector<double> issued(n);
    double host = 0.0;
    for (std::size_t s = 0; s < n; ++s) {
        const CompiledStep& c = plan.steps[s];
        if (mode == sim::LaunchMode::eager) {
            host += static_cast<double>(c.wait_events.size()) * params.wait_latency_ns;
            host += static_cast<double>(steps[s].launches) * params.launch_latency_ns;
            issued[s] = host + params.dispatch_latency_ns;
            if (c.record_event != no_event) host += params.record_latency_ns;
        } else {
            issued[s] = params.graph_launch_ns + params.dispatch_latency_ns;
        }
    }
    // Per hardware queue (streams share them as in the simulator): its steps
    // in issue order; per event: the step that records it.
    const int hw = mode == sim::LaunchMode::graph ? params.graph_hardware_queues : params.eager_hardware_queues;
    const std::uint32_t streams =
        hw > 0 ? std::min<std::uint32_t>(plan.stream_count(), static_cast<std::uint32_t>(hw)) : plan.stream_count();
    std::vector<std::vector<std::uint32_t>> queue(streams);
    std::vector<std::uint32_t> recorder(plan.event_count, 0);
    for (std::uint32_t s = 0; s < n; ++s) {
        queue[plan.steps[s].stream % streams].push_back(s);
        if (plan.steps[s].record_event != no_event) recorder[plan.steps[s].record_event] = s;
    }
    std::vector<std::uint32_t> order(streams);  // queues by their head's urgency, recomputed as heads change
    std::vector<double> finish(n, inf);
    std::vector<std::size_t> head(streams, 0);
    std::vector<double> remaining(n, 0.0);
    std::vector<bool> running(n, false);
    for (std::size_t s = 0; s < n; ++s)
        remaining[s] = std::max(0.0, steps[s].duration_ns) * std::clamp(steps[s].footprint, 1e-6, 1.0);
    double now = 0.0, makespan = 0.0;
    std::size_t done = 0;
    std::vector<double> rate(streams, 0.0);
    std::vector<double> ends_at(streams, inf);
    while (done < n) {
        // Start the head of every stream that may start now (empty steps
        // finish at once, which may let the next head start); note when the
        // next blocked head may start.
        double next_start = inf;
        for (bool changed = true; changed;) {
            changed = false;
            next_start = inf;
            for (std::uint32_t st = 0; st < streams; ++st) {
                if (head[st] >= queue[st].size()) continue;
                const std::uint32_t s = queue[st][head[st]];
                if (running[s]) continue;
                double ready = issued[s];
                for (std::uint32_t e : plan.steps[s].wait_events) ready = std::max(ready, finish[recorder[e]]);
                if (ready > now) {
                    next_start = std::min(next_start, ready);
                } else if (remaining[s] <= 0.0) {
                    finish[s] = now;
                    ++head[st];
                    ++done;
                    changed = true;
                } else {
                    running[s] = true;
                }
            }
        }
        if (done == n) break;
        // Share the GPU: most urgent running step first, each up to its footprint.
        for (std::uint32_t i = 0; i < streams; ++i) order[i] = i;
        auto urgency = [&](std::uint32_t q) {
            const std::uint32_t s = head[q] < queue[q].size() ? queue[q][head[q]] : 0;
            return std::pair(plan.stream_priorities[plan.steps[s].stream], s);
        };
        std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) { return urgency(a) < urgency(b); });
        double capacity = 1.0, next_finish = inf;
        for (std::uint32_t st : order) {
            rate[st] = 0.0;
            ends_at[st] = inf;
            if (head[st] >= queue[st].size()) continue;
            const std::uint32_t s = queue[st][head[st]];
            if (!running[s]) continue;
            rate[st] = std::min(std::clamp(steps[s].footprint, 1e-6, 1.0), capacity);
            capacity -= rate[st];
            if (rate[st] > 0.0) {
                ends_at[st] = now + remaining[s] / rate[st];
                next_finish = std::min(next_finish, ends_at[st]);
            }
        }
        const double next = std::min(next_start, next_finish);
        if (next == inf) {
            for (std::uint32_t q = 0; q < streams; ++q)
                if (head[q] < queue[q].size())
                    throw PlanError("fluid model: step " + std::to_string(queue[q][head[q]]) +
                                    " can never start (it waits for a step that never finishes)");
            break;
        }
        for (std::uint32_t st = 0; st < streams; ++st) {
            if (rate[st] <= 0.0) continue;
            const std::uint32_t s = queue[st][head[st]];
            if (ends_at[st] <= next) {
                remaining[s] = 0.0;
                running[s] = false;
                finish[s] = next;
                makespan = std::max(makespan, next);
                ++head[st];
                ++done;
            } else {
                remaining[s] -= rate[st] * (next - now);
            }
        }
        now = next;
    }
    return makespan;
}

}  // namespace braid
