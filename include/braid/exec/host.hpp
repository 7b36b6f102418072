// The host backend: a lane is a worker thread with a FIFO of work items; an
// event is a latch counted by iteration (a wait in iteration k returns once
// the record of iteration k has run). Waits block the lane's worker, never
// the issuing thread. Runs the sample trainer on a CPU and lets
// ThreadSanitizer prove a plan race-free.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "braid/exec/backend.hpp"
#include "braid/exec/op_context.hpp"
#include "braid/plan/compiled_plan.hpp"
#include "braid/plan/step_index.hpp"

namespace braid {

// What a host body is given: which lane (worker) it runs on.
struct HostLane {
    std::uint32_t index = 0;
};

class HostBackend {
public:
    using Lane = HostLane;

    HostBackend() = default;
    HostBackend(const HostBackend&) = delete;
    HostBackend& operator=(const HostBackend&) = delete;

    ~HostBackend() {
        for (auto& w : workers_) {
            {
                std::lock_guard lock(w->mutex);
                w->stop = true;
            }
            w->wake.notify_one();
        }
        for (auto& w : workers_)
            if (w->thread.joinable()) w->thread.join();
    }

    // Worker threads started so far (they are kept between iterations).
    std::size_t lane_count() const noexcept { return workers_.size(); }
    // The worker thread of a lane, for tests and profilers.
    std::thread::id lane_thread(std::uint32_t lane) const { return workers_.at(lane)->thread.get_id(); }

    // ---------------------------------------------------- ExecutionBackend
    bool begin_iteration(const CompiledPlan& plan, IterationKey /*key*/) {
        while (workers_.size() < plan.stream_count()) start_worker();
        while (events_.size() < plan.event_count) events_.push_back(std::make_unique<Event>());
        ++iteration_;
        skip_from_.store(no_step, std::memory_order_relaxed);
        return true;
    }

    HostLane& lane(std::uint32_t index) { return workers_[index]->lane; }

    void wait(HostLane& lane, std::uint32_t event) {
        push(lane, Item{Item::wait_event, no_step, events_[event].get(), iteration_, nullptr, {}});
    }

    void run(HostLane& lane, const OpContext& ctx, StepRunner<HostLane> runner) {
        push(lane, Item{Item::run_body, ctx.step, nullptr, iteration_, &ctx, runner});
    }

    void record(HostLane& lane, std::uint32_t event) {
        push(lane, Item{Item::record_event, no_step, events_[event].get(), iteration_, nullptr, {}});
    }

    // Waits until every lane has worked through its queue, then reports the
    // failure with the lowest step index.
    std::optional<StepFailure> end_iteration() {
        join();
        std::optional<StepFailure> first;
        for (auto& w : workers_) {
            if (w->failure && (!first || w->failure->step < first->step)) first = std::move(w->failure);
            w->failure.reset();
        }
        return first;
    }

    void abort_iteration() noexcept {
        skip_from_.store(0, std::memory_order_relaxed);  // skip every body not yet started
        for (auto& e : events_) {
            {
                std::lock_guard lock(e->mutex);
                if (e->generation < iteration_) e->generation = iteration_;
            }
            e->fired.notify_all();
        }
        join();
        for (auto& w : workers_) w->failure.reset();
    }

private:
    struct Event {
        std::mutex mutex;
        std::condition_variable fired;
        std::uint64_t generation = 0;  // the last iteration that recorded it
    };

    struct Item {
        enum Kind : std::uint8_t { wait_event, run_body, record_event };
        Kind kind = run_body;
        std::uint32_t step = no_step;
        Event* event = nullptr;
        std::uint64_t iteration = 0;
        const OpContext* ctx = nullptr;
        StepRunner<HostLane> runner;
    };

    struct Worker {
        HostLane lane;
        std::mutex mutex;
        std::condition_variable wake;
        std::deque<Item> queue;
        bool sleeping = false;
        bool stop = false;
        std::optional<StepFailure> failure;  // this lane's first, read after join()
        std::thread thread;
    };

    void start_worker() {
        auto w = std::make_unique<Worker>();
        w->lane.index = static_cast<std::uint32_t>(workers_.size());
        Worker* raw = w.get();
        // Start the thread first: a worker without one would hang join().
        raw->thread = std::thread([this, raw] { work(*raw); });
        workers_.push_back(std::move(w));
    }

    void push(HostLane& lane, Item item) {
        Worker& w = *workers_[lane.index];
        bool wake = false;
        {
            std::lock_guard lock(w.mutex);
            w.queue.push_back(item);
            // Counted under the lock, so the worker cannot finish the item first.
            outstanding_.fetch_add(1, std::memory_order_relaxed);
            wake = w.sleeping;
        }
        if (wake) w.wake.notify_one();
    }

    void work(Worker& w) {
        for (;;) {
            Item item;
            {
                std::unique_lock lock(w.mutex);
                while (w.queue.empty() && !w.stop) {
                    w.sleeping = true;
                    w.wake.wait(lock);
                    w.sleeping = false;
                }
                if (w.queue.empty()) return;  // stopping, nothing left
                item = w.queue.front();
                w.queue.pop_front();
            }
            execute(w, item);
            if (outstanding_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
                // Lock so the issuing thread cannot miss the wake-up between
                // its check and its wait.
                { std::lock_guard lock(done_mutex_); }
                done_.notify_all();
            }
        }
    }

    void execute(Worker& w, const Item& item) {
        switch (item.kind) {
            case Item::wait_event: {
                std::unique_lock lock(item.event->mutex);
                item.event->fired.wait(lock, [&] { return item.event->generation >= item.iteration; });
                return;
            }
            case Item::record_event: {
                {
                    std::lock_guard lock(item.event->mutex);
                    if (item.event->generation < item.iteration) item.event->generation = item.iteration;
                }
                item.event->fired.notify_all();
                return;
            }
            case Item::run_body: {
                // Skip bodies issued after a failed one; earlier ones still run
                // so the failure reported is the first by issue order.
                if (item.step >= skip_from_.load(std::memory_order_relaxed)) return;
                try {
                    item.runner(w.lane, *item.ctx);
                } catch (...) {
                    if (!w.failure || item.step < w.failure->step)
                        w.failure = StepFailure{item.step, std::current_exception()};
                    std::uint32_t seen = skip_from_.load(std::memory_order_relaxed);
                    while (item.step + 1 < seen &&
                           !skip_from_.compare_exchange_weak(seen, item.step + 1, std::memory_order_relaxed)) {
                    }
                }
                return;
            }
        }
    }

    void join() noexcept {
        std::unique_lock lock(done_mutex_);
        done_.wait(lock, [&] { return outstanding_.load(std::memory_order_acquire) == 0; });
    }

    std::vector<std::unique_ptr<Worker>> workers_;
    std::vector<std::unique_ptr<Event>> events_;
    std::uint64_t iteration_ = 0;
    std::atomic<std::uint32_t> skip_from_{no_step};  // bodies of steps >= this are skipped
    std::atomic<std::size_t> outstanding_{0};
    std::mutex done_mutex_;
    std::condition_variable done_;
};

}  // namespace braid
