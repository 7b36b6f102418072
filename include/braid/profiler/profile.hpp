// Profile: what one profiling run measured, per op of a graph — the kernels
// each op launched (launch shape, registers, shared memory, duration over the
// measured iterations) and its memcpy/memset work. Plain values; the JSON form
// is braid/profiler/profile_json.hpp, the costs the planner uses come from
// braid/profiler/costs.hpp.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "braid/error.hpp"
#include "braid/graph/op_graph.hpp"
#include "braid/model/device_spec.hpp"
#include "braid/model/kernel.hpp"

namespace braid {

// A profile that cannot be used for what it is asked: made for another
// graph, lacking ops, or inconsistent records.
class ProfileError : public Error {
public:
    using Error::Error;
};

// Median, minimum and maximum of `count` samples (nanoseconds). The median of
// an even count is the mean of the two middle samples.
struct DurationStats {
    double median_ns = 0.0;
    double min_ns = 0.0;
    double max_ns = 0.0;
    std::uint32_t count = 0;

    friend bool operator==(const DurationStats&, const DurationStats&) = default;
};

inline DurationStats duration_stats(std::vector<double> samples_ns) {
    DurationStats s;
    if (samples_ns.empty()) return s;
    std::sort(samples_ns.begin(), samples_ns.end());
    const std::size_t n = samples_ns.size();
    s.count = static_cast<std::uint32_t>(n);
    s.min_ns = samples_ns.front();
    s.max_ns = samples_ns.back();
    s.median_ns = n % 2 == 1 ? samples_ns[n / 2] : (samples_ns[n / 2 - 1] + samples_ns[n / 2]) / 2.0;
    return s;
}

// One kernel position within an op: the i-th kernel the op launches, the same
// function and shape in every measured iteration.
struct ProfiledKernel {
    KernelShape shape;           // name is the demangled function name
    DurationStats duration;      // over the measured iterations
    std::uint32_t order = 0;     // position among the op's kernels and transfers, in launch order

    friend bool operator==(const ProfiledKernel&, const ProfiledKernel&) = default;
};

enum class TransferKind : std::uint8_t {
    memcpy_htod,
    memcpy_dtoh,
    memcpy_dtod,
    memcpy_htoh,
    memcpy_ptop,
    memcpy_other,  // arrays and unknown directions
    memset,
};

inline constexpr TransferKind all_transfer_kinds[] = {
    TransferKind::memcpy_htod, TransferKind::memcpy_dtoh, TransferKind::memcpy_dtod, TransferKind::memcpy_htoh,
    TransferKind::memcpy_ptop, TransferKind::memcpy_other, TransferKind::memset};

constexpr std::string_view to_string(TransferKind k) noexcept {
    switch (k) {
        case TransferKind::memcpy_htod: return "memcpy_htod";
        case TransferKind::memcpy_dtoh: return "memcpy_dtoh";
        case TransferKind::memcpy_dtod: return "memcpy_dtod";
        case TransferKind::memcpy_htoh: return "memcpy_htoh";
        case TransferKind::memcpy_ptop: return "memcpy_ptop";
        case TransferKind::memcpy_other: return "memcpy_other";
        case TransferKind::memset: return "memset";
    }
    return "memcpy_other";
}

inline std::optional<TransferKind> transfer_kind_from_string(std::string_view text) noexcept {
    for (TransferKind k : all_transfer_kinds)
        if (to_string(k) == text) return k;
    return std::nullopt;
}

// One memcpy or memset position within an op.
struct ProfiledTransfer {
    TransferKind kind = TransferKind::memcpy_other;
    std::uint64_t bytes = 0;
    DurationStats duration;
    std::uint32_t order = 0;  // position among the op's kernels and transfers, in launch order

