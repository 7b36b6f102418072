// A calibration: what braid learned about one GPU from measuring it, so that
// plans made without it (or without a profile) predict what it will do.
//   - per launch mode, how much faster or slower a kernel runs in a real
//     iteration than in the profile (CUPTI's overhead, clocks);
//   - the simulator's constants: host launch costs, dispatch gaps, event
//     latency, how much co-running kernels slow each other;
//   - per kernel class, how estimated kernel times map onto measured ones.
// planner/calibrate.hpp fits one from profiles and measured iterations,
// planner/calibration_json.hpp reads and writes the file, and
// planner/calibration_table.hpp holds the ones braid ships.
#pragma once

#include <span>
#include <string>
#include <utility>

#include "braid/model/cost.hpp"
#include "braid/model/device_spec.hpp"
#include "braid/model/estimate.hpp"
#include "braid/sim/launch_mode.hpp"
#include "braid/sim/program.hpp"

namespace braid {

struct Calibration {
    static constexpr int format_version = 1;

    // The GPU it was fitted on: key and name as in the device table, and
    // the SM count and compute capability that must match where it is used.
    std::string device_key;
    std::string device_name;
    int sm_count = 0;
    int cc_major = 0;
    int cc_minor = 0;
    std::string source;  // what it was fitted from, for people

    // A kernel's time in a real iteration over its time in the profile, per
    // launch mode (the profile ran eagerly under CUPTI).
    double graph_kernel_time_scale = 1.0;
    double eager_kernel_time_scale = 1.0;
    // The host's cost per launch in a plain eager run over its cost in the
    // profiled run (CUPTI records every call), for a profile that says how
    // long its own run took (planner/calibrate.hpp, profiled_launch_ns).
    // 0: plans from profiles keep sim's launch costs too.
    double cupti_host_scale = 0.0;
    sim::Params sim;  // sim.launch_latency_ns: for plans without a profile
    EstimateCalibration estimate;

    double kernel_time_scale(LaunchMode mode) const noexcept {
        return mode == LaunchMode::graph ? graph_kernel_time_scale : eager_kernel_time_scale;
    }
    // The simulator's constants for a plan from a profile whose own run cost
    // `profiled_launch_ns` per launch: that, scaled to a plain run, replaces
    // the per-launch and per-body host costs. Bodies the profile timed on
    // the host (OpCost::host_ns) cost that, scaled the same way.
    sim::Params sim_for_profile(double profiled_launch_ns) const noexcept {
        sim::Params p = sim;
        if (cupti_host_scale > 0.0) p.host_time_scale = cupti_host_scale;
        if (profiled_launch_ns > 0.0 && cupti_host_scale > 0.0) {
            p.launch_latency_ns = cupti_host_scale * profiled_launch_ns;
            p.op_host_ns = 0.0;
        }
        return p;
    }

    friend bool operator==(const Calibration&, const Calibration&) = default;
};

// Profiled costs as a real iteration in `mode` would see them.
inline OpCosts calibrated_costs(OpCosts profiled, const Calibration& c, LaunchMode mode) {
    const double s = c.kernel_time_scale(mode);
    for (OpCost& op : profiled)
        for (KernelCost& k : op.kernels) k.duration_ns *= s;
    return profiled;
}

// Estimated costs fitted to the device's profiles, as a real iteration in
// `mode` would see them.
inline OpCosts calibrated_costs(const DeviceSpec& dev, std::span<const OpEstimate> estimates, const Calibration& c,
                                LaunchMode mode) {
    return calibrated_costs(estimate_costs(dev, estimates, c.estimate), c, mode);
}

// "" when `c` was fitted on `dev` (SM count and compute capability agree);
// otherwise why it does not apply, for a warning.
inline std::string calibration_mismatch(const Calibration& c, const DeviceSpec& dev) {
    if (c.sm_count == dev.sm_count && c.cc_major == dev.cc_major && c.cc_minor == dev.cc_minor) return "";
    return "the calibration was fitted on '" + (c.device_name.empty() ? c.device_key : c.device_name) + "' (" +
           std::to_string(c.sm_count) + " SMs, cc " + std::to_string(c.cc_major) + "." + std::to_string(c.cc_minor) +
           "), not on '" + (dev.name.empty() ? dev.key : dev.name) + "' (" + std::to_string(dev.sm_count) +
           " SMs, cc " + std::to_string(dev.cc_major) + "." + std::to_string(dev.cc_minor) + ")";
}

}  // namespace braid
