// ResNet (He et al., "Deep Residual Learning for Image Recognition", CVPR
// 2016) as torchvision builds it (torchvision/models/resnet.py): unbiased
// convolutions, each followed by batch norm; basic blocks for 18/34,
// bottlenecks for 50/101/152 with the stride on the 3x3 convolution (V1.5);
// projection shortcuts (1x1 conv + BN) where the shape changes; global
// average pool and a biased fully connected classifier. Names follow
// torchvision's module names, with the block's ReLUs told apart.
#include "nets/zoo.hpp"

#include <array>

namespace braid::samples {

namespace {

struct ResNetBuilder {
    NetworkBuilder b;

    TensorId conv_bn(const std::string& conv_name, const std::string& bn_name, TensorId x, std::uint32_t out,
                     std::uint32_t kernel, std::uint32_t stride, std::uint32_t pad) {
        return b.batch_norm(bn_name, b.conv(conv_name, x, ConvConfig{out, kernel, stride, pad, 1, false}));
    }

    TensorId shortcut(const std::string& p, TensorId x, std::uint32_t out, std::uint32_t stride) {
        if (stride == 1 && b.shape(x).c == out) return x;
        return conv_bn(p + ".downsample.0", p + ".downsample.1", x, out, 1, stride, 0);
    }

    TensorId basic_block(const std::string& p, TensorId x, std::uint32_t planes, std::uint32_t stride) {
        TensorId y = b.relu(p + ".relu1", conv_bn(p + ".conv1", p + ".bn1", x, planes, 3, stride, 1));
        y = conv_bn(p + ".conv2", p + ".bn2", y, planes, 3, 1, 1);
        const TensorId s = shortcut(p, x, planes, stride);
        return b.relu(p + ".relu", b.add(p + ".add", y, s));
    }

    TensorId bottleneck(const std::string& p, TensorId x, std::uint32_t planes, std::uint32_t stride) {
        TensorId y = b.relu(p + ".relu1", conv_bn(p + ".conv1", p + ".bn1", x, planes, 1, 1, 0));
        y = b.relu(p + ".relu2", conv_bn(p + ".conv2", p + ".bn2", y, planes, 3, stride, 1));
        y = conv_bn(p + ".conv3", p + ".bn3", y, planes * 4, 1, 1, 0);
        const TensorId s = shortcut(p, x, planes * 4, stride);
        return b.relu(p + ".relu", b.add(p + ".add", y, s));
    }
};

}  // namespace

Network resnet(std::uint32_t depth, const NetConfig& c) {
    std::array<std::uint32_t, 4> blocks{};
    bool bottleneck = false;
    switch (depth) {
        case 18: blocks = {2, 2, 2, 2}; break;
        case 34: blocks = {3, 4, 6, 3}; break;
        case 50: blocks = {3, 4, 6, 3}, bottleneck = true; break;
        case 101: blocks = {3, 4, 23, 3}, bottleneck = true; break;
        case 152: blocks = {3, 8, 36, 3}, bottleneck = true; break;
        default: throw ShapeError("resnet: no ResNet of depth " + std::to_string(depth) + " (18, 34, 50, 101, 152)");
    }
    ResNetBuilder r{NetworkBuilder("resnet" + std::to_string(depth), Shape4{c.batch, 3, c.image, c.image})};
    r.b.fuse_relu(c.fuse_relu);
    r.b.share_batch_norm_sums(c.share_batch_norm_sums);
    const auto ch = [&](std::uint32_t n) { return scaled_channels(n, c.width_scale); };
    TensorId x = r.b.relu("relu", r.conv_bn("conv1", "bn1", r.b.images(), ch(64), 7, 2, 3));
    x = r.b.pool("maxpool", x, PoolConfig{PoolMode::max, 3, 2, 1, false, false});
    const std::array<std::uint32_t, 4> planes{ch(64), ch(128), ch(256), ch(512)};
    for (std::uint32_t stage = 0; stage < 4; ++stage) {
        for (std::uint32_t i = 0; i < blocks[stage]; ++i) {
            const std::string p = "layer" + std::to_string(stage + 1) + "." + std::to_string(i);
            const std::uint32_t stride = (stage > 0 && i == 0) ? 2 : 1;
            x = bottleneck ? r.bottleneck(p, x, planes[stage], stride) : r.basic_block(p, x, planes[stage], stride);
        }
    }
    x = r.b.pool("avgpool", x, PoolConfig{PoolMode::average, 0, 1, 0, false, true});
    x = r.b.fully_connected("fc", x, FullyConnectedConfig{c.classes, true});
    r.b.softmax_loss("loss", x, SoftmaxLossConfig{1.0f});
    return r.b.finish();
}

}  // namespace braid::samples
