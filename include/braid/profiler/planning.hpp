// What a plan from a profile is made with: the profile's measured kernel
// costs and, with a calibration, those times as a plain run in the plan's
// launch mode sees them and the simulator's constants for this profile (the
// host's cost per launch found from how long the profiled run itself took;
// docs/calibration.md). braid-plan --profile and braid-profile's plan.json
// both plan with it, so the two give the same plan for the same profile.
#pragma once

#include <optional>
#include <utility>

#include "braid/graph/op_graph.hpp"
#include "braid/model/cost.hpp"
#include "braid/model/device_spec.hpp"
#include "braid/planner/calibrate.hpp"
#include "braid/planner/calibration.hpp"
#include "braid/profiler/costs.hpp"
#include "braid/profiler/profile.hpp"
#include "braid/sim/launch_mode.hpp"
#include "braid/sim/program.hpp"

namespace braid {

struct ProfilePlanning {
    OpCosts costs;
    // Without a calibration: the defaults, but a launch costs the host what
    // the profiled run's launch calls took (their median).
    sim::Params sim;
};

// Throws ProfileError when `profile` was made for another graph.
inline ProfilePlanning profile_planning(const Profile& profile, const OpGraph& graph, const DeviceSpec& dev,
                                        const std::optional<Calibration>& calibration, LaunchMode mode) {
    ProfilePlanning p;
    p.costs = costs_from_profile(profile, graph, dev);
    if (calibration) {
        const double launch_ns =
            profiled_launch_ns(graph, dev, p.costs, profiled_iteration_ns(profile), calibration->sim);
        p.sim = calibration->sim_for_profile(launch_ns);
        p.costs = calibrated_costs(std::move(p.costs), *calibration, mode);
    } else if (profile.launch_api) {
        p.sim.launch_latency_ns = profile.launch_api->median_ns;
    }
    return p;
}

}  // namespace braid
