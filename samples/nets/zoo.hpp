// The sample networks by name: GoogLeNet (Inception v1) and ResNet-18/34/
// 50/101/152, for any batch, image size that gives valid shapes, class
// count and width scale. docs/samples.md gives the sources and the
// published parameter counts they reproduce at 224x224 with 1000 classes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nets/network.hpp"

namespace braid::samples {

struct NetConfig {
    std::string net = "resnet18";
    std::uint32_t batch = 32;
    std::uint32_t image = 224;  // square images of `image` x `image` pixels, 3 channels
    std::uint32_t classes = 1000;
    double width_scale = 1.0;    // multiplies every hidden channel count (not the classes)
    bool aux_classifiers = true;  // GoogLeNet's two auxiliary heads (loss weight 0.3)
};

// "googlenet", "resnet18", ..., "resnet152".
std::vector<std::string> network_names();

// Throws ShapeError naming the net, the layer and why; when the image is too
// small, the message gives the smallest image size the net accepts.
Network make_network(const NetConfig& config);

// The smallest square image the net builds for (0 when none up to 4096).
std::uint32_t smallest_image(NetConfig config);

// max(1, round(channels * scale)).
std::uint32_t scaled_channels(std::uint32_t channels, double width_scale);

Network googlenet(const NetConfig& config);
Network resnet(std::uint32_t depth, const NetConfig& config);

}  // namespace braid::samples
