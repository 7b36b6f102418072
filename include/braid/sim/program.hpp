// The simulator's input and output. A Program is what the host does in one
// iteration, in issue order: launch a kernel on a stream, record an event on
// a stream, make a stream wait for an event — exactly the CUDA calls an
// executor makes, or the nodes and edges of the graph it would capture.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "braid/model/cost.hpp"
#include "braid/model/kernel.hpp"
#include "braid/sim/launch_mode.hpp"

namespace braid::sim {

inline constexpr std::uint32_t no_op = std::numeric_limits<std::uint32_t>::max();

struct Kernel {
    KernelCost cost;            // shape, isolated duration, DRAM bytes
    std::uint32_t op = no_op;   // the op (graph OpId) it belongs to, for per-op results
    std::string label;          // slice name in traces: usually the op's name
    // Eager: the host's time up to this launch since the previous action, as
    // measured (its share of its op body's host time, times
    // Params::host_time_scale); < 0: Params::op_host_ns and
    // launch_latency_ns apply instead.
    double host_ns = -1.0;
};

enum class ActionKind : std::uint8_t { launch, record, wait };

struct Action {
    ActionKind kind = ActionKind::launch;
    std::uint32_t stream = 0;
    std::uint32_t index = 0;  // launch: kernel index; record/wait: event index
};

// Eager (every action a host API call with its own latency) or graph (the
// actions were captured once; one graph launch issues them all): the same
// vocabulary the backends use.
using LaunchMode = braid::LaunchMode;

struct Program {
    std::vector<Kernel> kernels;
    std::vector<Action> actions;          // host issue order
    std::vector<int> stream_priorities;   // per stream, CUDA convention: lower number = more urgent
    std::uint32_t event_count = 0;
    LaunchMode mode = LaunchMode::eager;

    std::uint32_t stream_count() const noexcept { return static_cast<std::uint32_t>(stream_priorities.size()); }
};

// The most hardware work queues a GPU gives a CUDA context: Hyper-Q's 32, the
// upper end of CUDA_DEVICE_MAX_CONNECTIONS' range (docs/simulator.md).
inline constexpr int max_hardware_queues = 32;

// Every constant of the model, with the source of its default in
// docs/simulator.md. Calibration against a real GPU changes these, not code.
struct Params {
    double launch_latency_ns = 2500.0;        // host cost of one eager cudaLaunchKernel
    double op_host_ns = 0.0;                  // eager: host cost of an op body beyond its launches
    double host_time_scale = 1.0;             // eager: multiplies measured host times (Kernel::host_ns)
    double record_latency_ns = 1000.0;        // host cost of one cudaEventRecord
    double wait_latency_ns = 1000.0;          // host cost of one cudaStreamWaitEvent
    double graph_launch_ns = 2500.0;          // host cost of one cudaGraphLaunch
    double graph_node_ns = 150.0;             // device-side cost per kernel node of a graph
    double dispatch_latency_ns = 1000.0;      // from a kernel becoming runnable to its first blocks starting
    // Eager launches each pass the GPU's front end on their own: the extra
    // dispatch latency they pay over a graph's kernel nodes.
    double eager_dispatch_extra_ns = 0.0;
    double event_latency_ns = 0.0;            // from a record completing to the streams waiting for it seeing it
    int max_resident_kernels = 0;             // 0: the device's max_resident_grids
    // Hardware work queues streams are multiplexed onto (stream s uses queue
    // s mod n); work of different streams sharing a queue runs in issue
    // order. Eager: CUDA_DEVICE_MAX_CONNECTIONS, default 8. Graph: the 32
    // hardware queues of Hyper-Q. 0: one queue per stream.
    int eager_hardware_queues = 8;      // at most max_hardware_queues (below)
    int graph_hardware_queues = 32;
    bool share_bandwidth = true;              // slow memory-bound kernels when DRAM is oversubscribed
    // Co-running kernels slow each other (shared issue slots, L1/L2, DRAM).
    // A block presses 1 / (b x SMs) of the GPU, b the blocks its kernel puts
    // on one SM in its own first wave (min(blocks per SM, ceil(blocks /
    // SMs))), so a kernel alone presses at most 1; while the running blocks
    // press P > 1, each progresses at 1 / (1 + corun_slowdown x (P - 1)).
    // 0: no slowdown (co-resident blocks run at their isolated speed); 1: the
    // GPU's throughput is shared in proportion.
    double corun_slowdown = 0.0;

    friend bool operator==(const Params&, const Params&) = default;
};

struct KernelRecord {
    double issue_ns = 0.0;     // host finished the launch call (eager), or its graph node became available (graph)
    double runnable_ns = 0.0;  // issued, and everything before it on its stream (kernels, waits) done
    double resident_ns = 0.0;  // dispatched and holding one of the device's resident-kernel slots
    double start_ns = 0.0;     // first block started
    double end_ns = 0.0;       // last block finished
    std::uint32_t stream = 0;
    std::uint32_t sms_used = 0;  // distinct SMs that ran at least one of its blocks
};

struct OpRecord {
    std::uint32_t op = no_op;
    double start_ns = 0.0;  // first kernel start
    double end_ns = 0.0;    // last kernel end
    std::uint32_t stream = 0;    // of its first kernel (batch parts of a split op may use several)
    std::uint32_t sms_used = 0;  // most SMs any of its kernels used
};

// SM utilisation as a step function: from time_ns until the next sample,
// `busy_sms` SMs held at least one block and `warp_fraction` of all warp
// slots on the GPU were occupied.
struct UtilisationSample {
    double time_ns = 0.0;
    std::uint32_t busy_sms = 0;
    double warp_fraction = 0.0;
};

struct Result {
    double makespan_ns = 0.0;                 // from the first host action to the last kernel's end
    std::vector<KernelRecord> kernels;        // indexed like Program::kernels
    std::vector<OpRecord> ops;                // one per op that launched kernels, sorted by op
    std::vector<UtilisationSample> utilisation;
    double mean_busy_sm_fraction = 0.0;       // time-weighted over the makespan
    std::uint64_t block_events = 0;           // blocks started plus blocks finished
};

}  // namespace braid::sim
