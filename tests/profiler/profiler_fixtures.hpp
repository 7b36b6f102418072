// Hand-made traces for the profiler tests: a small branching graph and a
// builder that fakes what CUPTI and the hook would record, with exact times.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "braid/graph/op_graph.hpp"
#include "braid/model/device_table.hpp"
#include "braid/profiler/records.hpp"

namespace braid::testing {

// load -> (left, right) -> join
inline OpGraph branch_graph() {
    OpGraphBuilder b;
    const BufferId in = b.add_buffer("in", 4096), l = b.add_buffer("l", 4096), r = b.add_buffer("r", 4096),
                   out = b.add_buffer("out", 4096);
    b.add_op({.name = "load", .kind = OpKind::forward, .layer = "input", .reads = {}, .writes = {in}});
    b.add_op({.name = "left", .kind = OpKind::forward, .layer = "branch", .reads = {in}, .writes = {l}});
    b.add_op({.name = "right", .kind = OpKind::forward, .layer = "branch", .reads = {in}, .writes = {r}});
    b.add_op({.name = "join", .kind = OpKind::forward, .layer = "join", .reads = {l, r}, .writes = {out}});
    return b.finalize();
}

// Builds a Trace the way CUPTI would fill it: every launch gets a fresh
// correlation id, and when made inside an op an external-correlation record
// and a runtime API record.
class TraceBuilder {
public:
    static constexpr std::uint32_t context = 7;

    explicit TraceBuilder(std::uint32_t first_correlation = 100) : next_correlation_(first_correlation) {
        trace.context_id = context;
    }

    // Opens op `op` of `iteration`: the hook's push.
    std::uint64_t begin(std::uint32_t iteration, OpId op, std::uint32_t part = 0) {
        current_ = ++next_external_;
        trace.markers.push_back(profiler::OpMarker{current_, iteration, op, part});
        return current_;
    }
    // Closes it: the hook's pop, with the body's host time when it was timed.
    void end(double host_ns = -1.0) {
        if (host_ns >= 0.0)
            for (auto m = trace.markers.rbegin(); m != trace.markers.rend(); ++m)
                if (m->external_id == current_) {
                    m->host_ns = host_ns;
                    break;
                }
        current_ = 0;
    }

    // A kernel launched now (inside the open op, if any), running [start, end).
    std::uint32_t kernel(const std::string& name, std::uint64_t start, std::uint64_t end, Dim3 grid = {8, 1, 1},
                         Dim3 block = {128, 1, 1}, std::uint32_t regs = 32, std::uint32_t context_id = context,
                         std::uint64_t api_ns = 0) {
        const std::uint32_t corr = launch(api_ns);
        profiler::KernelActivity k;
        k.name = name;
        k.grid = grid;
        k.block = block;
        k.regs_per_thread = regs;
        k.static_smem_bytes = 1024;
        k.dynamic_smem_bytes = 0;
        k.start_ns = start;
        k.end_ns = end;
        k.context_id = context_id;
        k.correlation_id = corr;
        trace.kernels.push_back(k);
        return corr;
    }

    std::uint32_t transfer(TransferKind kind, std::uint64_t bytes, std::uint64_t start, std::uint64_t end) {
        const std::uint32_t corr = launch(0);
        trace.transfers.push_back(profiler::TransferActivity{kind, bytes, start, end, 0, context, 0, corr});
        return corr;
    }

    profiler::Trace trace;

private:
    std::uint32_t launch(std::uint64_t api_ns) {
        const std::uint32_t corr = next_correlation_++;
        if (current_ != 0) trace.correlations.push_back({profiler::braid_external_kind, current_, corr});
        if (api_ns > 0) trace.api_calls.push_back({profiler::ApiDomain::runtime, 211, 1000, 1000 + api_ns, 1, corr});
        return corr;
    }

    std::uint32_t next_correlation_;
    std::uint64_t next_external_ = 0;
    std::uint64_t current_ = 0;
};

}  // namespace braid::testing
