// Aggregation: from per-iteration attributed work to one ProfiledOp per op —
// median/min/max/count of each kernel position (the i-th kernel an op
// launches) and of the op as a whole over the measured iterations. Pure
// functions; make_profile() puts the result into a Profile.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "braid/graph/op_graph.hpp"
#include "braid/model/device_spec.hpp"
#include "braid/profiler/attribution.hpp"
#include "braid/profiler/profile.hpp"
#include "braid/profiler/records.hpp"

namespace braid::profiler {

struct Aggregate {
    std::vector<ProfiledOp> ops;  // graph order; ops that never ran are left out (and warned about)
    std::vector<UnattributedWork> unattributed;
    std::optional<DurationStats> iteration;
    std::optional<DurationStats> launch_api;
    std::vector<std::string> warnings;
};

namespace detail {

inline double span_ns(std::uint64_t start, std::uint64_t end) {
    return end >= start ? static_cast<double>(end - start) : 0.0;
}

inline ProfiledOp op_header(const Op& op) {
    ProfiledOp p;
    p.name = op.name;
    p.layer = op.layer;
    p.kind = op.kind;
    return p;
}

inline std::string work_label(const Trace& trace, const WorkRef& w) {
    if (w.kernel) {
        const KernelActivity& k = trace.kernels[w.index];
        return "kernel '" + k.name + "' grid [" + std::to_string(k.grid.x) + "," + std::to_string(k.grid.y) + "," +
               std::to_string(k.grid.z) + "] block [" + std::to_string(k.block.x) + "," + std::to_string(k.block.y) +
               "," + std::to_string(k.block.z) + "]";
    }
    const TransferActivity& t = trace.transfers[w.index];
    return std::string(to_string(t.kind)) + " of " + std::to_string(t.bytes) + " bytes";
}

// Same function, shape and resources (or same transfer kind and size).
inline bool same_work(const Trace& trace, const WorkRef& a, const WorkRef& b) {
    if (a.kernel != b.kernel) return false;
    if (a.kernel) {
        const KernelActivity& x = trace.kernels[a.index];
        const KernelActivity& y = trace.kernels[b.index];
        return x.name == y.name && x.grid == y.grid && x.block == y.block && x.regs_per_thread == y.regs_per_thread &&
               x.static_smem_bytes == y.static_smem_bytes && x.dynamic_smem_bytes == y.dynamic_smem_bytes;
    }
    const TransferActivity& x = trace.transfers[a.index];
    const TransferActivity& y = trace.transfers[b.index];
    return x.kind == y.kind && x.bytes == y.bytes;
}

inline double work_ns(const Trace& trace, const WorkRef& w) {
    if (w.kernel) return span_ns(trace.kernels[w.index].start_ns, trace.kernels[w.index].end_ns);
    return span_ns(trace.transfers[w.index].start_ns, trace.transfers[w.index].end_ns);
}

inline std::vector<UnattributedWork> summarize(std::span<const UnattributedActivity> items) {
    std::map<std::pair<std::string, std::string>, UnattributedWork> by_name;
    for (const UnattributedActivity& u : items) {
        UnattributedWork& w = by_name[{u.what, u.name}];
        w.what = u.what;
        w.name = u.name;
        ++w.count;
        w.total_ns += span_ns(u.start_ns, u.end_ns);
    }
    std::vector<UnattributedWork> out;
    for (auto& [key, w] : by_name) out.push_back(std::move(w));
    return out;
}

// The statistics of the measured (>= 0) samples; none when there are none.
inline std::optional<DurationStats> host_stats(std::span<const double> samples_ns) {
    std::vector<double> measured;
    for (double s : samples_ns)
        if (s >= 0.0) measured.push_back(s);
    if (measured.empty()) return std::nullopt;
    return duration_stats(std::move(measured));
}

}  // namespace detail

// Per op: the first iteration it ran in fixes its sequence of kernels and
// transfers; every iteration whose work at a position is the same kernel
// (name, shape, resources) or transfer (kind, bytes) adds a sample there.
// Differences are warned about, and those samples left out.
inline Aggregate aggregate(const Trace& trace, const Attribution& attribution, const OpGraph& graph) {
    if (attribution.work.size() != graph.op_count())
        throw ProfileError("the attribution covers " + std::to_string(attribution.work.size()) +
                           " ops, the graph has " + std::to_string(graph.op_count()));
    Aggregate out;
    for (const Op& op : graph.ops()) {
        const auto& cells = attribution.work[op.id];
        const std::vector<WorkRef>* reference = nullptr;
        std::size_t reference_slot = 0;
        for (std::size_t s = 0; s < cells.size() && !reference; ++s)
            if (cells[s]) {
                reference = &*cells[s];
                reference_slot = s;
            }
        if (!reference) {
            out.warnings.push_back("op '" + op.name + "' never ran while tracing; it is left out of the profile");
            continue;
        }
        ProfiledOp p = detail::op_header(op);
        std::vector<std::vector<double>> samples(reference->size());
        std::vector<double> op_samples;
        for (std::size_t s = 0; s < cells.size(); ++s) {
            if (!cells[s]) continue;
            const std::vector<WorkRef>& work = *cells[s];
            double total = 0.0;
            for (const WorkRef& w : work) total += detail::work_ns(trace, w);
            op_samples.push_back(total);
            const std::string where = "op '" + op.name + "' in iteration " + std::to_string(attribution.iterations[s]);
            if (work.size() != reference->size())
                out.warnings.push_back(where + " launched " + std::to_string(work.size()) + " kernels/transfers, " +
                                       std::to_string(reference->size()) + " in iteration " +
                                       std::to_string(attribution.iterations[reference_slot]));
            for (std::size_t i = 0; i < work.size() && i < reference->size(); ++i) {
                if (!detail::same_work(trace, work[i], (*reference)[i])) {
                    out.warnings.push_back(where + ": position " + std::to_string(i) + " is " +
                                           detail::work_label(trace, work[i]) + ", not " +
                                           detail::work_label(trace, (*reference)[i]) + "; sample left out");
                    continue;
                }
                samples[i].push_back(detail::work_ns(trace, work[i]));
            }
        }
        p.duration = duration_stats(op_samples);
        p.host = detail::host_stats(attribution.host_ns[op.id]);
        for (std::size_t i = 0; i < reference->size(); ++i) {
            const WorkRef& w = (*reference)[i];
            if (w.kernel) {
                const KernelActivity& k = trace.kernels[w.index];
                ProfiledKernel pk;
                pk.shape.name = k.name;
                pk.shape.grid = k.grid;
                pk.shape.block = k.block;
                pk.shape.regs_per_thread = k.regs_per_thread;
                pk.shape.static_smem_bytes = k.static_smem_bytes;
                pk.shape.dynamic_smem_bytes = k.dynamic_smem_bytes;
                pk.duration = duration_stats(samples[i]);
                pk.order = static_cast<std::uint32_t>(i);
                p.kernels.push_back(std::move(pk));
            } else {
                const TransferActivity& t = trace.transfers[w.index];
                p.transfers.push_back(
                    ProfiledTransfer{t.kind, t.bytes, duration_stats(samples[i]), static_cast<std::uint32_t>(i)});
            }
        }
        if (reference->empty())
            out.warnings.push_back("op '" + op.name + "' launched no GPU work (no kernel, memcpy or memset)");
        out.ops.push_back(std::move(p));
    }
    out.unattributed = detail::summarize(attribution.unattributed);
    if (!attribution.unattributed.empty())
        out.warnings.push_back(std::to_string(attribution.unattributed.size()) +
                               " GPU activities belong to no op (launched outside every op body); see "
                               "\"unattributed\"");
    std::vector<double> spans;
    for (double s : attribution.iteration_span_ns)
        if (s > 0.0) spans.push_back(s);
    if (!spans.empty()) out.iteration = duration_stats(spans);
    if (!attribution.launch_api_ns.empty()) out.launch_api = duration_stats(attribution.launch_api_ns);
    out.warnings.insert(out.warnings.end(), attribution.warnings.begin(), attribution.warnings.end());
    if (trace.dropped_records > 0)
        out.warnings.push_back("CUPTI dropped " + std::to_string(trace.dropped_records) +
                               " activity records (buffers full); some ops may miss kernels");
    return out;
}

// One op's time in one iteration, from CUDA events around its body, and
// its body's time on the host (< 0: not measured).
struct OpTiming {
    std::uint32_t iteration = 0;
    OpId op = 0;
    double duration_ns = 0.0;
    double host_ns = -1.0;
};

// Durations-only aggregation (the CUDA-event fallback): per op, the
// statistics of its per-iteration times (parts of a split op add up).
inline Aggregate aggregate_durations(std::span<const OpTiming> timings, std::span<const double> iteration_ns,
                                     const OpGraph& graph) {
    std::vector<std::map<std::uint32_t, double>> per_op(graph.op_count());
    std::vector<std::map<std::uint32_t, double>> host_of(graph.op_count());  // < 0: a part was not timed
    for (const OpTiming& t : timings) {
        if (t.op >= graph.op_count())
            throw ProfileError("a timing names op id " + std::to_string(t.op) + ", but the graph has " +
                               std::to_string(graph.op_count()) + " ops");
        per_op[t.op][t.iteration] += t.duration_ns;
        double& host = host_of[t.op].emplace(t.iteration, 0.0).first->second;
        host = host < 0.0 || t.host_ns < 0.0 ? -1.0 : host + t.host_ns;
    }
    Aggregate out;
    for (const Op& op : graph.ops()) {
        if (per_op[op.id].empty()) {
            out.warnings.push_back("op '" + op.name + "' never ran while timing; it is left out of the profile");
            continue;
        }
        ProfiledOp p = detail::op_header(op);
        std::vector<double> samples;
        for (const auto& [iteration, ns] : per_op[op.id]) samples.push_back(ns);
        p.duration = duration_stats(std::move(samples));
        std::vector<double> host;
        for (const auto& [iteration, ns] : host_of[op.id]) host.push_back(ns);
        p.host = detail::host_stats(host);
        out.ops.push_back(std::move(p));
    }
    std::vector<double> spans;
    for (double s : iteration_ns)
        if (s > 0.0) spans.push_back(s);
    if (!spans.empty()) out.iteration = duration_stats(std::move(spans));
    return out;
}

// The Profile of a run: the device it ran on, the graph's fingerprint, what
// ran, and the aggregate.
inline Profile make_profile(const DeviceSpec& device, const OpGraph& graph, ProfileRun run, ProfileTiming timing,
                            Aggregate aggregate, std::uint64_t dropped_records = 0) {
    Profile p;
    p.device = device;
    p.graph_fingerprint = graph.fingerprint();
    p.graph = graph;
    p.run = std::move(run);
    p.timing = timing;
    p.durations_only = timing == ProfileTiming::cuda_events;
    p.iteration = aggregate.iteration;
    p.launch_api = aggregate.launch_api;
    p.ops = std::move(aggregate.ops);
    p.unattributed = std::move(aggregate.unattributed);
    p.dropped_records = dropped_records;
    return p;
}

}  // namespace braid::profiler
