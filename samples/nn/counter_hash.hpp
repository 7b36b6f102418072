// Counter-based random bits: a value is a pure function of its coordinates
// (seed, stream tag, two indices), so a CUDA kernel computes exactly the bits
// a CPU loop does, in any order and under any batch split. Mixing is
// SplitMix64's finalizer (Steele, Lea & Flood, OOPSLA 2014).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define BRAID_SAMPLES_HOST_DEVICE __host__ __device__
#else
#define BRAID_SAMPLES_HOST_DEVICE
#endif

namespace braid::samples {

BRAID_SAMPLES_HOST_DEVICE constexpr std::uint64_t mix64(std::uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// The streams the samples draw from (the tag's low byte); higher bits of a
// tag carry a layer or parameter ordinal.
enum class RandomStream : std::uint64_t {
    image_noise = 1,     // (iteration, image * image_elements + element)
    label = 2,           // (iteration, image)
    class_pattern = 3,   // (class, channel)
    dropout = 4,         // tag | layer << 8: (iteration, image * image_elements + element)
    parameter_init = 5,  // tag | parameter ordinal << 8: (0, element)
};

BRAID_SAMPLES_HOST_DEVICE constexpr std::uint64_t stream_tag(RandomStream s, std::uint64_t ordinal = 0) {
    return static_cast<std::uint64_t>(s) | (ordinal << 8);
}

BRAID_SAMPLES_HOST_DEVICE constexpr std::uint64_t counter_hash(std::uint64_t seed, std::uint64_t tag, std::uint64_t a,
                                                               std::uint64_t b) {
    return mix64(mix64(mix64(mix64(seed) ^ tag) ^ a) ^ b);
}

// The top 24 bits: an integer in [0, 2^24), exact in float.
BRAID_SAMPLES_HOST_DEVICE constexpr std::uint32_t bits24(std::uint64_t bits) {
    return static_cast<std::uint32_t>(bits >> 40);
}

// Uniform in [0, 1) on a 2^-24 grid: the same float on every device.
BRAID_SAMPLES_HOST_DEVICE constexpr float uniform01(std::uint64_t bits) {
    return static_cast<float>(bits24(bits)) * (1.0f / 16777216.0f);
}

}  // namespace braid::samples
