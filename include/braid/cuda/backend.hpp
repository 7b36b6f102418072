// The CUDA backend: a lane is a CUDA stream from a pool (non-blocking, with
// the plan's priority mapped into the device's range), with its own cuBLAS
// handle and workspace, cuDNN handle and workspace, and scratch allocator.
// Events come from a pool (no timing). Each iteration forks from the caller's
// stream and joins back into it. Two modes:
//   eager  every launch, wait and record is issued every iteration;
//   graph  the iteration is captured from the caller's stream (lanes join
//          the capture through the fork event), instantiated once and
//          replayed with cudaGraphLaunch; captured again when the executor's
//          bodies change (Executor::set_body / invalidate) or a lane's scratch
//          block changed, updating the executable graph in place when
//          cudaGraphExecUpdate allows it.
// Every op body runs on the calling thread inside an NVTX range named after
// the op; after it, cudaGetLastError() tells whether a CUDA call in it failed
// (an error already pending when run() starts is reported as that, not
// blamed on the first op).
// Needs cudart, cuBLAS and cuDNN at link time.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <nvtx3/nvToolsExt.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "braid/cuda/cublas.hpp"
#include "braid/cuda/cudnn.hpp"
#include "braid/cuda/error.hpp"
#include "braid/cuda/resources.hpp"
#include "braid/cuda/scratch.hpp"
#include "braid/exec/backend.hpp"
#include "braid/exec/op_context.hpp"
#include "braid/exec/stream_priorities.hpp"
#include "braid/plan/compiled_plan.hpp"
#include "braid/plan/step_index.hpp"
#include "braid/sim/launch_mode.hpp"

namespace braid {

struct CudaBackendOptions {
    LaunchMode mode = LaunchMode::eager;
    std::size_t cublas_workspace_bytes = std::size_t{32} << 20;  // NVIDIA's recommendation for Hopper
    std::size_t cudnn_workspace_bytes = std::size_t{64} << 20;
    std::size_t scratch_bytes = 0;  // initial scratch block per lane
    bool nvtx = true;               // an NVTX range per op body
    // Debugging: wait for each op's kernels in eager mode, so an asynchronous
    // fault (an illegal address, say) is blamed on the op that caused it
    // rather than on a later one. Serialises the host with the GPU.
    bool synchronize_each_op = false;
    // Op bodies may launch their own kernels programmatically (programmatic
    // dependent launch, compute capability 9.0 and newer): a kernel starts
    // while the kernel before it on the lane finishes, and its blocks wait at
    // their first instruction until that kernel has completed and its writes
    // are visible. The backend only passes the wish on (CudaLane); a body
    // honours it for kernels that wait so, and never for a library's.
    bool programmatic_launch = false;
};

// What a CUDA op body is given: launch on `stream`, use this lane's handles,
// workspaces and scratch; never another lane's.
struct CudaLane {
    std::uint32_t index = 0;
    cudaStream_t stream = nullptr;
    cublasHandle_t cublas = nullptr;  // bound to `stream`, with its own workspace
    cudnnHandle_t cudnn = nullptr;    // bound to `stream`
    void* cudnn_workspace = nullptr;
    std::size_t cudnn_workspace_bytes = 0;
    void* cublas_workspace = nullptr;
    std::size_t cublas_workspace_bytes = 0;
    int priority = 0;            // the CUDA priority the stream has
    bool programmatic_launch = false;  // CudaBackendOptions::programmatic_launch
    cuda::LaneScratch scratch;   // device memory for the running body only
};

class CudaBackend {
public:
    using Lane = CudaLane;

