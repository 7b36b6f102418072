// The graph the executor benchmarks dispatch: `ops` ops in `chains` chains
// (op k belongs to chain k % chains and updates that chain's buffer); every
// 16th op also reads the next chain's buffer, so plans need cross-stream
// waits. The plan puts chain c on stream c % streams, in program order, with
// minimal waits.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "braid/graph/op_graph.hpp"
#include "braid/plan/plan.hpp"
#include "braid/plan/waits.hpp"

namespace braid::testing {

inline OpGraph dispatch_graph(std::uint32_t ops = 2000, std::uint32_t chains = 8) {
    OpGraphBuilder b;
    std::vector<BufferId> buf;
    for (std::uint32_t c = 0; c < chains; ++c) buf.push_back(b.add_buffer("chain" + std::to_string(c), 256));
    for (std::uint32_t k = 0; k < ops; ++k) {
        const std::uint32_t c = k % chains;
        OpSpec spec;
        spec.name = "op" + std::to_string(k);
        spec.reads = {buf[c]};
        if (k % 16 == 15) spec.reads.push_back(buf[(c + 1) % chains]);
        spec.writes = {buf[c]};
        b.add_op(std::move(spec));
    }
    return b.finalize();
}

inline Plan dispatch_plan(const OpGraph& g, std::uint32_t streams = 4, std::uint32_t chains = 8) {
    Plan p;
    p.strategy = "bench";
    p.graph_fingerprint = g.fingerprint();
    p.stream_priorities.assign(streams, 0);
    for (OpId op = 0; op < g.op_count(); ++op) p.steps.push_back(PlanStep{op, 0, 1, (op % chains) % streams});
    assign_minimal_waits(p, g);
    return p;
}

}  // namespace braid::testing
