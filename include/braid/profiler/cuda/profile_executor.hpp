// profile_executor: the profile of a trainer's own step, from the
// Executor<CudaBackend> that runs it. W warm-up and M measured iterations of
// the executor's plan, each a normal run() with the profiling hook around
// every body, traced with CUPTI (CUDA events when CUPTI cannot start);
// profile_on_cuda does the rest.
//
//   braid::CudaBackend backend;
//   braid::Executor<braid::CudaBackend> executor(graph, braid::strategy::serial(graph), backend, bodies);
//   braid::ProfileRun run;
//   run.network = "my-net";
//   const auto r = braid::profiler::profile_executor(executor, braid::cuda::device_spec_from_cuda(), run);
//   braid::save_profile(r.profile, "profile.json");  // braid-plan --profile profile.json
//
// The iterations are real: they train the model the bodies update. The
// backend runs them eagerly (a replayed CUDA graph calls no body) and gets
// its launch mode back afterwards; the executor's hook is cleared. Profile a
// serial plan: kernels then run as they would unplanned, and the event
// fallback times each op alone. Opt-in (CUDA runtime and CUPTI headers).
#pragma once

#include <utility>

#include "braid/cuda/backend.hpp"
#include "braid/exec/executor.hpp"
#include "braid/profiler/cuda/profile_on_cuda.hpp"

namespace braid::profiler {

inline CudaProfileResult profile_executor(Executor<CudaBackend>& executor, const DeviceSpec& device, ProfileRun run,
                                          CudaProfileOptions options = {}) {
    CudaBackend& backend = executor.backend();
    // The tracer must watch the GPU the lanes run on, whatever the options say.
    options.device = backend.device();
    if (!options.stream_of)
        options.stream_of = [&backend](const OpContext& ctx) { return backend.lane(ctx.lane).stream; };

    // Eager for the run, the caller's mode and no hook afterwards, also when it throws.
    struct Restore {
        Executor<CudaBackend>& executor;
        LaunchMode mode;
        ~Restore() {
            executor.set_profiling_hook(nullptr);
            executor.backend().set_mode(mode);
        }
    } restore{executor, backend.mode()};
    backend.set_mode(LaunchMode::eager);
    return profile_on_cuda(executor.graph(), device, std::move(run), options, [&](ProfilingHook* hook) {
        executor.set_profiling_hook(hook);
        executor.run();
    });
}

}  // namespace braid::profiler
