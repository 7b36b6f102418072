// Host copies of a model's weights (every parameter and state buffer:
// weights, momentum, running statistics, step), so that models of any
// backend can be compared: bit for bit (schedules must not change a bit) or
// within a tolerance (a GPU against the CPU reference).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "train/host_model.hpp"
#include "train/training_graph.hpp"

namespace braid::samples {

// Whether compare_weights looks at the buffer: parameters and state.
bool is_weight(const BufferInfo& info) noexcept;

struct WeightSnapshot {
    const TrainingGraph* graph = nullptr;
    std::vector<std::vector<std::byte>> buffers;  // by BufferId; empty unless is_weight
};

WeightSnapshot snapshot_weights(const HostModel& model);

// Bit for bit, in BufferId order; throws braid::Error when the snapshots
// belong to different graphs.
WeightComparison compare_weights(const WeightSnapshot& a, const WeightSnapshot& b);

struct ToleranceComparison {
    bool within = true;
    std::size_t tensors_compared = 0;
    std::uint64_t elements_compared = 0;
    double max_abs_difference = 0.0;
    std::string max_tensor;  // where the largest absolute difference is
    // The first element outside the bound (when !within).
    std::string tensor;
    std::uint64_t index = 0;
    double first = 0.0, second = 0.0, bound = 0.0;

    // "within tolerance (N tensors, largest difference d in 'x')" or
    // "outside tolerance: tensor 'x' index i: a vs b (|a - b| = d > bound)".
    std::string describe() const;
};

// Every float element: |a - b| <= absolute + relative * |b| (b: the
// reference); integer buffers (the step) must be equal.
ToleranceComparison compare_weights_within(const WeightSnapshot& a, const WeightSnapshot& reference, double relative,
                                           double absolute);

}  // namespace braid::samples
