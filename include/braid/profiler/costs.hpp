// From a profile to the OpCosts the planner, simulator and lower bound use.
//
// Per op, in launch order:
// - each kernel: its recorded shape and resources, with its median duration;
// - each memcpy/memset: a one-block, one-warp pseudo-kernel with the median
//   duration (copy engines and memset barely touch the SMs, but the work
//   still occupies the op's stream for that long). DRAM bytes: 2 x bytes for
//   device-to-device copies, bytes for memsets, 0 for transfers over PCIe or
//   NVLink (they are not limited by this GPU's DRAM bandwidth);
// - in a durations-only profile: one pseudo-kernel per op with the op's
//   median duration and a launch shape that fills the TARGET GPU for exactly
//   one wave (256-thread blocks, 32 registers, no shared memory), so the
//   planner never assumes such an op leaves SMs free.
// Kernel DRAM bytes are unknown to a profile and set to 0.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "braid/graph/op_graph.hpp"
#include "braid/model/cost.hpp"
#include "braid/model/device_spec.hpp"
#include "braid/model/occupancy.hpp"
#include "braid/profiler/profile.hpp"

namespace braid {

// "" when the profile was measured on `target` (same name, compute
// capability and SM count); otherwise a warning for tools to print: the
// profile is still usable, its times are taken as they were measured.
inline std::string profile_device_warning(const Profile& profile, const DeviceSpec& target) {
    const DeviceSpec& d = profile.device;
    if (d.name == target.name && d.cc_major == target.cc_major && d.cc_minor == target.cc_minor &&
        d.sm_count == target.sm_count)
        return "";
    auto describe = [](const DeviceSpec& s) {
        return "'" + (s.name.empty() ? s.key : s.name) + "' (cc " + std::to_string(s.cc_major) + "." +
               std::to_string(s.cc_minor) + ", " + std::to_string(s.sm_count) + " SMs)";
    };
    return "the profile was measured on " + describe(d) + " and is used for " + describe(target) +
           ": kernel times are taken as measured, launch shapes and resources as recorded; predictions may be off";
}

// How long the profiled run's own iterations took (median, first activity
// to last), when CUPTI timed every kernel: the run the planner derives the
// host's cost per launch from (planner/calibrate.hpp, profiled_launch_ns).
// 0 for event profiles, whose op durations include idle gaps.
inline double profiled_iteration_ns(const Profile& profile) {
    return profile.timing == ProfileTiming::cupti && profile.iteration ? profile.iteration->median_ns : 0.0;
}

// The launch shape a durations-only op gets on `target`: one full wave.
inline KernelShape durations_only_shape(const DeviceSpec& target, const std::string& op_name) {
    KernelShape k;
    k.name = op_name + " (durations only)";
    k.block = {256, 1, 1};
    k.regs_per_thread = 32;
    const Occupancy o = occupancy(target, k);
    k.grid = {static_cast<std::uint32_t>(o.blocks_per_sm * target.sm_count), 1, 1};
    return k;
}

// A memcpy/memset as the cost model sees it (see the file comment).
inline KernelCost transfer_cost(const ProfiledTransfer& t, const std::string& op_name) {
    KernelCost k;
    k.shape.name = op_name + " " + std::string(to_string(t.kind)) + " " + std::to_string(t.bytes) + " B";
    k.shape.grid = {1, 1, 1};
    k.shape.block = {32, 1, 1};
    k.duration_ns = std::max(t.duration.median_ns, 1.0);
    const double bytes = static_cast<double>(t.bytes);
    k.dram_bytes = t.kind == TransferKind::memcpy_dtod ? 2.0 * bytes : t.kind == TransferKind::memset ? bytes : 0.0;
    return k;
}

// Costs for every op of `graph` on `target`, indexed by OpId. Throws
// ProfileError when the profile was made for another graph (naming both
// fingerprints) or lacks ops (naming them), and ModelError (naming the op and
// kernel) when a recorded kernel cannot run on `target`. Durations are
// clamped to >= 1 ns (the cost model needs positive times).
inline OpCosts costs_from_profile(const Profile& profile, const OpGraph& graph, const DeviceSpec& target) {
    if (profile.graph_fingerprint != graph.fingerprint())
        throw ProfileError("the profile was made for graph " + profile.graph_fingerprint + " (network '" +
                           profile.run.network + "'), but this graph is " + graph.fingerprint() +
                           ": profile the graph again");
    // Plans split ops into batch parts; kernels measured under a split plan
    // are parts' kernels, not the op's.
    if (profile.run.plan != "serial")
        throw ProfileError("the profile was measured on a '" + profile.run.plan +
                           "' plan; costs come from a serial profile: profile again with a serial plan");
    // The fingerprint covers ops and edges, not tensor sizes: the same net at
    // another image size matches it. The embedded graph knows the sizes.
    if (profile.graph) {
        const std::span<const Buffer> buffers = profile.graph->buffers();
        if (buffers.size() != graph.buffer_count())
            throw ProfileError("the profile's graph has " + std::to_string(buffers.size()) + " buffers, this graph " +
                               std::to_string(graph.buffer_count()) + ": profile the graph again");
        for (const Buffer& b : graph.buffers()) {
            const Buffer& pb = buffers[b.id];
            if (pb.name != b.name || pb.bytes != b.bytes)
                throw ProfileError("buffer '" + b.name + "' has " + std::to_string(b.bytes) +
                                   " bytes here but the profiled graph's buffer " + std::to_string(b.id) + " is '" +
                                   pb.name + "' with " + std::to_string(pb.bytes) +
                                   " bytes (another batch or image size?): profile the graph again");
        }
    }
    std::unordered_map<std::string, const ProfiledOp*> by_name;
    for (const ProfiledOp& op : profile.ops) by_name.emplace(op.name, &op);
    std::vector<std::string> missing;
    for (const Op& op : graph.ops())
        if (!by_name.count(op.name)) missing.push_back(op.name);
    if (!missing.empty()) throw ProfileError("the profile has " + unmeasured_ops_message(missing));

    OpCosts costs(graph.op_count());
    for (const Op& op : graph.ops()) {
        const ProfiledOp& p = *by_name.at(op.name);
        OpCost& cost = costs[op.id];
        if (p.host) cost.host_ns = p.host->median_ns;
        if (profile.durations_only) {
            KernelCost k;
            k.shape = durations_only_shape(target, op.name);
            k.duration_ns = std::max(p.duration.median_ns, 1.0);
            cost.kernels.push_back(std::move(k));
            continue;
        }
        std::vector<std::pair<std::uint32_t, KernelCost>> ordered;
        for (const ProfiledKernel& pk : p.kernels)
            ordered.emplace_back(pk.order, KernelCost{pk.shape, std::max(pk.duration.median_ns, 1.0), 0.0});
        for (const ProfiledTransfer& t : p.transfers) ordered.emplace_back(t.order, transfer_cost(t, op.name));
        std::stable_sort(ordered.begin(), ordered.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
        for (auto& [order, k] : ordered) cost.kernels.push_back(std::move(k));
    }
    // occupancy() names the kernel and the resource it runs out of; add the op.
    for (const Op& op : graph.ops())
        for (std::size_t j = 0; j < costs[op.id].kernels.size(); ++j) {
            const KernelShape& k = costs[op.id].kernels[j].shape;
            try {
                (void)occupancy(target, k);
            } catch (const ModelError& e) {
                throw ModelError("op '" + op.name + "' kernel " + std::to_string(j) + " ('" + k.name +
                                 "') cannot run on " + (target.key.empty() ? target.name : target.key) + ": " +
                                 e.what());
            }
        }
    std::vector<std::string> names;
    for (const Op& op : graph.ops()) names.push_back(op.name);
    validate_costs(target, costs, names);
    return costs;
}

}  // namespace braid
