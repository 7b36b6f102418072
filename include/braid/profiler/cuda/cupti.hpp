// CuptiTracer: CUPTI activity tracing of a CUDA program, one op at a time.
// Opt-in (needs the CUDA toolkit's headers): include it on purpose.
//
// - Records concurrent kernels, memcpys, memsets, runtime and driver API
//   calls, and external correlations, into braid's plain records
//   (braid/profiler/records.hpp); attribution and aggregation work on those.
// - hook() is a ProfilingHook: op_begin pushes a fresh external id (kind
//   CUSTOM2) and remembers (iteration, op, part) for it, op_end pops it, so
//   every launch inside an op body is linked to that op by CUPTI itself;
//   between the two it times the body on the host (OpMarker::host_ns).
// - end_iteration() waits for the device and flushes CUPTI's buffers, so each
//   profiled iteration's records are complete before the next one starts.
// - libcupti is loaded at run time (dlopen), so programs that include this
//   header link without it, and a machine without it gets a CuptiError that
//   says so instead of a loader error. BRAID_CUPTI_LIBRARY overrides the
//   library path; otherwise libcupti.so.<major> is looked up through
//   LD_LIBRARY_PATH and the toolkit's usual folders.
// CUPTI allows one activity client per process: one CuptiTracer at a time,
// and not together with Nsight Systems/Compute, compute-sanitizer, cuda-gdb
// or PyTorch's profiler.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "braid/cuda/error.hpp"
#include "braid/error.hpp"
#include "braid/exec/op_context.hpp"
#include "braid/profiler/demangle.hpp"
#include "braid/profiler/records.hpp"

#if !defined(CUPTI_API_VERSION) || CUPTI_API_VERSION < 130000
#error "braid/profiler/cuda/cupti.hpp reads the activity records of CUPTI 13 (CUpti_ActivityKernel10, Memcpy6, Memset4): build with the CUDA 13 toolkit"
#endif

