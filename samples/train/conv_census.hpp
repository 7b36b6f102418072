// The convolutions of a training step, one entry per distinct problem:
// what a benchmark that times each problem alone (bench-gpu-conv) runs,
// and how many times the step runs it. Two layers are one problem when
// their input shapes (batch included), geometry (output channels, kernel,
// stride, padding, groups, bias) and views (the image strides below) are
// equal; a layer without a backward_data op (dx_stride 0) is never one
// problem with a layer that has one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nn/conv.hpp"
#include "train/training_graph.hpp"

namespace braid::samples {

struct ConvCensusEntry {
    Conv2d layer;                      // the problem
    std::string first;                 // the first layer with it, in program order
    std::uint32_t layers = 0;          // layers with it: forward and backward-filter passes per step
    std::uint32_t backward_data = 0;   // of those, the ones with a backward_data op (not a conv on the images)
    // Image strides (floats) of the views the step's calls take: the input
    // x, the output y and their gradients. A stride above the tensor's
    // C*H*W is a channel slice of a concat buffer, which limits the
    // algorithms cuDNN offers. dx_stride is 0 without a backward_data op.
    std::uint64_t x_stride = 0, y_stride = 0, dx_stride = 0, dy_stride = 0;

    // Whether any of the views is a channel slice.
    bool sliced() const noexcept;
};

// In the program order of each problem's first layer.
std::vector<ConvCensusEntry> conv_census(const TrainingGraph& tg);

// Floats a benchmark's buffers need to run every problem of a census, on
// the step's views (n images a stride apart, from the buffer's start) and
// on whole tensors: x and dx hold inputs, w and dw filters, y and dy
// outputs. At least 1 each.
struct ConvCensusBuffers {
    std::uint64_t x = 1, dx = 1, w = 1, y = 1, dy = 1;
};
ConvCensusBuffers conv_census_buffers(const std::vector<ConvCensusEntry>& census);

}  // namespace braid::samples
