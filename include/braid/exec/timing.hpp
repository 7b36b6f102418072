// ExecutorTiming: a TimingSource that runs each candidate plan on an
// Executor of any backend with the caller's op bodies, and times one run()
// on a steady clock. On the host backend run() returns when the iteration
// is done; a backend that only queues work (CUDA) is given a `finish` that
// waits for it (say, CudaBackend::synchronize). In CUDA graph mode the
// first (warm-up) run of each candidate captures its graph, so the timed
// runs are replays.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "braid/error.hpp"
#include "braid/exec/executor.hpp"
#include "braid/graph/op_graph.hpp"
#include "braid/planner/tune.hpp"

namespace braid {

template <class Backend>
class ExecutorTiming : public TimingSource {
public:
    using Body = typename Executor<Backend>::Body;

    // The graph and backend must outlive it; every candidate's executor gets
    // a copy of `bodies`.
    ExecutorTiming(const OpGraph& graph, Backend& backend, std::vector<Body> bodies, std::function<void()> finish = {})
        : graph_(graph), backend_(backend), bodies_(std::move(bodies)), finish_(std::move(finish)) {}

    std::vector<std::string> prepare(std::span<const TuneCandidate> candidates) override {
        executors_.clear();
        for (const TuneCandidate& c : candidates)
            executors_.push_back(std::make_unique<Executor<Backend>>(graph_, c.plan, backend_, bodies_));
        return {};
    }

    double measure_ns(std::size_t candidate) override {
        if (candidate >= executors_.size())
            throw Error("ExecutorTiming: no candidate " + std::to_string(candidate) + " (prepared " +
                        std::to_string(executors_.size()) + ")");
        const double t0 = now_ns();
        executors_[candidate]->run();
        if (finish_) finish_();
        return now_ns() - t0;
    }

    double now_ns() override {
        return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now().time_since_epoch()).count();
    }

    // The executor of candidate i, as prepared (its iterations(), say).
    const Executor<Backend>& executor(std::size_t i) const { return *executors_.at(i); }

private:
    const OpGraph& graph_;
    Backend& backend_;
    std::vector<Body> bodies_;
    std::function<void()> finish_;
    std::vector<std::unique_ptr<Executor<Backend>>> executors_;
};

}  // namespace braid