namespace braid::profiler {

// Why CUPTI could not trace.
enum class CuptiFailure : std::uint8_t {
    library_missing,          // libcupti could not be loaded
    library_version,          // libcupti of another CUDA major version
    no_driver,                // no CUDA driver or device, or CUPTI could not initialize
    insufficient_privileges,  // the driver restricts profiling to administrators
    another_profiler,         // another CUPTI client holds the activity API
    device_unsupported,       // virtualized, MIG, confidential computing, ...
    other,
};

constexpr const char* to_string(CuptiFailure f) noexcept {
    switch (f) {
        case CuptiFailure::library_missing: return "library_missing";
        case CuptiFailure::library_version: return "library_version";
        case CuptiFailure::no_driver: return "no_driver";
        case CuptiFailure::insufficient_privileges: return "insufficient_privileges";
        case CuptiFailure::another_profiler: return "another_profiler";
        case CuptiFailure::device_unsupported: return "device_unsupported";
        case CuptiFailure::other: return "other";
    }
    return "other";
}

class CuptiError : public Error {
public:
    CuptiError(CuptiFailure failure, const std::string& message) : Error(message), failure_(failure) {}
    CuptiFailure failure() const noexcept { return failure_; }

private:
    CuptiFailure failure_;
};

namespace detail {

// The CUPTI entry points braid uses, resolved from the loaded library.
struct CuptiApi {
    std::string library;   // what was loaded
    std::uint32_t version = 0;
    decltype(&::cuptiGetResultString) GetResultString = nullptr;
    decltype(&::cuptiActivityEnable) ActivityEnable = nullptr;
    decltype(&::cuptiActivityDisable) ActivityDisable = nullptr;
    decltype(&::cuptiActivityRegisterCallbacks) ActivityRegisterCallbacks = nullptr;
    decltype(&::cuptiActivityFlushAll) ActivityFlushAll = nullptr;
    decltype(&::cuptiActivityGetNextRecord) ActivityGetNextRecord = nullptr;
    decltype(&::cuptiActivityGetNumDroppedRecords) ActivityGetNumDroppedRecords = nullptr;
    decltype(&::cuptiActivityPushExternalCorrelationId) ActivityPushExternalCorrelationId = nullptr;
    decltype(&::cuptiActivityPopExternalCorrelationId) ActivityPopExternalCorrelationId = nullptr;
    decltype(&::cuptiGetContextId) GetContextId = nullptr;
};

inline std::uint32_t cupti_major(std::uint32_t api_version) noexcept {
    // From CUDA 13 the API version reads xxyyzz (xx = CUDA major); before it
    // was a small counter (v18..v28 for CUDA 12).
    return api_version >= 100000 ? api_version / 10000 : (api_version >= 18 ? 12 : 11);
}

struct CuptiLoad {
    CuptiApi api;
    std::optional<CuptiError> error;
};

inline CuptiLoad load_cupti() {
    CuptiLoad out;
    const std::string major = std::to_string(cupti_major(CUPTI_API_VERSION));
    std::vector<std::string> candidates;
    if (const char* env = std::getenv("BRAID_CUPTI_LIBRARY"); env && *env) {
        candidates.push_back(env);
    } else {
        candidates = {"libcupti.so." + major, "libcupti.so", "/usr/local/cuda/lib64/libcupti.so." + major,
                      "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so." + major};
    }
    void* handle = nullptr;
    std::string tried;
    for (const std::string& name : candidates) {
        handle = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (handle) {
            out.api.library = name;
            break;
        }
        const char* why = ::dlerror();
        tried += "\n  " + name + ": " + (why ? why : "not found");
    }
    if (!handle) {
        out.error.emplace(CuptiFailure::library_missing,
                          "CUPTI is unavailable: cannot load libcupti (CUDA " + major + ")" + tried +
                              "\nIt ships with the CUDA toolkit (<cuda>/lib64) and in the nvidia-cuda-cupti Python "
                              "package; add its folder to LD_LIBRARY_PATH or set BRAID_CUPTI_LIBRARY to the file");
        return out;
    }
    // The handle is kept for the life of the process: CUPTI must not be
    // unloaded while the driver may still call into it.
    std::string missing;
    auto resolve = [&](auto& fn, const char* symbol) {
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(handle, symbol));
        if (!fn) missing += std::string(missing.empty() ? "" : ", ") + symbol;
    };
    decltype(&::cuptiGetVersion) get_version = nullptr;
    resolve(get_version, "cuptiGetVersion");
    resolve(out.api.GetResultString, "cuptiGetResultString");
    resolve(out.api.ActivityEnable, "cuptiActivityEnable");
    resolve(out.api.ActivityDisable, "cuptiActivityDisable");
    resolve(out.api.ActivityRegisterCallbacks, "cuptiActivityRegisterCallbacks");
    resolve(out.api.ActivityFlushAll, "cuptiActivityFlushAll");
    resolve(out.api.ActivityGetNextRecord, "cuptiActivityGetNextRecord");
    resolve(out.api.ActivityGetNumDroppedRecords, "cuptiActivityGetNumDroppedRecords");
    resolve(out.api.ActivityPushExternalCorrelationId, "cuptiActivityPushExternalCorrelationId");
    resolve(out.api.ActivityPopExternalCorrelationId, "cuptiActivityPopExternalCorrelationId");
    resolve(out.api.GetContextId, "cuptiGetContextId");
    if (!missing.empty()) {
        out.error.emplace(CuptiFailure::library_version,
                          "CUPTI is unavailable: " + out.api.library + " lacks " + missing);
        return out;
    }
    if (get_version(&out.api.version) != CUPTI_SUCCESS || cupti_major(out.api.version) != cupti_major(CUPTI_API_VERSION))
        out.error.emplace(CuptiFailure::library_version,
                          "CUPTI is unavailable: " + out.api.library + " has API version " +
                              std::to_string(out.api.version) + " (CUDA " +
                              std::to_string(cupti_major(out.api.version)) + "), braid was built against " +
                              std::to_string(CUPTI_API_VERSION) + " (CUDA " + major +
                              "); its activity records differ. Point LD_LIBRARY_PATH or BRAID_CUPTI_LIBRARY at the "
                              "libcupti of CUDA " + major);
    return out;
}

// Loads libcupti once per process; throws CuptiError when it cannot.
inline const CuptiApi& cupti_api() {
    static const CuptiLoad loaded = load_cupti();
    if (loaded.error) throw *loaded.error;
    return loaded.api;
}

inline std::string cupti_result_name(CUptiResult r) {
    const char* text = nullptr;
    try {
        const CuptiApi& api = cupti_api();
        if (api.GetResultString(r, &text) == CUPTI_SUCCESS && text) return text;
    } catch (const CuptiError&) {
    }
    return "CUPTI error " + std::to_string(static_cast<int>(r));
}

// A CuptiError for a failed call, classified with what to do about it.
inline CuptiError cupti_failure(CUptiResult r, const char* call) {
    const std::string head = "CUPTI is unavailable: " + std::string(call) + " failed with " + cupti_result_name(r);
    switch (r) {
        case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
        case CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES:
            return CuptiError(CuptiFailure::insufficient_privileges,
                              head + ": the driver allows profiling to administrators only (run as root, or load the "
                                     "nvidia module with NVreg_RestrictProfilingToAdminUsers=0)");
        case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
        case CUPTI_ERROR_MAX_LIMIT_REACHED:
            return CuptiError(CuptiFailure::another_profiler,
                              head + ": another profiler holds CUPTI in this process (Nsight Systems, Nsight "
                                     "Compute, compute-sanitizer, cuda-gdb, PyTorch's profiler or another tracer)");
        case CUPTI_ERROR_NOT_INITIALIZED:
        case CUPTI_ERROR_NOT_COMPATIBLE:
        case CUPTI_ERROR_INVALID_DEVICE:
            return CuptiError(CuptiFailure::no_driver,
                              head + ": no usable CUDA driver or device (or the driver is older than this CUPTI)");
        case CUPTI_ERROR_NOT_SUPPORTED:
        case CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED:
        case CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED:
        case CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED:
        case CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED:
        case CUPTI_ERROR_SLI_DEVICE_NOT_SUPPORTED:
        case CUPTI_ERROR_WSL_DEVICE_NOT_SUPPORTED:
            return CuptiError(CuptiFailure::device_unsupported, head + ": CUPTI does not trace this device");
        default: return CuptiError(CuptiFailure::other, head);
    }
}

inline TransferKind memcpy_kind(std::uint8_t cupti_kind) noexcept {
    switch (cupti_kind) {
        case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return TransferKind::memcpy_htod;
        case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return TransferKind::memcpy_dtoh;
        case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return TransferKind::memcpy_dtod;
        case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return TransferKind::memcpy_htoh;
        case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return TransferKind::memcpy_ptop;
        default: return TransferKind::memcpy_other;
    }
}

inline std::uint32_t dim(std::int32_t v) noexcept { return v > 0 ? static_cast<std::uint32_t>(v) : 0u; }

// CUPTI's record -> braid's record (other kinds are skipped).
inline void convert_record(const CUpti_Activity* record, Trace& out) {
    switch (record->kind) {
        case CUPTI_ACTIVITY_KIND_KERNEL:
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
            const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
            KernelActivity a;
            a.name = demangle(k->name);
            a.grid = {dim(k->gridX), dim(k->gridY), dim(k->gridZ)};
            a.block = {dim(k->blockX), dim(k->blockY), dim(k->blockZ)};
            a.regs_per_thread = k->registersPerThread;
            a.static_smem_bytes = dim(k->staticSharedMemory);
            a.dynamic_smem_bytes = dim(k->dynamicSharedMemory);
            a.start_ns = k->start;
            a.end_ns = k->end;
            a.device_id = k->deviceId;
            a.context_id = k->contextId;
            a.stream_id = k->streamId;
            a.correlation_id = k->correlationId;
            out.kernels.push_back(std::move(a));
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY: {
            const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
            out.transfers.push_back(TransferActivity{memcpy_kind(m->copyKind), m->bytes, m->start, m->end, m->deviceId,
                                                     m->contextId, m->streamId, m->correlationId});
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY2: {
            const auto* m = reinterpret_cast<const CUpti_ActivityMemcpyPtoP4*>(record);
            out.transfers.push_back(TransferActivity{TransferKind::memcpy_ptop, m->bytes, m->start, m->end,
                                                     m->deviceId, m->contextId, m->streamId, m->correlationId});
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMSET: {
            const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
            out.transfers.push_back(TransferActivity{TransferKind::memset, m->bytes, m->start, m->end, m->deviceId,
                                                     m->contextId, m->streamId, m->correlationId});
            break;
        }
        case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
            const auto* c = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
            out.correlations.push_back(
                ExternalCorrelation{static_cast<std::uint32_t>(c->externalKind), c->externalId, c->correlationId});
            break;
        }
        case CUPTI_ACTIVITY_KIND_RUNTIME:
        case CUPTI_ACTIVITY_KIND_DRIVER: {
            const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(record);
            out.api_calls.push_back(ApiActivity{
                record->kind == CUPTI_ACTIVITY_KIND_RUNTIME ? ApiDomain::runtime : ApiDomain::driver,
                static_cast<std::uint32_t>(a->cbid), a->start, a->end, a->threadId, a->correlationId});
            break;
        }
        default: break;
    }
}

// CUPTI's buffer callbacks are process-wide C functions: what they fill
// lives here, and the active tracer takes it after each flush.
struct CuptiCollector {
    std::mutex mutex;
    Trace pending;
    std::string error;  // the first failure inside a callback
    std::size_t buffer_bytes = std::size_t{8} << 20;
    bool tracer_active = false;

    static CuptiCollector& instance() {
        static CuptiCollector c;
        return c;
    }
};

inline void CUPTIAPI cupti_buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
    CuptiCollector& c = CuptiCollector::instance();
    const std::size_t bytes = c.buffer_bytes;  // set before tracing starts, read-only after
    *buffer = static_cast<std::uint8_t*>(std::aligned_alloc(ACTIVITY_RECORD_ALIGNMENT, bytes));
    *size = *buffer ? bytes : 0;  // no memory: CUPTI drops records and counts them
    *max_records = 0;
}

inline void CUPTIAPI cupti_buffer_completed(CUcontext context, std::uint32_t stream_id, std::uint8_t* buffer,
                                            std::size_t /*size*/, std::size_t valid_size) {
    CuptiCollector& c = CuptiCollector::instance();
    Trace batch;
    std::string failure;
    try {
        const CuptiApi& api = cupti_api();
        CUpti_Activity* record = nullptr;
        while (true) {
            const CUptiResult r = api.ActivityGetNextRecord(buffer, valid_size, &record);
            if (r == CUPTI_ERROR_MAX_LIMIT_REACHED) break;  // end of the buffer
            if (r != CUPTI_SUCCESS) {
                failure = "cuptiActivityGetNextRecord failed with " + cupti_result_name(r);
                break;
            }
            convert_record(record, batch);
        }
        std::size_t dropped = 0;
        if (api.ActivityGetNumDroppedRecords(context, stream_id, &dropped) == CUPTI_SUCCESS)
            batch.dropped_records += dropped;
    } catch (const std::exception& e) {
        failure = e.what();
    } catch (...) {
        failure = "unknown exception while reading CUPTI records";
    }
    std::free(buffer);
    std::lock_guard lock(c.mutex);
    if (c.tracer_active) c.pending.append(std::move(batch));
    if (!failure.empty() && c.error.empty()) c.error = failure;
}

// cuCtxGetCurrent through the runtime, so braid never links libcuda.
inline std::optional<std::uint32_t> current_context_id(const CuptiApi& api) {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &fn, 12000, cudaEnableDefault, &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess || fn == nullptr) {
        (void)cudaGetLastError();
        return std::nullopt;
    }
    CUcontext ctx = nullptr;
    if (reinterpret_cast<CUresult (*)(CUcontext*)>(fn)(&ctx) != CUDA_SUCCESS || ctx == nullptr) return std::nullopt;
    std::uint32_t id = 0;
    if (api.GetContextId(ctx, &id) != CUPTI_SUCCESS) return std::nullopt;
    return id;
}

}  // namespace detail

