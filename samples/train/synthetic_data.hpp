// Seeded synthetic training data that a CNN can learn within a few
// iterations: each class has a fixed random colour (one level per channel),
// and an image of class k is colour k under fresh per-pixel noise of the
// same amplitude. Everything is a counter hash of its coordinates
// (nn/counter_hash.hpp), so any image range, on CPU or GPU, produces the
// same bits; for element e = (c * H + h) * W + w of image n:
//   label(n)     = counter_hash(seed, label, iteration, n) mod classes
//   colour(k, c) = 2 * uniform01(counter_hash(seed, class_pattern, k, c)) - 1
//   noise(n, e)  = 2 * uniform01(counter_hash(seed, image_noise, iteration, n * C*H*W + e)) - 1
//   pixel(n, e)  = colour(label(n), c) + noise(n, e)
#pragma once

#include <cstdint>

#include "nn/counter_hash.hpp"
#include "nn/tensor.hpp"

namespace braid::samples {

BRAID_SAMPLES_HOST_DEVICE constexpr std::int32_t synthetic_label(std::uint64_t seed, std::uint32_t classes,
                                                                std::uint64_t iteration, std::uint32_t image) {
    return static_cast<std::int32_t>(counter_hash(seed, stream_tag(RandomStream::label), iteration, image) % classes);
}

BRAID_SAMPLES_HOST_DEVICE constexpr float synthetic_pixel(std::uint64_t seed, std::uint64_t iteration,
                                                         std::uint32_t image, std::int32_t label,
                                                         std::uint64_t element, std::uint64_t image_elements,
                                                         std::uint64_t plane_elements) {
    const float colour = 2.0f * uniform01(counter_hash(seed, stream_tag(RandomStream::class_pattern),
                                                       static_cast<std::uint64_t>(label), element / plane_elements)) -
                         1.0f;
    const float noise =
        2.0f * uniform01(counter_hash(seed, stream_tag(RandomStream::image_noise), iteration,
                                      image * image_elements + element)) -
        1.0f;
    return colour + noise;
}

// Images [range) of iteration `iteration` and their labels.
inline void synthetic_batch(std::uint64_t seed, std::uint32_t classes, std::uint64_t iteration,
                            TensorView<float> images, std::int32_t* labels, ImageRange range) {
    const std::uint64_t e = images.shape.image_elements(), plane = images.shape.plane_elements();
    for (std::uint32_t n = range.begin; n < range.end; ++n) {
        const std::int32_t label = synthetic_label(seed, classes, iteration, n);
        labels[n] = label;
        float* px = images.image(n);
        for (std::uint64_t i = 0; i < e; ++i) px[i] = synthetic_pixel(seed, iteration, n, label, i, e, plane);
    }
}

}  // namespace braid::samples
