// The backend concept: what Executor needs from a backend (host threads, CUDA
// streams, the simulator), and the small types that pass between them.
#pragma once

#include <concepts>
#include <cstdint>
#include <exception>
#include <optional>

#include "braid/exec/op_context.hpp"
#include "braid/plan/compiled_plan.hpp"

namespace braid {

// Names what an iteration issues, so a backend that records iterations (CUDA
// graphs) can tell a recording that is still good from a stale one.
struct IterationKey {
    std::uint64_t executor = 0;  // unique per Executor, never reused in a process
    std::uint64_t revision = 0;  // bumped when the executor's bodies change
};

// The earliest failed step of an iteration (by issue order) as a backend
// reports it; the executor turns it into an ExecutionError naming the op.
struct StepFailure {
    std::uint32_t step = 0;
    std::exception_ptr error;
};

// How a backend runs a step: calls the profiling hook and the op's body.
// A function pointer and the executor's address; cheap to copy into queues.
template <class Lane>
class StepRunner {
public:
    using Fn = void (*)(const void* self, Lane& lane, const OpContext& ctx);

    constexpr StepRunner() noexcept = default;
    constexpr StepRunner(Fn fn, const void* self) noexcept : fn_(fn), self_(self) {}

    void operator()(Lane& lane, const OpContext& ctx) const { fn_(self_, lane, ctx); }
    explicit operator bool() const noexcept { return fn_ != nullptr; }

private:
    Fn fn_ = nullptr;
    const void* self_ = nullptr;
};

// What Executor needs from a backend. One iteration is
//   begin_iteration(plan, key)      -> false: the backend replayed a recording
//                                       of this key, nothing is issued
//   per step in issue order: wait(lane, e)..., run(lane, ctx, runner),
//                             record(lane, e) when a later step waits on it
//   end_iteration()                 joins every lane back into the caller and
//                                     returns the first failed step, if any
// A failure inside a step never throws out of wait/run/record: the backend
// keeps it, skips later bodies, keeps the iteration's events flowing so no
// lane waits forever, and reports it from end_iteration. abort_iteration()
// ends an iteration the executor could not finish issuing (it releases every
// wait and joins); it never throws.
template <class B>
concept ExecutionBackend =
    requires(B& b, typename B::Lane& lane, const CompiledPlan& plan, IterationKey key, std::uint32_t index,
             const OpContext& ctx, StepRunner<typename B::Lane> runner) {
        { b.begin_iteration(plan, key) } -> std::same_as<bool>;
        { b.lane(index) } -> std::same_as<typename B::Lane&>;
        b.wait(lane, index);
        b.run(lane, ctx, runner);
        b.record(lane, index);
        { b.end_iteration() } -> std::same_as<std::optional<StepFailure>>;
        { b.abort_iteration() } noexcept;
    };

}  // namespace braid