struct CuptiOptions {
    int device = 0;                                   // CUDA device whose context is traced
    std::size_t buffer_bytes = std::size_t{8} << 20;  // per CUPTI activity buffer (CUPTI suggests 1-10 MiB)
};

class CuptiTracer {
public:
    // Starts tracing. Throws CuptiError (with a CuptiFailure saying why) when
    // CUPTI cannot start, and CudaError when the device cannot be set up.
    explicit CuptiTracer(const CuptiOptions& options = {}) : api_(&detail::cupti_api()), hook_(*this) {
        detail::CuptiCollector& c = detail::CuptiCollector::instance();
        {
            std::lock_guard lock(c.mutex);
            if (c.tracer_active)
                throw CuptiError(CuptiFailure::another_profiler,
                                 "CUPTI is unavailable: another braid CuptiTracer is active in this process");
            c.tracer_active = true;
            c.pending = Trace{};
            c.error.clear();
            // aligned_alloc needs a multiple of the alignment; CUPTI wants at least a few records' room.
            const std::size_t min_bytes = std::size_t{1} << 20;
            c.buffer_bytes = (std::max(options.buffer_bytes, min_bytes) + 7) / 8 * 8;
        }
        try {
            cuda::check(cudaSetDevice(options.device), "cudaSetDevice");
            cuda::check(cudaFree(nullptr), "cudaFree(nullptr) (creating the context)");
            context_id_ = detail::current_context_id(*api_);
            call(api_->ActivityRegisterCallbacks(detail::cupti_buffer_requested, detail::cupti_buffer_completed),
                 "cuptiActivityRegisterCallbacks");
            // The kernel kind first: it is where privileges and other
            // subscribers are refused. API records are needed twice: CUPTI
            // emits external correlations for API records only, and their
            // durations are the launch overhead.
            for (CUpti_ActivityKind kind :
                 {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
                  CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER}) {
                call(api_->ActivityEnable(kind), "cuptiActivityEnable");
                enabled_.push_back(kind);
            }
        } catch (...) {
            stop();
            throw;
        }
        trace_.context_id = context_id_;
        if (!context_id_)
            warnings_.push_back("could not read the CUPTI context id of device " + std::to_string(options.device) +
                                "; activities of every context are attributed");
    }