    struct Counters {
        std::uint64_t eager_iterations = 0;
        std::uint64_t captures = 0;         // iterations recorded into a graph
        std::uint64_t instantiations = 0;   // cudaGraphInstantiate calls
        std::uint64_t updates = 0;          // recordings applied by cudaGraphExecUpdate
        std::uint64_t replays = 0;          // iterations that only launched a recorded graph
        std::uint64_t failed_iterations = 0;
        // With CudaBackendOptions::programmatic_launch: the edges of the
        // last captured graph that programmatic launches made
        // (cudaGraphDependencyTypeProgrammatic); 0 says none was launched so.
        std::uint64_t programmatic_edges = 0;
    };

    // Uses the current device. Creates its own caller stream; set_stream()
    // replaces it with the application's.
    explicit CudaBackend(CudaBackendOptions options = {}) : options_(options) {
        cuda::check(cudaGetDevice(&device_), "cudaGetDevice");
        cuda::check(cudaDeviceGetStreamPriorityRange(&least_priority_, &greatest_priority_),
                    "cudaDeviceGetStreamPriorityRange");
        if (options_.programmatic_launch) {
            int major = 0, minor = 0;
            cuda::check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device_),
                        "cudaDeviceGetAttribute");
            cuda::check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device_),
                        "cudaDeviceGetAttribute");
            if (major < 9)
                throw Error("programmatic dependent launch needs a GPU of compute capability 9.0 or newer; device " +
                            std::to_string(device_) + " is " + std::to_string(major) + "." + std::to_string(minor));
        }
        own_stream_ = cuda::create_stream(0);
        caller_ = own_stream_.get();
        fork_ = cuda::create_event();
    }
    CudaBackend(const CudaBackend&) = delete;
    CudaBackend& operator=(const CudaBackend&) = delete;

    ~CudaBackend() {
        // Work still queued may use the lanes' workspaces and scratch.
        cuda::check_noexcept(cudaStreamSynchronize(caller_), "cudaStreamSynchronize");
        for (auto& l : lanes_) cuda::check_noexcept(cudaStreamSynchronize(l->stream.get()), "cudaStreamSynchronize");
    }

    // The caller's stream: an iteration starts after the work already queued
    // on it, and work queued on it later starts after the iteration.
    // Graph mode cannot capture from the legacy default stream (nullptr):
    // begin_iteration refuses it with a message that says so.
    void set_stream(cudaStream_t stream) noexcept { caller_ = stream; }
    cudaStream_t stream() const noexcept { return caller_; }
    void synchronize() const { cuda::check(cudaStreamSynchronize(caller_), "cudaStreamSynchronize"); }

    void set_mode(LaunchMode mode) noexcept { options_.mode = mode; }
    LaunchMode mode() const noexcept { return options_.mode; }
    const CudaBackendOptions& options() const noexcept { return options_; }

    int device() const noexcept { return device_; }
    // cudaDeviceGetStreamPriorityRange: least (e.g. 0) and greatest (e.g. -5).
    int least_priority() const noexcept { return least_priority_; }
    int greatest_priority() const noexcept { return greatest_priority_; }

    std::size_t lane_count() const noexcept { return lanes_.size(); }
    const Counters& counters() const noexcept { return counters_; }

    // At least `bytes` of scratch on every lane, now and for lanes made later.
    void reserve_scratch(std::size_t bytes) {
        options_.scratch_bytes = std::max(options_.scratch_bytes, bytes);
        // A replayed graph runs on the caller's stream and may still use the
        // blocks being replaced.
        synchronize();
        for (auto& l : lanes_) l->lane.scratch.reserve(bytes, l->stream.get());
    }

    // Drops what was recorded for an executor (Executor's destructor calls it).
    void forget(std::uint64_t executor) noexcept {
        graphs_.erase(executor);
        auto it = used_lanes_.find(executor);
        if (it == used_lanes_.end()) return;
        if (used_ == &it->second) used_ = nullptr;
        used_lanes_.erase(it);
    }

    // ---------------------------------------------------- ExecutionBackend
    bool begin_iteration(const CompiledPlan& plan, IterationKey key) {
        // cudaGetLastError after each body must see that body's error only.
        if (const cudaError_t pending = cudaGetLastError(); pending != cudaSuccess)
            throw cuda::CudaError(pending, "cudaGetLastError",
                                  std::string("a CUDA error was pending before the iteration began: ") +
                                      cudaGetErrorName(pending) + " (" + cudaGetErrorString(pending) +
                                      "), left by a CUDA call made outside the op bodies before run()");
        ensure_lanes(plan);
        while (events_.size() < plan.event_count) events_.push_back(cuda::create_event());
        key_ = key;
        failure_.reset();
        issued_ = 0;
        used_ = &used_lanes(plan, key.executor);

        if (options_.mode == LaunchMode::graph) {
            if (caller_ == nullptr)
                throw Error("CUDA graph mode cannot capture from the legacy default stream: give the backend a "
                            "created stream with set_stream(), or leave the one it made");
            auto it = graphs_.find(key.executor);
            if (it != graphs_.end() && it->second.exec && it->second.revision == key.revision &&
                it->second.scratch_epoch == scratch_epoch()) {
                cuda::check(cudaGraphLaunch(it->second.exec.get(), caller_), "cudaGraphLaunch");
                ++counters_.replays;
                return false;
            }
            cuda::check(cudaStreamBeginCapture(caller_, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
            capturing_ = true;
        }
        try {
            cuda::check(cudaEventRecord(fork_.get(), caller_), "cudaEventRecord(fork)");
            for (std::uint32_t l : *used_)
                cuda::check(cudaStreamWaitEvent(lanes_[l]->stream.get(), fork_.get(), 0), "cudaStreamWaitEvent(fork)");
        } catch (...) {
            abort_iteration();
            throw;
        }
        return true;
    }

    CudaLane& lane(std::uint32_t index) { return lanes_[index]->lane; }

    void wait(CudaLane& lane, std::uint32_t event) {
        if (failure_) return;
        const cudaError_t e = cudaStreamWaitEvent(lane.stream, events_[event].get(), 0);
        if (e != cudaSuccess) fail(issued_, e, "cudaStreamWaitEvent");
    }

    void run(CudaLane& lane, const OpContext& ctx, StepRunner<CudaLane> runner) {
        if (failure_) return;
        lane.scratch.begin_body(capturing_);
        if (options_.nvtx) nvtxRangePushA(ctx.info != nullptr ? ctx.info->name.c_str() : "op");
        try {
            runner(lane, ctx);
        } catch (...) {
            failure_ = StepFailure{ctx.step, std::current_exception()};
        }
        if (options_.nvtx) nvtxRangePop();
        if (!failure_ && options_.synchronize_each_op && !capturing_) (void)cudaStreamSynchronize(lane.stream);
        const cudaError_t e = cudaGetLastError();  // also clears it
        if (e != cudaSuccess) {
            if (failure_) failure_->error = with_pending_error(failure_->error, e);
            else failure_ = StepFailure{ctx.step, std::make_exception_ptr(body_error(e))};
        }
        if (!failure_ && capturing_) {
            cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
            const cudaError_t q = cudaStreamIsCapturing(lane.stream, &status);
            const cudaError_t code = q != cudaSuccess ? q : cudaErrorStreamCaptureInvalidated;
            if (q != cudaSuccess || status != cudaStreamCaptureStatusActive)
                failure_ = StepFailure{
                    ctx.step, std::make_exception_ptr(cuda::CudaError(
                                  code, "cudaStreamIsCapturing",
                                  "the body broke the CUDA graph capture of lane " + std::to_string(lane.index) + ": " +
                                      cudaGetErrorName(code) + " (" + cudaGetErrorString(code) +
                                      "; a synchronising call, or work on a stream outside the capture?)"))};
        }
        issued_ = ctx.step + 1;
    }

    void record(CudaLane& lane, std::uint32_t event) {
        if (failure_) return;
        const cudaError_t e = cudaEventRecord(events_[event].get(), lane.stream);
        if (e != cudaSuccess) fail(issued_ - 1, e, "cudaEventRecord");
    }

    std::optional<StepFailure> end_iteration() {
        const cudaError_t joined = join();
        if (capturing_) {
            cudaGraph_t raw = nullptr;
            const cudaError_t ended = cudaStreamEndCapture(caller_, &raw);
            capturing_ = false;
            cuda::Graph graph(raw);
            if (failure_ || joined != cudaSuccess || ended != cudaSuccess || !graph) {
                // The recording is discarded; lanes the capture left behind are remade.
                (void)cudaGetLastError();
                repair_lanes();
                ++counters_.failed_iterations;
                if (failure_) return std::exchange(failure_, std::nullopt);
                cuda::check(joined != cudaSuccess ? joined : ended != cudaSuccess ? ended : cudaErrorStreamCaptureInvalidated,
                            joined != cudaSuccess ? "cudaStreamWaitEvent(join)" : "cudaStreamEndCapture");
            }
            if (options_.programmatic_launch) counters_.programmatic_edges = programmatic_edges(graph.get());
            Recording& rec = graphs_[key_.executor];
            if (rec.exec) {
                cudaGraphExecUpdateResultInfo info{};
                if (cudaGraphExecUpdate(rec.exec.get(), graph.get(), &info) == cudaSuccess) {
                    ++counters_.updates;
                } else {
                    (void)cudaGetLastError();
                    rec.exec.reset();
                }
            }
            if (!rec.exec) {
                cudaGraphExec_t exec = nullptr;
                // Captured kernel nodes carry their stream's priority; the executable
                // graph honours them only with this flag.
                cuda::check(cudaGraphInstantiate(&exec, graph.get(), cudaGraphInstantiateFlagUseNodePriority),
                            "cudaGraphInstantiate");
                rec.exec.reset(exec);
                ++counters_.instantiations;
            }
            rec.revision = key_.revision;
            rec.scratch_epoch = scratch_epoch();
            ++counters_.captures;
            free_retired_scratch();
            cuda::check(cudaGraphLaunch(rec.exec.get(), caller_), "cudaGraphLaunch");
            return std::nullopt;
        }
        free_retired_scratch();
        if (failure_) {
            (void)cudaGetLastError();
            ++counters_.failed_iterations;
            return std::exchange(failure_, std::nullopt);
        }
        cuda::check(joined, "cudaStreamWaitEvent(join)");
        ++counters_.eager_iterations;
        return std::nullopt;
    }

    void abort_iteration() noexcept {
        (void)join();
        if (capturing_) {
            cudaGraph_t raw = nullptr;
            (void)cudaStreamEndCapture(caller_, &raw);
            cuda::Graph discard(raw);
            capturing_ = false;
            repair_lanes();
        }
        free_retired_scratch();
        failure_.reset();
        (void)cudaGetLastError();
        ++counters_.failed_iterations;
    }

private:
    struct LaneResources {
        cuda::Stream stream;
        cuda::CublasHandle cublas;
        cuda::CudnnHandle cudnn;
        cuda::DeviceBuffer cublas_workspace;
        cuda::DeviceBuffer cudnn_workspace;
        cuda::Event join;
        CudaLane lane;
    };

    struct Recording {
        cuda::GraphExec exec;
        std::uint64_t revision = 0;
        std::uint64_t scratch_epoch = 0;
    };

    void ensure_lanes(const CompiledPlan& plan) {
        const std::vector<int> prio =
            map_stream_priorities(plan.stream_priorities, least_priority_, greatest_priority_);
        for (std::uint32_t i = 0; i < plan.stream_count(); ++i) {
            if (i == lanes_.size()) lanes_.push_back(make_lane(i, prio[i]));
            else if (lanes_[i]->lane.priority != prio[i]) rebind(*lanes_[i], prio[i]);
        }
    }

    std::unique_ptr<LaneResources> make_lane(std::uint32_t index, int priority) {
        auto r = std::make_unique<LaneResources>();
        r->cublas = cuda::create_cublas();
        r->cudnn = cuda::create_cudnn();
        r->cublas_workspace = cuda::DeviceBuffer(options_.cublas_workspace_bytes);
        r->cudnn_workspace = cuda::DeviceBuffer(options_.cudnn_workspace_bytes);
        r->join = cuda::create_event();
        r->lane.index = index;
        r->lane.programmatic_launch = options_.programmatic_launch;
        r->lane.scratch.set_lane(index);
        rebind(*r, priority);
        if (options_.scratch_bytes > 0) r->lane.scratch.reserve(options_.scratch_bytes, r->stream.get());
        return r;
    }

    // A fresh stream with `priority`, and the lane's handles bound to it.
    void rebind(LaneResources& r, int priority) {
        if (r.stream) cuda::check(cudaStreamSynchronize(r.stream.get()), "cudaStreamSynchronize");
        r.stream = cuda::create_stream(priority);
        cuda::check(cublasSetStream(r.cublas.get(), r.stream.get()), "cublasSetStream");
        // cublasSetStream resets the workspace to cuBLAS's own pool: set ours after it.
        cuda::check(cublasSetWorkspace(r.cublas.get(), r.cublas_workspace.get(), r.cublas_workspace.bytes()),
                    "cublasSetWorkspace");
        cuda::check(cudnnSetStream(r.cudnn.get(), r.stream.get()), "cudnnSetStream");
        CudaLane& l = r.lane;
        l.stream = r.stream.get();
        l.cublas = r.cublas.get();
        l.cudnn = r.cudnn.get();
        l.cublas_workspace = r.cublas_workspace.get();
        l.cublas_workspace_bytes = r.cublas_workspace.bytes();
        l.cudnn_workspace = r.cudnn_workspace.get();
        l.cudnn_workspace_bytes = r.cudnn_workspace.bytes();
        l.priority = priority;
    }

    // How many of `graph`'s edges are programmatic (a kernel launched
    // programmatically after a kernel on its stream).
    static std::uint64_t programmatic_edges(cudaGraph_t graph) {
        std::size_t count = 0;
        cuda::check(cudaGraphGetEdges(graph, nullptr, nullptr, nullptr, &count), "cudaGraphGetEdges");
        std::vector<cudaGraphNode_t> from(count), to(count);
        std::vector<cudaGraphEdgeData> data(count);
        cuda::check(cudaGraphGetEdges(graph, from.data(), to.data(), data.data(), &count), "cudaGraphGetEdges");
        std::uint64_t programmatic = 0;
        for (std::size_t e = 0; e < count; ++e) programmatic += data[e].type == cudaGraphDependencyTypeProgrammatic;
        return programmatic;
    }

    // Lanes that a failed capture left in capture mode get a fresh stream.
    void repair_lanes() noexcept {
        for (auto& l : lanes_) {
            cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
            const cudaError_t e = cudaStreamIsCapturing(l->stream.get(), &status);
            if (e == cudaSuccess && status == cudaStreamCaptureStatusNone) continue;
            (void)cudaGetLastError();
            try {
                (void)l->stream.release();  // unusable; destroying a capturing stream is not allowed either
                rebind(*l, l->lane.priority);
            } catch (const std::exception& ex) {
                std::fprintf(stderr, "braid: could not remake lane %u after a failed capture: %s\n", l->lane.index,
                             ex.what());
            }
        }
    }

    const std::vector<std::uint32_t>& used_lanes(const CompiledPlan& plan, std::uint64_t executor) {
        auto [it, fresh] = used_lanes_.try_emplace(executor);
        if (fresh || it->second.empty()) {
            std::vector<bool> used(plan.stream_count(), false);
            for (const CompiledStep& s : plan.steps) used[s.stream] = true;
            it->second.clear();
            for (std::uint32_t l = 0; l < used.size(); ++l)
                if (used[l]) it->second.push_back(l);
        }
        return it->second;
    }

    // Every lane that ran work joins back into the caller's stream.
    cudaError_t join() noexcept {
        cudaError_t first = cudaSuccess;
        if (used_ == nullptr) return first;
        for (std::uint32_t l : *used_) {
            LaneResources& r = *lanes_[l];
            cudaError_t e = cudaEventRecord(r.join.get(), r.stream.get());
            if (e == cudaSuccess) e = cudaStreamWaitEvent(caller_, r.join.get(), 0);
            if (e != cudaSuccess && first == cudaSuccess) first = e;
        }
        return first;
    }

    std::uint64_t scratch_epoch() const noexcept {
        std::uint64_t sum = 0;
        for (const auto& l : lanes_) sum += l->lane.scratch.epoch();
        return sum;
    }

    void free_retired_scratch() noexcept {
        for (auto& l : lanes_)
            if (l->lane.scratch.has_retired()) {
                cuda::check_noexcept(cudaStreamSynchronize(l->stream.get()), "cudaStreamSynchronize");
                l->lane.scratch.free_retired();
            }
    }

    // What cudaGetLastError reported after a body. CUDA keeps only the last
    // error: once a failed call has invalidated a capture, later calls
    // overwrite its code with cudaErrorStreamCaptureInvalidated.
    static cuda::CudaError body_error(cudaError_t e) {
        std::string what = std::string("a CUDA call in the body failed: ") + cudaGetErrorName(e) + " (" +
                           cudaGetErrorString(e) + "), reported by cudaGetLastError after the body";
        if (e == cudaErrorStreamCaptureInvalidated)
            what += "; an earlier call of the body invalidated the CUDA graph capture and CUDA no longer says which: "
                    "run the plan in eager mode (LaunchMode::eager) to see that call's error";
        return cuda::CudaError(e, "cudaGetLastError", what);
    }

    // A body threw while a CUDA error was pending: its exception, with the
    // CUDA error's name added when its message lacks it.
    static std::exception_ptr with_pending_error(std::exception_ptr thrown, cudaError_t e) {
        const std::string name = cudaGetErrorName(e);
        try {
            try {
                std::rethrow_exception(thrown);
            } catch (const std::exception& inner) {
                const std::string what = inner.what();
                if (what.find(name) != std::string::npos) return thrown;
                std::throw_with_nested(cuda::CudaError(
                    e, "cudaGetLastError",
                    what + "; cudaGetLastError after the body also reported " + name + " (" + cudaGetErrorString(e) + ")"));
            }
        } catch (...) {
            return std::current_exception();
        }
        return thrown;
    }

    void fail(std::uint32_t step, cudaError_t e, const char* api) {
        failure_ = StepFailure{step, std::make_exception_ptr(cuda::CudaError(
                                         e, api, std::string(api) + " failed: " + cudaGetErrorName(e) + " (" +
                                                     cudaGetErrorString(e) + ")"))};
    }

    CudaBackendOptions options_;
    int device_ = 0;
    int least_priority_ = 0;
    int greatest_priority_ = 0;
    cuda::Stream own_stream_;
    cudaStream_t caller_ = nullptr;
    cuda::Event fork_;
    std::vector<std::unique_ptr<LaneResources>> lanes_;
    std::vector<cuda::Event> events_;
    std::unordered_map<std::uint64_t, std::vector<std::uint32_t>> used_lanes_;
    std::unordered_map<std::uint64_t, Recording> graphs_;
    const std::vector<std::uint32_t>* used_ = nullptr;
    IterationKey key_;
    std::optional<StepFailure> failure_;
    std::uint32_t issued_ = 0;  // steps whose body was issued; a failed wait belongs to the next one
    bool capturing_ = false;
    Counters counters_;
};

}  // namespace braid
