// GoogLeNet (Inception v1; Szegedy et al., "Going deeper with convolutions",
// CVPR 2015) as BVLC's Caffe model (models/bvlc_googlenet/train_val.prototxt)
// defines it: biased convolutions with ReLU, LRN after the first two
// convolutions, ceil-mode pooling (Caffe's only rounding), and two auxiliary
// heads after inception_4a and inception_4d with loss weight 0.3; weights
// from Caffe's xavier filler and biases at 0.2, as the prototxt says. Layer
// names follow the prototxt. The final 7x7 average pool is a global pool,
// identical at 224x224 and valid for other image sizes.
#include "nets/zoo.hpp"

namespace braid::samples {

namespace {

struct GoogLeNetBuilder {
    NetworkBuilder b;
    double width;
    std::uint32_t classes;

    std::uint32_t ch(std::uint32_t c) const { return scaled_channels(c, width); }

    TensorId conv_relu(const std::string& conv_name, const std::string& relu_name, TensorId x, std::uint32_t out,
                       std::uint32_t kernel, std::uint32_t stride, std::uint32_t pad) {
        return b.relu(relu_name, b.conv(conv_name, x, ConvConfig{ch(out), kernel, stride, pad, 1, true, 0.2f, InitRule::xavier_uniform}));
    }

    static PoolConfig max_pool(std::uint32_t kernel, std::uint32_t stride, std::uint32_t pad = 0) {
        return PoolConfig{PoolMode::max, kernel, stride, pad, true, false};
    }

    // Branch outputs become channel slices of `name/output`.
    TensorId inception(const std::string& name, TensorId x, std::uint32_t c1, std::uint32_t c3_reduce,
                       std::uint32_t c3, std::uint32_t c5_reduce, std::uint32_t c5, std::uint32_t pool_proj) {
        const TensorId b1 = conv_relu(name + "/1x1", name + "/relu_1x1", x, c1, 1, 1, 0);
        TensorId b2 = conv_relu(name + "/3x3_reduce", name + "/relu_3x3_reduce", x, c3_reduce, 1, 1, 0);
        b2 = conv_relu(name + "/3x3", name + "/relu_3x3", b2, c3, 3, 1, 1);
        TensorId b3 = conv_relu(name + "/5x5_reduce", name + "/relu_5x5_reduce", x, c5_reduce, 1, 1, 0);
        b3 = conv_relu(name + "/5x5", name + "/relu_5x5", b3, c5, 5, 1, 2);
        TensorId b4 = b.pool(name + "/pool", x, max_pool(3, 1, 1));
        b4 = conv_relu(name + "/pool_proj", name + "/relu_pool_proj", b4, pool_proj, 1, 1, 0);
        return b.concat(name + "/output", {b1, b2, b3, b4});
    }

    void auxiliary_head(const std::string& p, TensorId x) {
        TensorId a = b.pool(p + "/ave_pool", x, PoolConfig{PoolMode::average, 5, 3, 0, true, false});
        a = conv_relu(p + "/conv", p + "/relu_conv", a, 128, 1, 1, 0);
        a = b.relu(p + "/relu_fc", b.fully_connected(p + "/fc", a, FullyConnectedConfig{ch(1024), true}));
        a = b.dropout(p + "/drop_fc", a, DropoutConfig{0.7f});
        a = b.fully_connected(p + "/classifier", a, FullyConnectedConfig{classes, true});
        b.softmax_loss(p + "/loss", a, SoftmaxLossConfig{0.3f});
    }
};

}  // namespace

Network googlenet(const NetConfig& c) {
    GoogLeNetBuilder g{NetworkBuilder("googlenet", Shape4{c.batch, 3, c.image, c.image}), c.width_scale, c.classes};
    const LrnConfig lrn{5, 1e-4f, 0.75f, 1.0f};
    TensorId x = g.conv_relu("conv1/7x7_s2", "conv1/relu_7x7", g.b.images(), 64, 7, 2, 3);
    x = g.b.pool("pool1/3x3_s2", x, GoogLeNetBuilder::max_pool(3, 2));
    x = g.b.lrn("pool1/norm1", x, lrn);
    x = g.conv_relu("conv2/3x3_reduce", "conv2/relu_3x3_reduce", x, 64, 1, 1, 0);
    x = g.conv_relu("conv2/3x3", "conv2/relu_3x3", x, 192, 3, 1, 1);
    x = g.b.lrn("conv2/norm2", x, lrn);
    x = g.b.pool("pool2/3x3_s2", x, GoogLeNetBuilder::max_pool(3, 2));
    x = g.inception("inception_3a", x, 64, 96, 128, 16, 32, 32);
    x = g.inception("inception_3b", x, 128, 128, 192, 32, 96, 64);
    x = g.b.pool("pool3/3x3_s2", x, GoogLeNetBuilder::max_pool(3, 2));
    x = g.inception("inception_4a", x, 192, 96, 208, 16, 48, 64);
    if (c.aux_classifiers) g.auxiliary_head("loss1", x);
    x = g.inception("inception_4b", x, 160, 112, 224, 24, 64, 64);
    x = g.inception("inception_4c", x, 128, 128, 256, 24, 64, 64);
    x = g.inception("inception_4d", x, 112, 144, 288, 32, 64, 64);
    if (c.aux_classifiers) g.auxiliary_head("loss2", x);
    x = g.inception("inception_4e", x, 256, 160, 320, 32, 128, 128);
    x = g.b.pool("pool4/3x3_s2", x, GoogLeNetBuilder::max_pool(3, 2));
    x = g.inception("inception_5a", x, 256, 160, 320, 32, 128, 128);
    x = g.inception("inception_5b", x, 384, 192, 384, 48, 128, 128);
    x = g.b.pool("pool5/7x7_s1", x, PoolConfig{PoolMode::average, 0, 1, 0, false, true});
    x = g.b.dropout("pool5/drop_7x7_s1", x, DropoutConfig{0.4f});
    x = g.b.fully_connected("loss3/classifier", x, FullyConnectedConfig{c.classes, true});
    g.b.softmax_loss("loss3/loss3", x, SoftmaxLossConfig{1.0f});
    return g.b.finish();
}

}  // namespace braid::samples