    CuptiTracer(const CuptiTracer&) = delete;
    CuptiTracer& operator=(const CuptiTracer&) = delete;

    // Disables tracing and flushes; never throws.
    ~CuptiTracer() { stop(); }

    // Give it to Executor::set_profiling_hook for the iterations to profile.
    ProfilingHook& hook() noexcept { return hook_; }

    // Ops that start from now on are recorded as part of `iteration`.
    void begin_iteration(std::uint32_t iteration) noexcept {
        std::lock_guard lock(mutex_);
        iteration_ = iteration;
    }

    // Waits for the device, flushes CUPTI's buffers and adds everything
    // recorded since the last call to trace().
    void end_iteration() {
        collect();
        std::lock_guard lock(mutex_);
        trace_.markers.insert(trace_.markers.end(), markers_.begin(), markers_.end());
        markers_.clear();
        open_.clear();
    }

    // Waits, flushes and forgets everything recorded so far (warm-up).
    void discard() {
        collect();
        std::lock_guard lock(mutex_);
        trace_ = Trace{};
        trace_.context_id = context_id_;
        markers_.clear();
        open_.clear();
    }

    const Trace& trace() const noexcept { return trace_; }
    Trace take_trace() {
        Trace t = std::move(trace_);
        trace_ = Trace{};
        trace_.context_id = context_id_;
        return t;
    }

