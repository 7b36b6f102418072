// profile_on_cuda: W warm-up and M measured iterations of a graph on a CUDA
// device, traced with CUPTI — or, when CUPTI cannot start (or is not
// wanted), timed with CUDA events into a durations-only profile. How an
// iteration runs is the caller's: `run_iteration(hook)` issues one iteration
// with `hook` installed (nullptr during warm-up), for example
//     [&](ProfilingHook* h) { executor.set_profiling_hook(h); executor.run(); }
// Profile a serial plan, in eager mode (a replayed CUDA graph calls no hook):
// events then time each op alone and kernels run as they would unplanned.
// Opt-in (CUDA runtime and CUPTI headers).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "braid/cuda/error.hpp"
#include "braid/graph/op_graph.hpp"
#include "braid/model/device_spec.hpp"
#include "braid/profiler/aggregation.hpp"
#include "braid/profiler/attribution.hpp"
#include "braid/profiler/cuda/cupti.hpp"
#include "braid/profiler/cuda/events.hpp"
#include "braid/profiler/profile.hpp"

namespace braid::profiler {

struct CudaProfileOptions {
    int device = 0;
    std::uint32_t warmup_iterations = 3;
    std::uint32_t measured_iterations = 10;
    bool use_cupti = true;  // false: CUDA events only (durations-only profile)
    // Called after each iteration: phase is "warm-up" or "measured".
    std::function<void(std::string_view phase, std::uint32_t done, std::uint32_t total)> progress;
    // The stream each op runs on, for the event fallback.
    CudaEventTimer::StreamOf stream_of;
};

struct CudaProfileResult {
    Profile profile;
    std::vector<std::string> warnings;     // for tools to print
    std::optional<CuptiError> cupti_error;  // why the event fallback was used, if it was
    std::string cupti_library;              // the libcupti that traced (CUPTI runs only)
};

// `device` is what the profile records as the GPU it was measured on
// (cuda::device_spec_from_cuda(options.device), usually).
template <class RunIteration>
CudaProfileResult profile_on_cuda(const OpGraph& graph, const DeviceSpec& device, ProfileRun run,
                                  const CudaProfileOptions& options, RunIteration&& run_iteration) {
    if (options.measured_iterations == 0) throw Error("profiling needs at least one measured iteration");
    run.warmup_iterations = options.warmup_iterations;
    run.measured_iterations = options.measured_iterations;
    auto report = [&](std::string_view phase, std::uint32_t done, std::uint32_t total) {
        if (options.progress) options.progress(phase, done, total);
    };

    CudaProfileResult result;
    std::optional<CuptiTracer> tracer;
    if (options.use_cupti) {
        try {
            tracer.emplace(CuptiOptions{options.device});
        } catch (const CuptiError& e) {
            result.cupti_error = e;
            result.warnings.push_back(std::string(e.what()) + "\nfalling back to CUDA events: durations only");
        }
    }

    if (tracer) {
        result.cupti_library = tracer->library();
        result.warnings.insert(result.warnings.end(), tracer->warnings().begin(), tracer->warnings().end());
        // Warm-up runs traced but unhooked: CUPTI's own first-use costs and
        // lazy module loading land there, and its records are dropped.
        for (std::uint32_t i = 0; i < options.warmup_iterations; ++i) {
            run_iteration(static_cast<ProfilingHook*>(nullptr));
            cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
            report("warm-up", i + 1, options.warmup_iterations);
        }
        tracer->discard();
        for (std::uint32_t i = 0; i < options.measured_iterations; ++i) {
            tracer->begin_iteration(i);
            run_iteration(&tracer->hook());
            tracer->end_iteration();
            report("measured", i + 1, options.measured_iterations);
        }
        Trace trace = tracer->take_trace();
        tracer.reset();
        if (trace.markers.empty())
            throw Error("no op body ran under the profiling hook: a CUDA graph replay calls no body; profile "
                        "in eager mode");
        const Attribution attribution = attribute(trace, graph.op_count());
        Aggregate aggregate = profiler::aggregate(trace, attribution, graph);
        result.warnings.insert(result.warnings.end(), aggregate.warnings.begin(), aggregate.warnings.end());
        if (attribution.ignored_other_context > 0)
            result.warnings.push_back(std::to_string(attribution.ignored_other_context) +
                                      " activities of other CUDA contexts were ignored");
        result.profile = make_profile(device, graph, std::move(run), ProfileTiming::cupti, std::move(aggregate),
                                      trace.dropped_records);
        return result;
    }

    if (!options.stream_of)
        throw Error("the CUDA-event fallback needs CudaProfileOptions::stream_of (which stream each op runs on)");
    CudaEventTimer timer(options.stream_of);
    for (std::uint32_t i = 0; i < options.warmup_iterations; ++i) {
        run_iteration(static_cast<ProfilingHook*>(nullptr));
        cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
        report("warm-up", i + 1, options.warmup_iterations);
    }
    for (std::uint32_t i = 0; i < options.measured_iterations; ++i) {
        timer.begin_iteration(i);
        run_iteration(static_cast<ProfilingHook*>(&timer));
        timer.end_iteration();
        report("measured", i + 1, options.measured_iterations);
    }
    Aggregate aggregate = aggregate_durations(timer.timings(), timer.iteration_ns(), graph);
    result.warnings.insert(result.warnings.end(), aggregate.warnings.begin(), aggregate.warnings.end());
    result.profile = make_profile(device, graph, std::move(run), ProfileTiming::cuda_events, std::move(aggregate));
    return result;
}

}  // namespace braid::profiler
