// Everything the simulator refuses, found before it simulates anything, so a
// bad program is an error that names the kernel, stream or event — never a
// hang or a silently dropped launch.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "braid/error.hpp"
#include "braid/model/device_spec.hpp"
#include "braid/model/lower_bound.hpp"
#include "braid/sim/program.hpp"

namespace braid::sim {

inline constexpr std::uint32_t no_action = std::numeric_limits<std::uint32_t>::max();

// "kernel 3 'conv1' (implicit_gemm)": index, label and shape name, as far as known.
inline std::string describe_kernel(const Program& p, std::size_t k) {
    std::string s = "kernel " + std::to_string(k);
    if (k >= p.kernels.size()) return s;
    const Kernel& kernel = p.kernels[k];
    if (!kernel.label.empty()) s += " '" + kernel.label + "'";
    if (!kernel.cost.shape.name.empty()) s += " (" + kernel.cost.shape.name + ")";
    return s;
}

inline std::string describe_action(const Program& p, std::size_t a) {
    const Action& act = p.actions[a];
    switch (act.kind) {
        case ActionKind::launch: return "action " + std::to_string(a) + " (launch of " + describe_kernel(p, act.index) + ")";
        case ActionKind::record: return "action " + std::to_string(a) + " (record of event " + std::to_string(act.index) + ")";
        case ActionKind::wait: return "action " + std::to_string(a) + " (wait for event " + std::to_string(act.index) + ")";
    }
    return "action " + std::to_string(a);
}

// What the checks learn and the simulator needs.
struct CheckedProgram {
    std::vector<KernelWork> work;               // per kernel
    std::vector<std::uint32_t> launch_action;   // per kernel: the action that launches it
    std::vector<std::uint32_t> waited_record;   // per action: for a wait, the record it waits for
    std::uint32_t resident_limit = 0;           // kernels resident at once
};

// Bounds far beyond any GPU, so that a broken calibration is refused
// instead of predicting times hundreds of digits long.
inline constexpr double most_latency_ns = 1e9;  // no launch, record, wait or dispatch takes a second
inline constexpr double most_factor = 1e3;      // for host_time_scale and corun_slowdown

inline void check_params(const Params& params) {
    auto need = [](double v, const char* name, double most) {
        if (!(v >= 0.0) || !std::isfinite(v) || v > most) {
            char text[64];
            std::snprintf(text, sizeof text, "%g, got %g", most, v);
            throw SimError(std::string("sim::Params::") + name + " must be finite and >= 0, at most " + text);
        }
    };
    need(params.launch_latency_ns, "launch_latency_ns", most_latency_ns);
    need(params.record_latency_ns, "record_latency_ns", most_latency_ns);
    need(params.wait_latency_ns, "wait_latency_ns", most_latency_ns);
    need(params.graph_launch_ns, "graph_launch_ns", most_latency_ns);
    need(params.graph_node_ns, "graph_node_ns", most_latency_ns);
    need(params.dispatch_latency_ns, "dispatch_latency_ns", most_latency_ns);
    need(params.eager_dispatch_extra_ns, "eager_dispatch_extra_ns", most_latency_ns);
    need(params.op_host_ns, "op_host_ns", most_latency_ns);
    need(params.host_time_scale, "host_time_scale", most_factor);
    need(params.event_latency_ns, "event_latency_ns", most_latency_ns);
    need(params.corun_slowdown, "corun_slowdown", most_factor);
    for (const auto& [queues, name] : {std::pair{params.eager_hardware_queues, "eager_hardware_queues"},
                                       std::pair{params.graph_hardware_queues, "graph_hardware_queues"}})
        if (queues < 0 || queues > max_hardware_queues)
            throw SimError(std::string("sim::Params::") + name + " must be from 0 (one hardware queue per stream) to " +
                           std::to_string(max_hardware_queues) + ", got " + std::to_string(queues));
    if (params.max_resident_kernels < 0)
        throw SimError("sim::Params::max_resident_kernels must be >= 0 (0: the device's limit), got " +
                       std::to_string(params.max_resident_kernels));
}

// Kernel costs the model cannot use are ModelErrors, program structure the
// simulator cannot run is a SimError; both name what is wrong.
inline CheckedProgram check_program(const DeviceSpec& dev, const Program& p, const Params& params) {
    check_params(params);
    const std::string device = dev.key.empty() ? dev.name : dev.key;
    if (dev.sm_count <= 0) throw SimError("device '" + device + "' has no SMs (sm_count " + std::to_string(dev.sm_count) + ")");
    CheckedProgram c;
    c.resident_limit = static_cast<std::uint32_t>(params.max_resident_kernels > 0 ? params.max_resident_kernels
                                                                                    : dev.max_resident_grids);
    if (c.resident_limit == 0)
        throw SimError("device '" + device + "' allows no resident kernels (max_resident_grids 0) and "
                       "sim::Params::max_resident_kernels is 0");

    c.work.reserve(p.kernels.size());
    for (std::size_t k = 0; k < p.kernels.size(); ++k) {
        const KernelCost& cost = p.kernels[k].cost;
        const std::string who = describe_kernel(p, k);
        if (!(cost.duration_ns > 0.0) || !std::isfinite(cost.duration_ns))
            throw ModelError(who + ": duration must be finite and > 0 ns, got " + std::to_string(cost.duration_ns));
        if (!(cost.dram_bytes >= 0.0) || !std::isfinite(cost.dram_bytes))
            throw ModelError(who + ": dram_bytes must be finite and >= 0, got " + std::to_string(cost.dram_bytes));
        if (std::string problem = launch_problem(cost.shape); !problem.empty()) throw ModelError(who + ": " + problem);
        if (std::isnan(p.kernels[k].host_ns) || std::isinf(p.kernels[k].host_ns))
            throw ModelError(who + ": host_ns must be finite (< 0: not measured), got " +
                             std::to_string(p.kernels[k].host_ns));
        try {
            c.work.push_back(kernel_work(dev, cost));
        } catch (const ModelError& e) {
            throw ModelError(who + ": " + e.what());
        }
        if (c.work.back().memory_bound() && !(dev.dram_bytes_per_ns() > 0.0))
            throw SimError(who + " moves DRAM bytes but device '" + device + "' has no dram_bandwidth_gbps");
    }

    const std::uint32_t streams = p.stream_count();
    c.launch_action.assign(p.kernels.size(), no_action);
    c.waited_record.assign(p.actions.size(), no_action);
    std::vector<std::uint32_t> last_record(p.event_count, no_action);
    for (std::uint32_t a = 0; a < p.actions.size(); ++a) {
        const Action& act = p.actions[a];
        if (act.stream >= streams)
            throw SimError(describe_action(p, a) + ": stream " + std::to_string(act.stream) + " is out of range (the program has " +
                           std::to_string(streams) + " stream(s) in stream_priorities)");
        switch (act.kind) {
            case ActionKind::launch:
                if (act.index >= p.kernels.size())
                    throw SimError(describe_action(p, a) + " on stream " + std::to_string(act.stream) + ": unknown kernel index " +
                                   std::to_string(act.index) + " (the program has " + std::to_string(p.kernels.size()) +
                                   " kernels)");
                if (c.launch_action[act.index] != no_action)
                    throw SimError(describe_kernel(p, act.index) + " is launched twice: by action " +
                                   std::to_string(c.launch_action[act.index]) + " and action " + std::to_string(a));
                c.launch_action[act.index] = a;
                break;
            case ActionKind::record:
            case ActionKind::wait:
                if (act.index >= p.event_count)
                    throw SimError(describe_action(p, a) + " on stream " + std::to_string(act.stream) + ": unknown event " +
                                   std::to_string(act.index) + " (the program has " + std::to_string(p.event_count) +
                                   " events)");
                if (act.kind == ActionKind::record) {
                    last_record[act.index] = a;
                } else {
                    if (last_record[act.index] == no_action)
                        throw SimError("stream " + std::to_string(act.stream) + " waits for event " +
                                       std::to_string(act.index) + " (action " + std::to_string(a) +
                                       "), but no earlier action records that event");
                    c.waited_record[a] = last_record[act.index];
                }
                break;
            default:
                throw SimError("action " + std::to_string(a) + " has an unknown kind " +
                               std::to_string(static_cast<int>(act.kind)));
        }
    }
    for (std::size_t k = 0; k < p.kernels.size(); ++k)
        if (c.launch_action[k] == no_action) throw SimError(describe_kernel(p, k) + " is never launched");
    return c;
}

}  // namespace braid::sim
