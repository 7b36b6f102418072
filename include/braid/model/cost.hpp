// What an op costs on a device: the kernels it launches, each with its launch
// shape, its time when it runs alone on the GPU, and the DRAM bytes it moves.
// Profiles (measured) and estimates (roofline) both produce OpCosts; the
// simulator, the planner and the lower bound consume them. What a batch part
// of an op costs is in batch_split.hpp.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "braid/error.hpp"
#include "braid/model/device_spec.hpp"
#include "braid/model/kernel.hpp"
#include "braid/model/occupancy.hpp"

namespace braid {

struct KernelCost {
    KernelShape shape;
    double duration_ns = 0.0;  // alone on the GPU
    double dram_bytes = 0.0;   // 0: not memory-bound, never slowed by bandwidth sharing
};

struct OpCost {
    std::vector<KernelCost> kernels;  // in launch order, all on the op's stream
    // 0: batched kernels (each covers the whole batch). n > 0: the op loops
    // over images Caffe-style, launching n kernels per image, image by image,
    // so kernels.size() == batch * n.
    std::uint32_t launches_per_image = 0;
    // Eager: how long one call of the op's body keeps the host (its launches
    // and library calls included), as measured; < 0: unknown, and the
    // simulator's per-launch constants stand in.
    double host_ns = -1.0;

    double duration_ns() const noexcept {
        double t = 0.0;
        for (const KernelCost& k : kernels) t += k.duration_ns;
        return t;
    }
    // What each launch of a body call costs the host, when measured: the
    // body's time shared by its launches (a batch part makes the same calls
    // as the whole body, each at that cost); < 0: unknown.
    double host_share_ns() const noexcept {
        return host_ns >= 0.0 && !kernels.empty() ? host_ns / static_cast<double>(kernels.size()) : -1.0;
    }
};

// Per op, indexed by OpId.
using OpCosts = std::vector<OpCost>;

// Every consumer of costs needs one per op; `who` names the caller in the error.
template <class E = ModelError>
void require_costs_for(std::size_t op_count, std::size_t cost_count, const std::string& who) {
    if (cost_count != op_count)
        throw E(who + ": got costs for " + std::to_string(cost_count) + " ops, the graph has " + std::to_string(op_count));
}

inline std::vector<double> op_durations_ns(std::span<const OpCost> costs) {
    std::vector<double> out;
    out.reserve(costs.size());
    for (const OpCost& c : costs) out.push_back(c.duration_ns());
    return out;
}

// Checks what the simulator and planner rely on; the error names the op and
// kernel: positive durations, non-empty grids and blocks, blocks that fit.
inline void validate_costs(const DeviceSpec& dev, std::span<const OpCost> costs, std::span<const std::string> op_names) {
    for (std::size_t i = 0; i < costs.size(); ++i) {
        const std::string op = i < op_names.size() ? op_names[i] : "#" + std::to_string(i);
        for (std::size_t j = 0; j < costs[i].kernels.size(); ++j) {
            const KernelCost& k = costs[i].kernels[j];
            const std::string who = "op '" + op + "' kernel " + std::to_string(j) + " ('" + k.shape.name + "')";
            if (!(k.duration_ns > 0.0) || !std::isfinite(k.duration_ns))
                throw ModelError(who + ": duration must be > 0 ns, got " + std::to_string(k.duration_ns));
            if (k.dram_bytes < 0.0 || !std::isfinite(k.dram_bytes))
                throw ModelError(who + ": dram_bytes must be >= 0");
            if (std::string problem = launch_problem(k.shape); !problem.empty()) throw ModelError(who + ": " + problem);
            (void)occupancy(dev, k.shape);  // throws naming the resource when a block cannot fit
        }
    }
}

}  // namespace braid
