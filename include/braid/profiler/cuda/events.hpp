// CudaEventTimer: the fallback when CUPTI cannot trace. A ProfilingHook that
// records a CUDA event on the op's stream right before and right after its
// body; after each iteration the elapsed time between the two is the op's
// time. It sees no kernels, so profiles made with it are durations-only.
// Between the two records it also times the body on the host.
// Run it on a serial plan: an op's time then covers its own work only (plus
// any idle gap while its launches were being issued). Opt-in (CUDA runtime).
#pragma once

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "braid/cuda/error.hpp"
#include "braid/error.hpp"
#include "braid/exec/op_context.hpp"
#include "braid/profiler/aggregation.hpp"

namespace braid::profiler {

class CudaEventTimer final : public ProfilingHook {
public:
    // Which stream an op runs on (for the CUDA backend: the lane's stream).
    using StreamOf = std::function<cudaStream_t(const OpContext&)>;

    explicit CudaEventTimer(StreamOf stream_of) : stream_of_(std::move(stream_of)) {
        if (!stream_of_) throw Error("CudaEventTimer needs a function that names each op's stream");
    }
    CudaEventTimer(const CudaEventTimer&) = delete;
    CudaEventTimer& operator=(const CudaEventTimer&) = delete;
    ~CudaEventTimer() override {
        for (Pair& p : pool_) {
            cuda::check_noexcept(cudaEventDestroy(p.start), "cudaEventDestroy");
            cuda::check_noexcept(cudaEventDestroy(p.end), "cudaEventDestroy");
        }
    }

    void begin_iteration(std::uint32_t iteration) {
        std::lock_guard lock(mutex_);
        iteration_ = iteration;
        open_.clear();
        used_ = 0;
    }

    void op_begin(const OpContext& op) override {
        std::lock_guard lock(mutex_);
        const cudaStream_t stream = stream_of_(op);
        if (used_ == pool_.size()) {
            Pair p;
            cuda::check(cudaEventCreate(&p.start), "cudaEventCreate");
            if (cudaError_t e = cudaEventCreate(&p.end); e != cudaSuccess) {
                cuda::check_noexcept(cudaEventDestroy(p.start), "cudaEventDestroy");
                cuda::check(e, "cudaEventCreate");
            }
            pool_.push_back(p);
        }
        Pair& p = pool_[used_];
        cuda::check(cudaEventRecord(p.start, stream), "cudaEventRecord (op begin)");
        open_.push_back(Open{op, used_, stream});
        ++used_;
        open_.back().host_start = std::chrono::steady_clock::now();  // the body's host time starts here
    }

    void op_end(const OpContext& op) override {
        const auto host_end = std::chrono::steady_clock::now();
        std::lock_guard lock(mutex_);
        // The latest open record of this step: bodies do not nest.
        for (auto it = open_.rbegin(); it != open_.rend(); ++it)
            if (it->ctx.step == op.step && it->ctx.part == op.part && !it->closed) {
                it->host_ns = std::chrono::duration<double, std::nano>(host_end - it->host_start).count();
                cuda::check(cudaEventRecord(pool_[it->pair].end, it->stream), "cudaEventRecord (op end)");
                it->closed = true;
                return;
            }
        throw Error("CudaEventTimer: op_end for op id " + std::to_string(op.op) + " without op_begin");
    }

    // Waits for the device and turns this iteration's events into timings.
    void end_iteration() {
        cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
        std::lock_guard lock(mutex_);
        float latest_ms = 0.0f;
        for (const Open& o : open_) {
            if (!o.closed) throw Error("CudaEventTimer: op id " + std::to_string(o.ctx.op) + " never ended");
            float ms = 0.0f;
            cuda::check(cudaEventElapsedTime(&ms, pool_[o.pair].start, pool_[o.pair].end), "cudaEventElapsedTime");
            timings_.push_back(OpTiming{iteration_, o.ctx.op, static_cast<double>(ms) * 1e6, o.host_ns});
            float since_first = 0.0f;
            cuda::check(cudaEventElapsedTime(&since_first, pool_[open_.front().pair].start, pool_[o.pair].end),
                        "cudaEventElapsedTime");
            if (since_first > latest_ms) latest_ms = since_first;
        }
        if (!open_.empty()) iteration_ns_.push_back(static_cast<double>(latest_ms) * 1e6);
        open_.clear();
        used_ = 0;
    }

    // Forgets the timings so far (warm-up).
    void discard() {
        std::lock_guard lock(mutex_);
        timings_.clear();
        iteration_ns_.clear();
    }

    const std::vector<OpTiming>& timings() const noexcept { return timings_; }
    // Per iteration: first op's begin to the last op's end.
    const std::vector<double>& iteration_ns() const noexcept { return iteration_ns_; }

private:
    struct Pair {
        cudaEvent_t start = nullptr;
        cudaEvent_t end = nullptr;
    };
    struct Open {
        OpContext ctx;
        std::size_t pair = 0;
        cudaStream_t stream = nullptr;
        bool closed = false;
        std::chrono::steady_clock::time_point host_start{};
        double host_ns = -1.0;
    };

    StreamOf stream_of_;
    std::mutex mutex_;
    std::uint32_t iteration_ = 0;
    std::vector<Pair> pool_;  // reused every iteration
    std::size_t used_ = 0;
    std::vector<Open> open_;
    std::vector<OpTiming> timings_;
    std::vector<double> iteration_ns_;
};

}  // namespace braid::profiler
