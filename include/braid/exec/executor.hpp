// Executor<Backend>: runs a validated plan, one iteration per run(), on a
// backend (host threads, CUDA streams, the simulator). The executor owns the
// order — per step its waits, its body, its event record, in issue order — and
// the error contract; a backend owns what a lane, a wait and a record are.
#pragma once

#include <atomic>
#include <concepts>
#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "braid/error.hpp"
#include "braid/exec/backend.hpp"
#include "braid/exec/op_context.hpp"
#include "braid/graph/op_graph.hpp"
#include "braid/plan/compiled_plan.hpp"
#include "braid/plan/plan.hpp"

namespace braid {

namespace detail {
inline std::uint64_t next_executor_id() noexcept {
    static std::atomic<std::uint64_t> next{1};
    return next.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace detail

template <class Backend>
class Executor {
    static_assert(ExecutionBackend<Backend>, "Backend does not model braid::ExecutionBackend");

public:
    using Lane = typename Backend::Lane;
    using Body = std::function<void(Lane&, const OpContext&)>;

    // Bodies are indexed by OpId. Validates the plan for the graph (PlanError)
    // and names the first op without a body (Error). The graph and backend
    // must outlive the executor.
    Executor(const OpGraph& graph, const Plan& plan, Backend& backend, std::vector<Body> bodies)
        : graph_(&graph), backend_(&backend), compiled_(compile(plan, graph)), bodies_(std::move(bodies)) {
        if (bodies_.size() != graph.op_count()) {
            std::string msg = "got " + std::to_string(bodies_.size()) + " op bodies for a graph of " +
                              std::to_string(graph.op_count()) + " ops";
            if (bodies_.size() < graph.op_count())
                msg += "; the first op without one is '" + graph.op(static_cast<OpId>(bodies_.size())).name + "'";
            throw Error(msg);
        }
        for (OpId op = 0; op < bodies_.size(); ++op)
            if (!bodies_[op]) throw Error("op '" + graph.op(op).name + "' (id " + std::to_string(op) + ") has no body");
        contexts_.reserve(compiled_.steps.size());
        for (std::uint32_t s = 0; s < compiled_.steps.size(); ++s) {
            const CompiledStep& st = compiled_.steps[s];
            OpContext c;
            c.op = st.op;
            c.info = &graph.op(st.op);
            c.step = s;
            c.lane = st.stream;
            c.part = st.part;
            c.parts = st.parts;
            c.batch_begin = st.batch.begin;
            c.batch_end = st.batch.end;
            contexts_.push_back(c);
        }
    }

    Executor(const Executor&) = delete;
    Executor& operator=(const Executor&) = delete;
    Executor(Executor&& other) noexcept
        : graph_(other.graph_), backend_(other.backend_), compiled_(std::move(other.compiled_)),
          bodies_(std::move(other.bodies_)), contexts_(std::move(other.contexts_)), hook_(other.hook_),
          id_(std::exchange(other.id_, 0)), revision_(other.revision_), iterations_(other.iterations_) {
        for (OpContext& c : contexts_) c.info = &graph_->op(c.op);
    }
    Executor& operator=(Executor&&) = delete;

    ~Executor() {
        // Lets a recording backend drop what it kept for this executor.
        if constexpr (requires(Backend& b, std::uint64_t id) { b.forget(id); })
            if (id_ != 0) backend_->forget(id_);
    }

    // One iteration. Body failures (exceptions, and for CUDA errors the body
    // left behind) end it cleanly and surface as an ExecutionError naming the
    // op, with the original exception nested; the next run() starts afresh.
    void run() {
        active_hook_ = hook_;
        if (!backend_->begin_iteration(compiled_, IterationKey{id_, revision_})) {
            ++iterations_;
            return;  // replayed a recording: no body runs
        }
        const StepRunner<Lane> runner(&Executor::invoke, this);
        const CompiledStep* steps = compiled_.steps.data();
        const std::size_t n = compiled_.steps.size();
        try {
            for (std::size_t s = 0; s < n; ++s) {
                const CompiledStep& st = steps[s];
                Lane& lane = backend_->lane(st.stream);
                for (std::uint32_t e : st.wait_events) backend_->wait(lane, e);
                backend_->run(lane, contexts_[s], runner);
                if (st.record_event != no_event) backend_->record(lane, st.record_event);
            }
        } catch (...) {
            backend_->abort_iteration();
            throw;
        }
        std::optional<StepFailure> failure = backend_->end_iteration();
        ++iterations_;
        if (failure) raise(*failure);
    }

    // Called right before and after every body, on the thread that runs it
    // (also when the body throws). nullptr: none. Not called when a backend
    // replays a recorded iteration, since no body runs then.
    void set_profiling_hook(ProfilingHook* hook) noexcept { hook_ = hook; }

    // Replaces one op's body; a recording backend records the next iteration
    // afresh.
    void set_body(OpId op, Body body) {
        if (op >= bodies_.size()) throw Error("set_body: no op with id " + std::to_string(op));
        if (!body) throw Error("set_body: op '" + graph_->op(op).name + "' needs a body");
        bodies_[op] = std::move(body);
        ++revision_;
    }

    // Says the bodies now do something else (new buffer addresses, say): a
    // recording backend (CUDA graph mode) records the next iteration afresh.
    void invalidate() noexcept { ++revision_; }

    const CompiledPlan& compiled() const noexcept { return compiled_; }
    const OpGraph& graph() const noexcept { return *graph_; }
    Backend& backend() const noexcept { return *backend_; }
    // Per step in issue order: what its body is told.
    const std::vector<OpContext>& contexts() const noexcept { return contexts_; }
    std::uint64_t iterations() const noexcept { return iterations_; }

private:
    static void invoke(const void* self, Lane& lane, const OpContext& ctx) {
        const Executor& ex = *static_cast<const Executor*>(self);
        ProfilingHook* hook = ex.active_hook_;
        if (hook == nullptr) {
            ex.bodies_[ctx.op](lane, ctx);
            return;
        }
        hook->op_begin(ctx);
        try {
            ex.bodies_[ctx.op](lane, ctx);
        } catch (...) {
            hook->op_end(ctx);
            throw;
        }
        hook->op_end(ctx);
    }

    [[noreturn]] void raise(const StepFailure& failure) const {
        const CompiledStep& st = compiled_.steps.at(failure.step);
        const std::string& name = graph_->op(st.op).name;
        std::string where = "step " + std::to_string(failure.step);
        if (st.parts > 1) where += ", part " + std::to_string(st.part + 1) + "/" + std::to_string(st.parts);
        where += ", lane " + std::to_string(st.stream);
        if (!failure.error) throw ExecutionError(name, "failed (" + where + ")");
        try {
            std::rethrow_exception(failure.error);
        } catch (const std::exception& e) {
            std::throw_with_nested(ExecutionError(name, std::string(e.what()) + " (" + where + ")"));
        } catch (...) {
            std::throw_with_nested(ExecutionError(name, "threw an exception that is not a std::exception (" + where + ")"));
        }
    }

    const OpGraph* graph_;
    Backend* backend_;
    CompiledPlan compiled_;
    std::vector<Body> bodies_;
    std::vector<OpContext> contexts_;
    ProfilingHook* hook_ = nullptr;
    ProfilingHook* active_hook_ = nullptr;  // hook_ as of the current run(); what bodies see
    std::uint64_t id_ = detail::next_executor_id();
    std::uint64_t revision_ = 0;
    std::uint64_t iterations_ = 0;
};

}  // namespace braid