    std::optional<std::uint32_t> context_id() const noexcept { return context_id_; }
    const std::string& library() const noexcept { return api_->library; }
    std::uint32_t library_version() const noexcept { return api_->version; }
    const std::vector<std::string>& warnings() const noexcept { return warnings_; }

private:
    class Hook final : public ProfilingHook {
    public:
        explicit Hook(CuptiTracer& tracer) : tracer_(tracer) {}
        // The body's host time runs from the end of op_begin to the start
        // of op_end, so the hook's own calls stay out of it.
        void op_begin(const OpContext& op) override {
            std::uint64_t id = 0;
            std::size_t marker = 0;
            {
                std::lock_guard lock(tracer_.mutex_);
                id = ++tracer_.next_external_id_;
                marker = tracer_.markers_.size();
                tracer_.markers_.push_back(OpMarker{id, tracer_.iteration_, op.op, op.part});
            }
            tracer_.call(tracer_.api_->ActivityPushExternalCorrelationId(
                             static_cast<CUpti_ExternalCorrelationKind>(braid_external_kind), id),
                         "cuptiActivityPushExternalCorrelationId");
            std::lock_guard lock(tracer_.mutex_);
            tracer_.open_[{op.step, op.part}] = {marker, std::chrono::steady_clock::now()};
        }
        void op_end(const OpContext& op) override {
            const auto now = std::chrono::steady_clock::now();
            {
                std::lock_guard lock(tracer_.mutex_);
                if (auto it = tracer_.open_.find({op.step, op.part}); it != tracer_.open_.end()) {
                    tracer_.markers_[it->second.first].host_ns =
                        std::chrono::duration<double, std::nano>(now - it->second.second).count();
                    tracer_.open_.erase(it);
                }
            }
            tracer_.call(tracer_.api_->ActivityPopExternalCorrelationId(
                             static_cast<CUpti_ExternalCorrelationKind>(braid_external_kind), nullptr),
                         "cuptiActivityPopExternalCorrelationId");
        }

