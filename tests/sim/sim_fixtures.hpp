// Small builders for simulator tests: kernels by shape, programs by the
// calls an executor would make.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "braid/error.hpp"
#include "braid/model/device_table.hpp"
#include "braid/model/occupancy.hpp"
#include "braid/sim/program.hpp"
#include "error_of.hpp"

namespace braid::sim::test {

using braid::testing::error_of;

inline const DeviceSpec& h200() { return find_device("h200"); }

inline KernelCost kernel_cost(std::string name, std::uint32_t grid, std::uint32_t threads, std::uint32_t regs,
                              double duration_ns, double dram_bytes = 0.0, std::uint32_t dynamic_smem = 0) {
    KernelCost k;
    k.shape.name = std::move(name);
    k.shape.grid = {grid, 1, 1};
    k.shape.block = {threads, 1, 1};
    k.shape.regs_per_thread = regs;
    k.shape.dynamic_smem_bytes = dynamic_smem;
    k.duration_ns = duration_ns;
    k.dram_bytes = dram_bytes;
    return k;
}

// 1024 threads x 64 registers: one block per SM (registers bind).
inline KernelCost one_per_sm(std::string name, std::uint32_t grid, double duration_ns, double dram_bytes = 0.0) {
    return kernel_cost(std::move(name), grid, 1024, 64, duration_ns, dram_bytes);
}

// Blocks that fill an SM `blocks_per_sm` at a time, for grid arithmetic.
inline std::uint64_t slots(const DeviceSpec& dev, const KernelCost& k) {
    return static_cast<std::uint64_t>(occupancy(dev, k.shape).blocks_per_sm) * dev.sm_count;
}

// Every host and dispatch cost zero: device timing alone.
inline Params no_latency() {
    Params p;
    p.launch_latency_ns = 0;
    p.record_latency_ns = 0;
    p.wait_latency_ns = 0;
    p.graph_launch_ns = 0;
    p.graph_node_ns = 0;
    p.dispatch_latency_ns = 0;
    return p;
}

struct ProgramBuilder {
    Program p;

    explicit ProgramBuilder(std::vector<int> priorities) { p.stream_priorities = std::move(priorities); }

    std::uint32_t launch(std::uint32_t stream, KernelCost cost, std::string label = {}, std::uint32_t op = no_op) {
        const auto k = static_cast<std::uint32_t>(p.kernels.size());
        if (label.empty()) label = cost.shape.name;
        p.kernels.push_back(Kernel{std::move(cost), op, std::move(label)});
        p.actions.push_back(Action{ActionKind::launch, stream, k});
        return k;
    }
    void record(std::uint32_t stream, std::uint32_t event) {
        p.event_count = std::max(p.event_count, event + 1);
        p.actions.push_back(Action{ActionKind::record, stream, event});
    }
    void wait(std::uint32_t stream, std::uint32_t event) {
        p.event_count = std::max(p.event_count, event + 1);
        p.actions.push_back(Action{ActionKind::wait, stream, event});
    }
};

}  // namespace braid::sim::test
