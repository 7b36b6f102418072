// The CUPTI side that needs no GPU: CUPTI's record structs converted field by
// field into braid's records, loading libcupti, and what each CUPTI failure
// is reported as. Built only with CUDA (it needs cupti.h); suite 'cpu'.
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "braid/cuda/error.hpp"
#include "braid/profiler/cuda/cupti.hpp"

using namespace braid;
using namespace braid::profiler;

namespace {

template <class Record>
Trace convert(const Record& r) {
    Trace t;
    profiler::detail::convert_record(reinterpret_cast<const CUpti_Activity*>(&r), t);
    return t;
}

bool contains(const std::string& text, const char* part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("a CUPTI kernel record converts field by field, with the name demangled") {
    CUpti_ActivityKernel10 k;
    std::memset(&k, 0, sizeof k);
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.gridX = 7;
    k.gridY = 3;
    k.gridZ = 2;
    k.blockX = 64;
    k.blockY = 2;
    k.blockZ = 1;
    k.registersPerThread = 40;
    k.staticSharedMemory = 384;
    k.dynamicSharedMemory = 3000;
    k.start = 1000;
    k.end = 1750;
    k.deviceId = 1;
    k.contextId = 9;
    k.streamId = 13;
    k.correlationId = 4242;
    k.name = "_Z12probe_kernelPf";
    const Trace t = convert(k);
    REQUIRE(t.kernels.size() == 1);
    const KernelActivity& a = t.kernels[0];
    CHECK(a.name == "probe_kernel(float*)");
    CHECK(a.grid == Dim3{7, 3, 2});
    CHECK(a.block == Dim3{64, 2, 1});
    CHECK(a.regs_per_thread == 40);
    CHECK(a.static_smem_bytes == 384);
    CHECK(a.dynamic_smem_bytes == 3000);
    CHECK(a.start_ns == 1000);
    CHECK(a.end_ns == 1750);
    CHECK(a.device_id == 1);
    CHECK(a.context_id == 9);
    CHECK(a.stream_id == 13);
    CHECK(a.correlation_id == 4242);
}

TEST_CASE("CUPTI memcpy, memset, external-correlation and API records convert") {
    CUpti_ActivityMemcpy6 m;
    std::memset(&m, 0, sizeof m);
    m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOD;
    m.bytes = 1 << 20;
    m.start = 10;
    m.end = 30;
    m.contextId = 9;
    m.streamId = 2;
    m.correlationId = 77;
    Trace t = convert(m);
    REQUIRE(t.transfers.size() == 1);
    CHECK(t.transfers[0].kind == TransferKind::memcpy_dtod);
    CHECK(t.transfers[0].bytes == (1u << 20));
    CHECK(t.transfers[0].start_ns == 10);
    CHECK(t.transfers[0].end_ns == 30);
    CHECK(t.transfers[0].context_id == 9);
    CHECK(t.transfers[0].correlation_id == 77);
    m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
    CHECK(convert(m).transfers[0].kind == TransferKind::memcpy_htod);
    m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_ATOD;
    CHECK(convert(m).transfers[0].kind == TransferKind::memcpy_other);

    CUpti_ActivityMemset4 s;
    std::memset(&s, 0, sizeof s);
    s.kind = CUPTI_ACTIVITY_KIND_MEMSET;
    s.bytes = 64;
    s.start = 5;
    s.end = 6;
    s.correlationId = 78;
    t = convert(s);
    REQUIRE(t.transfers.size() == 1);
    CHECK(t.transfers[0].kind == TransferKind::memset);
    CHECK(t.transfers[0].bytes == 64);
    CHECK(t.transfers[0].correlation_id == 78);

    CUpti_ActivityExternalCorrelation c;
    std::memset(&c, 0, sizeof c);
    c.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
    c.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2;
    c.externalId = 123456789012ull;
    c.correlationId = 78;
    t = convert(c);
    REQUIRE(t.correlations.size() == 1);
    CHECK(t.correlations[0].external_kind == braid_external_kind);
    CHECK(t.correlations[0].external_id == 123456789012ull);
    CHECK(t.correlations[0].correlation_id == 78);

    CUpti_ActivityAPI api;
    std::memset(&api, 0, sizeof api);
    api.kind = CUPTI_ACTIVITY_KIND_DRIVER;
    api.cbid = 307;
    api.start = 100;
    api.end = 104;
    api.threadId = 5;
    api.correlationId = 79;
    t = convert(api);
    REQUIRE(t.api_calls.size() == 1);
    CHECK(t.api_calls[0].domain == ApiDomain::driver);
    CHECK(t.api_calls[0].callback_id == 307);
    CHECK(t.api_calls[0].end_ns - t.api_calls[0].start_ns == 4);
    CHECK(t.api_calls[0].correlation_id == 79);

    CUpti_Activity other{CUPTI_ACTIVITY_KIND_OVERHEAD};
    t = convert(other);
    CHECK(t.kernels.empty());
    CHECK(t.transfers.empty());
    CHECK(t.api_calls.empty());
}

TEST_CASE("a libcupti that cannot be loaded is a CuptiError that says what to do") {
    ::setenv("BRAID_CUPTI_LIBRARY", "/nonexistent/libcupti.so.13", 1);
    const profiler::detail::CuptiLoad load = profiler::detail::load_cupti();
    ::unsetenv("BRAID_CUPTI_LIBRARY");
    REQUIRE(load.error);
    CHECK(load.error->failure() == CuptiFailure::library_missing);
    const std::string what = load.error->what();
    CHECK(contains(what, "/nonexistent/libcupti.so.13"));
    CHECK(contains(what, "LD_LIBRARY_PATH"));
}

TEST_CASE("the toolkit's libcupti, when found, is the version braid was built for") {
    const profiler::detail::CuptiLoad load = profiler::detail::load_cupti();
    if (load.error) {
        MESSAGE("libcupti not loadable here: " << load.error->what());
        CHECK(load.error->failure() == CuptiFailure::library_missing);
        return;
    }
    MESSAGE("loaded " << load.api.library << ", API version " << load.api.version);
    CHECK(profiler::detail::cupti_major(load.api.version) == profiler::detail::cupti_major(CUPTI_API_VERSION));
    CHECK(static_cast<bool>(load.api.ActivityPushExternalCorrelationId));
}

TEST_CASE("each CUPTI failure says which and what to do") {
    auto failure = [](CUptiResult r) { return profiler::detail::cupti_failure(r, "cuptiActivityEnable"); };
    CHECK(failure(CUPTI_ERROR_INSUFFICIENT_PRIVILEGES).failure() == CuptiFailure::insufficient_privileges);
    CHECK(contains(failure(CUPTI_ERROR_INSUFFICIENT_PRIVILEGES).what(), "NVreg_RestrictProfilingToAdminUsers"));
    CHECK(failure(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED).failure() == CuptiFailure::another_profiler);
    CHECK(contains(failure(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED).what(), "Nsight Systems"));
    CHECK(failure(CUPTI_ERROR_NOT_INITIALIZED).failure() == CuptiFailure::no_driver);
    CHECK(failure(CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED).failure() == CuptiFailure::device_unsupported);
    CHECK(failure(CUPTI_ERROR_INVALID_PARAMETER).failure() == CuptiFailure::other);
    CHECK(contains(failure(CUPTI_ERROR_INVALID_PARAMETER).what(), "cuptiActivityEnable failed"));
    CHECK(profiler::detail::cupti_major(130001) == 13);
    CHECK(profiler::detail::cupti_major(24) == 12);
}

TEST_CASE("without a usable GPU a tracer does not start, and leaves nothing behind") {
    if (cuda::no_device_reason().empty()) {
        MESSAGE("a GPU is present: covered by test-gpu-profiler");
        return;
    }
    for (int attempt = 0; attempt < 2; ++attempt) {
        CAPTURE(attempt);
        try {
            CuptiTracer t;
            FAIL("a tracer started without a GPU");
        } catch (const CuptiError& e) {
            // No libcupti at all, or CUPTI refusing: never "another tracer".
            CHECK(e.failure() != CuptiFailure::another_profiler);
        } catch (const cuda::CudaError& e) {
            CHECK(contains(e.what(), "cudaSetDevice"));
        }
    }
}
