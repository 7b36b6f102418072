// The --summary report: one row per layer (name, kind, output shape of one
// image, parameters, forward FLOPs per image) and totals, then what the
// training step looks like as a graph and what it is estimated to cost.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "braid/model/device_spec.hpp"
#include "nets/network.hpp"
#include "nets/zoo.hpp"
#include "train/training_graph.hpp"

namespace braid::samples {

struct SummaryRow {
    std::string name;
    LayerKind kind = LayerKind::conv;
    std::string window;  // convolutions and pools: "1x7/1 pad 0x3", "3x3/2", "global"; else empty
    Shape4 output;
    std::uint64_t parameters = 0;
    double forward_flops_per_image = 0.0;
};

// "googlenet without auxiliary classifiers: batch 32, 224x224 images, 1000
// classes, width scale 1": what a profile's run.network says it ran.
std::string describe_network(const NetConfig& config);

std::vector<SummaryRow> summarize(const Network& net);
std::string format_layer_table(const Network& net);
// Ops by kind, splittable ops, gradient sums, edges, memory; with a device,
// the roofline estimate of a serial iteration and its critical path.
std::string format_graph_summary(const TrainingGraph& tg, const braid::DeviceSpec* device,
                                 const EstimateOptions& options = {});

}  // namespace braid::samples