    private:
        CuptiTracer& tracer_;
    };

    void call(CUptiResult r, const char* what) const {
        if (r != CUPTI_SUCCESS) throw detail::cupti_failure(r, what);
    }

    void collect() {
        cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
        call(api_->ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
        detail::CuptiCollector& c = detail::CuptiCollector::instance();
        Trace batch;
        {
            std::lock_guard lock(c.mutex);
            batch = std::move(c.pending);
            c.pending = Trace{};
            if (!c.error.empty()) {
                std::string e = std::move(c.error);
                c.error.clear();
                throw CuptiError(CuptiFailure::other, "reading CUPTI's records failed: " + e);
            }
        }
        std::lock_guard lock(mutex_);
        trace_.context_id = context_id_;
        trace_.append(std::move(batch));
    }

    void stop() noexcept {
        if (!enabled_.empty()) {
            (void)cudaDeviceSynchronize();
            (void)cudaGetLastError();
            (void)api_->ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
            for (CUpti_ActivityKind kind : enabled_) (void)api_->ActivityDisable(kind);
            enabled_.clear();
        }
        detail::CuptiCollector& c = detail::CuptiCollector::instance();
        std::lock_guard lock(c.mutex);
        c.tracer_active = false;
        c.pending = Trace{};
        c.error.clear();
    }

    const detail::CuptiApi* api_;
    Hook hook_;
    std::optional<std::uint32_t> context_id_;
    std::vector<CUpti_ActivityKind> enabled_;
    std::vector<std::string> warnings_;

    std::mutex mutex_;  // markers and iteration: the hook may be called from several threads
    std::uint32_t iteration_ = 0;
    std::uint64_t next_external_id_ = 0;
    std::vector<OpMarker> markers_;
    // Bodies running now, by (step, part): their marker and when they started.
    std::map<std::pair<std::uint32_t, std::uint32_t>,
             std::pair<std::size_t, std::chrono::steady_clock::time_point>>
        open_;
    Trace trace_;
};

}  // namespace braid::profiler
