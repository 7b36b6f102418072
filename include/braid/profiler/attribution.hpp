// Attribution: which op (and iteration) each kernel, memcpy and memset of a
// trace belongs to. Only through correlation ids — a GPU activity carries the
// correlation id of the runtime/driver call that launched it, CUPTI links that
// call to the external id braid's hook had pushed, and the hook's markers map
// the external id to (iteration, op, part). No time windows: kernels of
// concurrent ops can overlap in time freely. A pure function of the trace.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "braid/profiler/profile.hpp"
#include "braid/profiler/records.hpp"

namespace braid::profiler {

// One kernel or transfer of an op in one iteration.
struct WorkRef {
    bool kernel = true;      // Trace::kernels, else Trace::transfers
    std::size_t index = 0;   // into that vector
    std::uint32_t part = 0;  // batch part of the op that launched it
};

// GPU work no op owns, with why.
struct UnattributedActivity {
    std::string what;  // "kernel", or the transfer kind
    std::string name;  // kernel name ("" for transfers)
    std::uint32_t correlation_id = 0;
    std::uint64_t start_ns = 0;
    std::uint64_t end_ns = 0;
    std::string reason;
};

struct Attribution {
    std::vector<std::uint32_t> iterations;  // the iterations the markers name, ascending
    // [op][i]: the op's work in iterations[i], in launch order; nullopt when
    // the op did not run in that iteration (no marker).
    std::vector<std::vector<std::optional<std::vector<WorkRef>>>> work;
    // [op][i]: host time of the op's bodies in iterations[i] (parts added);
    // < 0 when the op did not run then or a marker carries no host time.
    std::vector<std::vector<double>> host_ns;
    std::vector<UnattributedActivity> unattributed;
    std::uint64_t ignored_other_context = 0;  // activities of other CUPTI contexts
    std::vector<double> iteration_span_ns;    // [i]: first start to last end of attributed work (0 if none)
    std::vector<double> launch_api_ns;        // host time of each call that launched an attributed kernel
    std::vector<std::string> warnings;
};

// Throws ProfileError when the markers contradict themselves (an external id
// pushed for two ops) or name an op outside the graph.
inline Attribution attribute(const Trace& trace, std::size_t op_count) {
    Attribution out;

    std::unordered_map<std::uint64_t, const OpMarker*> marker_of;
    for (const OpMarker& m : trace.markers) {
        if (m.op >= op_count)
            throw ProfileError("marker for external id " + std::to_string(m.external_id) + " names op id " +
                               std::to_string(m.op) + ", but the graph has " + std::to_string(op_count) + " ops");
        auto [it, fresh] = marker_of.emplace(m.external_id, &m);
        if (!fresh && (it->second->op != m.op || it->second->iteration != m.iteration || it->second->part != m.part))
            throw ProfileError("external id " + std::to_string(m.external_id) + " was pushed for op id " +
                               std::to_string(it->second->op) + " and again for op id " + std::to_string(m.op));
        out.iterations.push_back(m.iteration);
    }
    std::sort(out.iterations.begin(), out.iterations.end());
    out.iterations.erase(std::unique(out.iterations.begin(), out.iterations.end()), out.iterations.end());
    auto slot_of = [&](std::uint32_t iteration) {
        return static_cast<std::size_t>(std::lower_bound(out.iterations.begin(), out.iterations.end(), iteration) -
                                        out.iterations.begin());
    };

    out.work.assign(op_count, std::vector<std::optional<std::vector<WorkRef>>>(out.iterations.size()));
    // One sample per (op, iteration) needs every part's body timed: a
    // partial sum would pass for a whole one.
    std::vector<std::vector<bool>> host_missing(op_count, std::vector<bool>(out.iterations.size(), false));
    out.host_ns.assign(op_count, std::vector<double>(out.iterations.size(), -1.0));
    for (const OpMarker& m : trace.markers) {
        const std::size_t slot = slot_of(m.iteration);
        auto& cell = out.work[m.op][slot];
        if (!cell) cell.emplace();
        if (m.host_ns < 0.0 || !std::isfinite(m.host_ns)) {
            host_missing[m.op][slot] = true;
            continue;
        }
        double& host = out.host_ns[m.op][slot];
        host = (host < 0.0 ? 0.0 : host) + m.host_ns;
    }
    for (std::size_t op = 0; op < op_count; ++op)
        for (std::size_t s = 0; s < out.iterations.size(); ++s)
            if (host_missing[op][s]) out.host_ns[op][s] = -1.0;

    std::unordered_map<std::uint32_t, std::uint64_t> external_of;  // correlation id -> braid's external id
    for (const ExternalCorrelation& c : trace.correlations) {
        if (c.external_kind != trace.external_kind) continue;
        auto [it, fresh] = external_of.emplace(c.correlation_id, c.external_id);
        if (!fresh && it->second != c.external_id)
            out.warnings.push_back("correlation id " + std::to_string(c.correlation_id) + " is linked to external ids " +
                                   std::to_string(it->second) + " and " + std::to_string(c.external_id) +
                                   "; the first is used");
    }

    std::unordered_map<std::uint32_t, double> api_ns;  // correlation id -> host time of the call
    for (const ApiActivity& a : trace.api_calls)
        api_ns.emplace(a.correlation_id, a.end_ns >= a.start_ns ? static_cast<double>(a.end_ns - a.start_ns) : 0.0);

    std::vector<std::uint64_t> first_start(out.iterations.size(), std::numeric_limits<std::uint64_t>::max()),
        last_end(out.iterations.size(), 0);
    std::size_t incomplete = 0;
    auto place = [&](bool kernel, std::size_t index, const std::string& what, const std::string& name,
                     std::uint32_t context, std::uint32_t correlation, std::uint64_t start, std::uint64_t end) {
        if (trace.context_id && context != *trace.context_id) {
            ++out.ignored_other_context;
            return;
        }
        auto unattributed = [&](std::string reason) {
            out.unattributed.push_back(UnattributedActivity{what, name, correlation, start, end, std::move(reason)});
        };
        auto ext = external_of.find(correlation);
        if (ext == external_of.end()) {
            unattributed("no braid external correlation: launched outside every op body");
            return;
        }
        auto m = marker_of.find(ext->second);
        if (m == marker_of.end()) {
            unattributed("external id " + std::to_string(ext->second) + " was not pushed by this trace's hook");
            return;
        }
        const std::size_t slot = slot_of(m->second->iteration);
        out.work[m->second->op][slot]->push_back(WorkRef{kernel, index, m->second->part});
        if (end == 0 || end < start) {
            ++incomplete;  // counted, but kept out of the iteration's span
        } else {
            first_start[slot] = std::min(first_start[slot], start);
            last_end[slot] = std::max(last_end[slot], end);
        }
        if (kernel)
            if (auto a = api_ns.find(correlation); a != api_ns.end()) out.launch_api_ns.push_back(a->second);
    };
    for (std::size_t i = 0; i < trace.kernels.size(); ++i) {
        const KernelActivity& k = trace.kernels[i];
        place(true, i, "kernel", k.name, k.context_id, k.correlation_id, k.start_ns, k.end_ns);
    }
    for (std::size_t i = 0; i < trace.transfers.size(); ++i) {
        const TransferActivity& t = trace.transfers[i];
        place(false, i, std::string(to_string(t.kind)), "", t.context_id, t.correlation_id, t.start_ns, t.end_ns);
    }

    if (incomplete > 0)
        out.warnings.push_back(std::to_string(incomplete) +
                               " attributed activities have no valid start/end time (incomplete when flushed); "
                               "they count as 0 ns");

    // Launch order within an op: by batch part, then by the correlation id of
    // the launching call (ids grow with every call), then by start time (the
    // kernels of one graph launch share its id).
    auto key = [&](const WorkRef& w) {
        if (w.kernel) {
            const KernelActivity& k = trace.kernels[w.index];
            return std::tuple(w.part, k.correlation_id, k.start_ns, 0);
        }
        const TransferActivity& t = trace.transfers[w.index];
        return std::tuple(w.part, t.correlation_id, t.start_ns, 1);
    };
    for (auto& per_op : out.work)
        for (auto& cell : per_op)
            if (cell) std::stable_sort(cell->begin(), cell->end(), [&](const WorkRef& a, const WorkRef& b) {
                    return key(a) < key(b);
                });

    out.iteration_span_ns.resize(out.iterations.size(), 0.0);
    for (std::size_t s = 0; s < out.iterations.size(); ++s)
        if (last_end[s] > first_start[s])
            out.iteration_span_ns[s] = static_cast<double>(last_end[s] - first_start[s]);
    return out;
}

}  // namespace braid::profiler
