// What an op body is told when it runs, and the hook a profiler uses to
// bracket each op's launches.
#pragma once

#include <cstdint>

#include "braid/graph/op.hpp"

namespace braid {

struct OpContext {
    OpId op = 0;
    const Op* info = nullptr;     // the op in the graph (name, kind, layer, accesses)
    std::uint32_t step = 0;       // index in the plan's issue order
    std::uint32_t lane = 0;       // the stream/worker it runs on
    std::uint32_t part = 0;       // batch part, 0 when unsplit
    std::uint32_t parts = 1;
    std::uint32_t batch_begin = 0;  // images [batch_begin, batch_end) of the op's batch
    std::uint32_t batch_end = 0;    // (both 0 for ops that are not splittable)
};

// Called right before and after each op body, on the thread that runs it
// (the issuing thread for CUDA, the lane's worker for host). Executors hold a
// pointer and skip the calls when it is null, so an unused hook costs one
// branch per op.
class ProfilingHook {
public:
    virtual ~ProfilingHook() = default;
    virtual void op_begin(const OpContext& op) = 0;
    virtual void op_end(const OpContext& op) = 0;
};

}  // namespace braid