    friend bool operator==(const ProfiledTransfer&, const ProfiledTransfer&) = default;
};

struct ProfiledOp {
    std::string name;
    std::string layer;
    OpKind kind = OpKind::other;
    // Per iteration: the GPU time of the op — the sum of its kernel and
    // transfer durations (CUPTI), or the time between CUDA events recorded
    // around its body on its stream (durations-only profiles).
    DurationStats duration;
    // Per iteration: how long the op's body took on the host (parts added),
    // its launches and library calls included; absent when the profiler did
    // not time bodies (profiles before it did). Eager runs are host-bound
    // where these add up to more than the GPU's work.
    std::optional<DurationStats> host;
    std::vector<ProfiledKernel> kernels;      // empty in durations-only profiles
    std::vector<ProfiledTransfer> transfers;  // likewise

    friend bool operator==(const ProfiledOp&, const ProfiledOp&) = default;
};

// GPU work that no op owns, summed by name: reported, never dropped.
struct UnattributedWork {
    std::string what;  // "kernel", "memcpy_htod", ..., "memset"
    std::string name;  // kernel name, or "" for transfers
    std::uint32_t count = 0;
    double total_ns = 0.0;

    friend bool operator==(const UnattributedWork&, const UnattributedWork&) = default;
};

// One setting of the profiled network (a batch size, a flag, a variant's
// name): scalars only, so settings stay flat, comparable and printable.
using ProfileSetting = std::variant<std::int64_t, double, bool, std::string>;
using ProfileSettings = std::map<std::string, ProfileSetting>;

// What was run to make the profile.
struct ProfileRun {
    std::string network;           // "demo", "googlenet", ...
    ProfileSettings settings;      // the network's settings (batch, sizes), by name
    std::string plan = "serial";   // the plan the iterations ran on
    std::uint32_t warmup_iterations = 0;
    std::uint32_t measured_iterations = 0;
    std::string tool;              // what wrote it ("braid-profile 0.1.0")

    friend bool operator==(const ProfileRun&, const ProfileRun&) = default;
};

enum class ProfileTiming : std::uint8_t {
    cupti,        // CUPTI activity records: per-kernel shapes and durations
    cuda_events,  // CUDA events around each op: durations only
};

constexpr std::string_view to_string(ProfileTiming t) noexcept {
    return t == ProfileTiming::cuda_events ? "cuda_events" : "cupti";
}

struct Profile {
    static constexpr int format_version = 1;

    DeviceSpec device;                  // the GPU it was measured on
    std::string graph_fingerprint;      // OpGraph::fingerprint() of the graph that ran
    // The graph itself, so the profile can be planned without the program
    // that made it; empty when not stored.
    std::optional<OpGraph> graph;
    ProfileRun run;
    ProfileTiming timing = ProfileTiming::cupti;
    // Kernels unknown: every op has only its duration (CUPTI could not start).
    bool durations_only = false;
    // Per iteration: first activity start to last activity end on the GPU.
    std::optional<DurationStats> iteration;
    // Host time of the runtime/driver call that launched each kernel.
    std::optional<DurationStats> launch_api;
    std::vector<ProfiledOp> ops;        // in the graph's op order
    std::vector<UnattributedWork> unattributed;
    std::uint64_t dropped_records = 0;  // CUPTI records lost for lack of buffer space

    const ProfiledOp* find_op(std::string_view name) const noexcept {
        for (const ProfiledOp& op : ops)
            if (op.name == name) return &op;
        return nullptr;
    }

    friend bool operator==(const Profile&, const Profile&) = default;
};

// "no measurements for 2 op(s) of the graph: 'a', 'b'": at most ten names,
// then how many more.
inline std::string unmeasured_ops_message(const std::vector<std::string>& missing, const std::string& graph = "the graph") {
    std::string names;
    for (std::size_t i = 0; i < missing.size() && i < 10; ++i) names += (i ? ", '" : "'") + missing[i] + "'";
    if (missing.size() > 10) names += " and " + std::to_string(missing.size() - 10) + " more";
    return "no measurements for " + std::to_string(missing.size()) + " op(s) of " + graph + ": " + names;
}

}  // namespace braid
