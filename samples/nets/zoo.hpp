// The sample networks by name: GoogLeNet (Inception v1), ResNet-18/34/50/
// 101/152 and Inception-v3, for any batch, image size that gives valid
// shapes, class count and width scale. docs/samples.md gives the sources and
// the published parameter counts they reproduce at their default image size
// (default_image) with 1000 classes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "nets/network.hpp"

namespace braid::samples {

struct NetConfig {
    std::string net = "resnet18";
    std::uint32_t batch = 32;
    std::uint32_t image = 224;  // square images of `image` x `image` pixels, 3 channels (tools: default_image(net))
    std::uint32_t classes = 1000;
    double width_scale = 1.0;    // multiplies every hidden channel count (not the classes)
    // GoogLeNet's two auxiliary heads (loss weight 0.3), Inception-v3's AuxLogits (0.4).
    bool aux_classifiers = true;
    // Every ReLU right after a batch norm or a residual add becomes part of
    // it (NetworkBuilder::fuse_relu): ResNets and Inception-v3; same
    // results, fewer passes over the activations.
    bool fuse_relu = false;
    // Every batch norm has one backward op that writes dx and its weight
    // gradient from one computation of the channel sums (NetworkBuilder::
    // share_batch_norm_sums): one pass over x and dy fewer, the same bits.
    bool share_batch_norm_sums = false;
    // 0: one SGD update op per layer, right after its weight gradient. n > 0:
    // layers share a multi-tensor update op, consecutive in backward order,
    // until their parameters reach n bytes (the last bucket takes the rest):
    // fewer launches, later updates. Above the net's parameter bytes: one
    // update for the whole step, as fused optimizers do.
    std::uint64_t update_bucket_bytes = 0;
};

// What --fuse-relu and --share-bn-sums say in every tool that builds bundled nets.
inline constexpr const char* fuse_relu_help =
    "fold every ReLU that follows a batch norm or a residual add into it (ResNets, Inception-v3): same results, one "
    "pass over the activations and a buffer or two fewer per pair";
inline constexpr const char* share_batch_norm_sums_help =
    "one backward op per batch norm computes its channel sums once for dx and the weight gradient (ResNets, "
    "Inception-v3): one pass over the activations and their gradients fewer per batch norm, the same bits";

inline constexpr const char* update_bucket_help =
    "SGD updates as multi-tensor ops over layers holding this many MiB of parameters, consecutive in backward "
    "order (0: one per layer; more than the net holds: one per step)";

// The graph variants a config asks for, for labels: "" or any of ", ReLUs
// fused", ", batch-norm sums shared", ", updates in N MiB buckets".
std::string net_variants(const NetConfig& c);

// "googlenet", "resnet18", ..., "resnet152", "inception_v3".
std::vector<std::string> network_names();

// The image size a net is defined for, what tools use when no --image is
// given: 299 for inception_v3 (torchvision's), 224 for the others.
std::uint32_t default_image(std::string_view net);

// Whether NetConfig::aux_classifiers changes the net (GoogLeNet, Inception-v3).
bool has_aux_classifiers(std::string_view net);

// Throws ShapeError naming the net, the layer and why; when the image is too
// small, the message gives the smallest image size the net accepts.
Network make_network(const NetConfig& config);

// The smallest square image the net builds for (0 when none up to 4096).
std::uint32_t smallest_image(NetConfig config);

// max(1, round(channels * scale)).
std::uint32_t scaled_channels(std::uint32_t channels, double width_scale);

Network googlenet(const NetConfig& config);
Network resnet(std::uint32_t depth, const NetConfig& config);
Network inception_v3(const NetConfig& config);

}  // namespace braid::samples
