// braid's own activity records: what the CUPTI tracer keeps of CUPTI's
// records, in plain structs with no CUDA types, so attribution and
// aggregation can be tested by replaying hand-made records on any machine.
// Times are CUPTI timestamps in nanoseconds.
#pragma once

#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "braid/graph/op.hpp"
#include "braid/model/kernel.hpp"
#include "braid/profiler/profile.hpp"

namespace braid::profiler {

struct KernelActivity {
    std::string name;  // demangled
    Dim3 grid;
    Dim3 block;
    std::uint32_t regs_per_thread = 0;
    std::uint32_t static_smem_bytes = 0;
    std::uint32_t dynamic_smem_bytes = 0;
    std::uint64_t start_ns = 0;
    std::uint64_t end_ns = 0;
    std::uint32_t device_id = 0;
    std::uint32_t context_id = 0;
    std::uint32_t stream_id = 0;
    std::uint32_t correlation_id = 0;  // of the runtime/driver call that launched it
};

// A memcpy or a memset.
struct TransferActivity {
    TransferKind kind = TransferKind::memcpy_other;
    std::uint64_t bytes = 0;
    std::uint64_t start_ns = 0;
    std::uint64_t end_ns = 0;
    std::uint32_t device_id = 0;
    std::uint32_t context_id = 0;
    std::uint32_t stream_id = 0;
    std::uint32_t correlation_id = 0;
};

// CUPTI's link from a runtime/driver call (correlation_id) to the external
// id pushed on the calling thread when the call was made.
struct ExternalCorrelation {
    std::uint32_t external_kind = 0;  // CUpti_ExternalCorrelationKind
    std::uint64_t external_id = 0;
    std::uint32_t correlation_id = 0;
};

enum class ApiDomain : std::uint8_t { runtime, driver };

// A CUDA runtime or driver call on the host.
struct ApiActivity {
    ApiDomain domain = ApiDomain::runtime;
    std::uint32_t callback_id = 0;  // CUPTI's cbid
    std::uint64_t start_ns = 0;
    std::uint64_t end_ns = 0;
    std::uint32_t thread_id = 0;
    std::uint32_t correlation_id = 0;
};

// What the profiling hook pushed: external id -> the op (and batch part) in
// the iteration it ran, and how long the body took on the host (from the
// end of op_begin to the start of op_end: the body's own calls, its
// launches included, not the hook's); < 0 when not measured.
struct OpMarker {
    std::uint64_t external_id = 0;
    std::uint32_t iteration = 0;
    OpId op = 0;
    std::uint32_t part = 0;
    double host_ns = -1.0;
};

// The external-correlation kind braid pushes its op markers under. Kineto
// (PyTorch's profiler) uses CUSTOM0 and CUSTOM1; braid takes CUSTOM2
// (CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2 = 5 in cupti_activity.h).
inline constexpr std::uint32_t braid_external_kind = 5;

// Everything one tracing session produced.
struct Trace {
    std::vector<KernelActivity> kernels;
    std::vector<TransferActivity> transfers;
    std::vector<ExternalCorrelation> correlations;
    std::vector<ApiActivity> api_calls;
    std::vector<OpMarker> markers;
    std::uint32_t external_kind = braid_external_kind;  // which correlations are braid's
    // Only activities of this CUPTI context count; others are ignored (and
    // counted). Unset: every context counts.
    std::optional<std::uint32_t> context_id;
    std::uint64_t dropped_records = 0;

    void append(Trace&& more) {
        auto move_all = [](auto& into, auto& from) {
            into.insert(into.end(), std::make_move_iterator(from.begin()), std::make_move_iterator(from.end()));
        };
        move_all(kernels, more.kernels);
        move_all(transfers, more.transfers);
        move_all(correlations, more.correlations);
        move_all(api_calls, more.api_calls);
        move_all(markers, more.markers);
        dropped_records += more.dropped_records;
    }
};

}  // namespace braid::profiler
