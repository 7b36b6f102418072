// Launch geometry of the per-channel reductions the sample layers run on a
// GPU over NCHW activations (batch norm, convolution bias gradients):
// `channel_slices` blocks per channel (grid slices x channels) write
// partial sums, then either a kernel over the same grid uses them or one
// thread per channel finishes them. The CUDA kernels (cuda/kernels.cu)
// launch with these numbers and the estimates (nn/launch.cpp) describe the
// same launches, so a plan is priced on the grids that run.
#pragma once

#include <cstdint>

#include "nn/counter_hash.hpp"  // BRAID_SAMPLES_HOST_DEVICE

namespace braid::samples {

inline constexpr unsigned channel_block_threads = 256;   // a block of a (slice, channel) grid
inline constexpr unsigned channel_finish_threads = 128;  // a block of the one-thread-per-channel finish
// Channels one reduction can cover: a grid row (blockIdx.y) per channel, and
// CUDA allows at most 65535 rows. Layers refuse more (a batch norm over
// them, a convolution bias of more output channels).
inline constexpr std::uint32_t channel_reduction_max_channels = 65535;

// Slices per channel: about 16 of a channel's (image, pixel) elements per
// thread, at most 64 slices.
BRAID_SAMPLES_HOST_DEVICE inline std::uint32_t channel_slices(std::uint32_t images, std::uint32_t h, std::uint32_t w) {
    const std::uint64_t count = std::uint64_t{images} * h * w;
    const std::uint64_t s = (count + 16 * channel_block_threads - 1) / (16 * channel_block_threads);
    return static_cast<std::uint32_t>(s < 1 ? 1 : (s > 64 ? 64 : s));
}

// Blocks of the finishing kernel: one thread per channel.
BRAID_SAMPLES_HOST_DEVICE inline std::uint32_t channel_finish_blocks(std::uint32_t channels) {
    return (channels + channel_finish_threads - 1) / channel_finish_threads;
}

}  // namespace braid::samples
