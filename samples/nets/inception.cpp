// Inception-v3 (Szegedy et al., "Rethinking the Inception Architecture for
// Computer Vision", CVPR 2016) as torchvision builds it
// (torchvision/models/inception.py, `inception_v3`): every convolution is a
// BasicConv2d (unbiased conv + batch norm with eps 0.001 + ReLU); a stem of
// five convolutions and two 3x3/2 max pools; InceptionA x3 (Mixed_5b-5d),
// InceptionB (Mixed_6a), InceptionC x4 with factorised 1x7/7x1 convolutions
// (Mixed_6b-6e), InceptionD (Mixed_7a), InceptionE x2 with 1x3/3x1 pairs
// (Mixed_7b, 7c); a global average pool, dropout 0.5 and a biased FC. The
// auxiliary head (InceptionAux) reads Mixed_6e; its loss weight is 0.4, the
// weight TF-slim's Inception-v3 training gives AuxLogits (torchvision leaves
// the loss to the training script). Names follow torchvision's modules
// (`Mixed_6b.branch7x7_2.conv`), plus `.bn`, `.relu` and each module's
// `.cat`. InceptionE's inner torch.cat of a 1x3 and a 3x1 branch is flattened
// into the module's concat: the same channels in the same order, and braid's
// concats may not nest. Weights start from braid's he_uniform (FC:
// fan_in_uniform), not torchvision's truncated normals: the architecture,
// parameter count and work are torchvision's, the initial values are not.
#include "nets/zoo.hpp"

namespace braid::samples {

namespace {

struct InceptionV3Builder {
    NetworkBuilder b;
    double width;
    std::uint32_t classes;

    std::uint32_t ch(std::uint32_t c) const { return scaled_channels(c, width); }

    // torchvision's BasicConv2d: `p.conv` -> `p.bn` -> `p.relu`.
    TensorId basic_conv(const std::string& p, TensorId x, std::uint32_t out, Size2 kernel, std::uint32_t stride = 1,
                        Size2 pad = 0) {
        const TensorId c = b.conv(p + ".conv", x, ConvConfig{ch(out), kernel, stride, pad, 1, false});
        return b.relu(p + ".relu", b.batch_norm(p + ".bn", c, BatchNormConfig{0.001f, 0.1f}));
    }

    static PoolConfig max_pool_3x3_s2() { return PoolConfig{PoolMode::max, 3, 2, 0, false, false}; }
    // F.avg_pool2d(x, 3, stride=1, padding=1): count_include_pad, so every window divides by 9.
    static PoolConfig avg_pool_3x3_s1() { return PoolConfig{PoolMode::average, 3, 1, 1, false, false}; }
    static PoolConfig global_avg_pool() { return PoolConfig{PoolMode::average, 0, 1, 0, false, true}; }

    TensorId inception_a(const std::string& p, TensorId x, std::uint32_t pool_features) {
        const TensorId b1 = basic_conv(p + ".branch1x1", x, 64, 1);
        TensorId b5 = basic_conv(p + ".branch5x5_1", x, 48, 1);
        b5 = basic_conv(p + ".branch5x5_2", b5, 64, 5, 1, 2);
        TensorId b3 = basic_conv(p + ".branch3x3dbl_1", x, 64, 1);
        b3 = basic_conv(p + ".branch3x3dbl_2", b3, 96, 3, 1, 1);
        b3 = basic_conv(p + ".branch3x3dbl_3", b3, 96, 3, 1, 1);
        TensorId bp = b.pool(p + ".avg_pool", x, avg_pool_3x3_s1());
        bp = basic_conv(p + ".branch_pool", bp, pool_features, 1);
        return b.concat(p + ".cat", {b1, b5, b3, bp});
    }

    TensorId inception_b(const std::string& p, TensorId x) {
        const TensorId b3 = basic_conv(p + ".branch3x3", x, 384, 3, 2);
        TensorId bd = basic_conv(p + ".branch3x3dbl_1", x, 64, 1);
        bd = basic_conv(p + ".branch3x3dbl_2", bd, 96, 3, 1, 1);
        bd = basic_conv(p + ".branch3x3dbl_3", bd, 96, 3, 2);
        const TensorId bp = b.pool(p + ".max_pool", x, max_pool_3x3_s2());
        return b.concat(p + ".cat", {b3, bd, bp});
    }

    TensorId inception_c(const std::string& p, TensorId x, std::uint32_t c7) {
        const Size2 k1x7{1, 7}, pad1x7{0, 3}, k7x1{7, 1}, pad7x1{3, 0};
        const TensorId b1 = basic_conv(p + ".branch1x1", x, 192, 1);
        TensorId b7 = basic_conv(p + ".branch7x7_1", x, c7, 1);
        b7 = basic_conv(p + ".branch7x7_2", b7, c7, k1x7, 1, pad1x7);
        b7 = basic_conv(p + ".branch7x7_3", b7, 192, k7x1, 1, pad7x1);
        TensorId bd = basic_conv(p + ".branch7x7dbl_1", x, c7, 1);
        bd = basic_conv(p + ".branch7x7dbl_2", bd, c7, k7x1, 1, pad7x1);
        bd = basic_conv(p + ".branch7x7dbl_3", bd, c7, k1x7, 1, pad1x7);
        bd = basic_conv(p + ".branch7x7dbl_4", bd, c7, k7x1, 1, pad7x1);
        bd = basic_conv(p + ".branch7x7dbl_5", bd, 192, k1x7, 1, pad1x7);
        TensorId bp = b.pool(p + ".avg_pool", x, avg_pool_3x3_s1());
        bp = basic_conv(p + ".branch_pool", bp, 192, 1);
        return b.concat(p + ".cat", {b1, b7, bd, bp});
    }

    TensorId inception_d(const std::string& p, TensorId x) {
        TensorId b3 = basic_conv(p + ".branch3x3_1", x, 192, 1);
        b3 = basic_conv(p + ".branch3x3_2", b3, 320, 3, 2);
        TensorId b7 = basic_conv(p + ".branch7x7x3_1", x, 192, 1);
        b7 = basic_conv(p + ".branch7x7x3_2", b7, 192, Size2{1, 7}, 1, Size2{0, 3});
        b7 = basic_conv(p + ".branch7x7x3_3", b7, 192, Size2{7, 1}, 1, Size2{3, 0});
        b7 = basic_conv(p + ".branch7x7x3_4", b7, 192, 3, 2);
        const TensorId bp = b.pool(p + ".max_pool", x, max_pool_3x3_s2());
        return b.concat(p + ".cat", {b3, b7, bp});
    }

    TensorId inception_e(const std::string& p, TensorId x) {
        const Size2 k1x3{1, 3}, pad1x3{0, 1}, k3x1{3, 1}, pad3x1{1, 0};
        const TensorId b1 = basic_conv(p + ".branch1x1", x, 320, 1);
        const TensorId b3 = basic_conv(p + ".branch3x3_1", x, 384, 1);
        const TensorId b3a = basic_conv(p + ".branch3x3_2a", b3, 384, k1x3, 1, pad1x3);
        const TensorId b3b = basic_conv(p + ".branch3x3_2b", b3, 384, k3x1, 1, pad3x1);
        TensorId bd = basic_conv(p + ".branch3x3dbl_1", x, 448, 1);
        bd = basic_conv(p + ".branch3x3dbl_2", bd, 384, 3, 1, 1);
        const TensorId bda = basic_conv(p + ".branch3x3dbl_3a", bd, 384, k1x3, 1, pad1x3);
        const TensorId bdb = basic_conv(p + ".branch3x3dbl_3b", bd, 384, k3x1, 1, pad3x1);
        TensorId bp = b.pool(p + ".avg_pool", x, avg_pool_3x3_s1());
        bp = basic_conv(p + ".branch_pool", bp, 192, 1);
        return b.concat(p + ".cat", {b1, b3a, b3b, bda, bdb, bp});
    }

    // InceptionAux: 5x5/3 average pool (17x17 -> 5x5 at 299x299), 1x1 conv
    // 128, 5x5 conv 768 (-> 1x1), adaptive average pool, FC; no dropout.
    void aux_logits(TensorId x) {
        TensorId a = b.pool("AuxLogits.avg_pool", x, PoolConfig{PoolMode::average, 5, 3, 0, false, false});
        a = basic_conv("AuxLogits.conv0", a, 128, 1);
        a = basic_conv("AuxLogits.conv1", a, 768, 5);
        a = b.pool("AuxLogits.avgpool", a, global_avg_pool());
        a = b.fully_connected("AuxLogits.fc", a, FullyConnectedConfig{classes, true});
        b.softmax_loss("AuxLogits.loss", a, SoftmaxLossConfig{0.4f});
    }
};

}  // namespace

Network inception_v3(const NetConfig& c) {
    InceptionV3Builder v{NetworkBuilder("inception_v3", Shape4{c.batch, 3, c.image, c.image}), c.width_scale,
                         c.classes};
    v.b.fuse_relu(c.fuse_relu);
    v.b.share_batch_norm_sums(c.share_batch_norm_sums);
    TensorId x = v.basic_conv("Conv2d_1a_3x3", v.b.images(), 32, 3, 2);
    x = v.basic_conv("Conv2d_2a_3x3", x, 32, 3);
    x = v.basic_conv("Conv2d_2b_3x3", x, 64, 3, 1, 1);
    x = v.b.pool("maxpool1", x, InceptionV3Builder::max_pool_3x3_s2());
    x = v.basic_conv("Conv2d_3b_1x1", x, 80, 1);
    x = v.basic_conv("Conv2d_4a_3x3", x, 192, 3);
    x = v.b.pool("maxpool2", x, InceptionV3Builder::max_pool_3x3_s2());
    x = v.inception_a("Mixed_5b", x, 32);
    x = v.inception_a("Mixed_5c", x, 64);
    x = v.inception_a("Mixed_5d", x, 64);
    x = v.inception_b("Mixed_6a", x);
    x = v.inception_c("Mixed_6b", x, 128);
    x = v.inception_c("Mixed_6c", x, 160);
    x = v.inception_c("Mixed_6d", x, 160);
    x = v.inception_c("Mixed_6e", x, 192);
    if (c.aux_classifiers) v.aux_logits(x);
    x = v.inception_d("Mixed_7a", x);
    x = v.inception_e("Mixed_7b", x);
    x = v.inception_e("Mixed_7c", x);
    x = v.b.pool("avgpool", x, InceptionV3Builder::global_avg_pool());
    x = v.b.dropout("dropout", x, DropoutConfig{0.5f});
    x = v.b.fully_connected("fc", x, FullyConnectedConfig{c.classes, true});
    v.b.softmax_loss("loss", x, SoftmaxLossConfig{1.0f});
    return v.b.finish();
}

}  // namespace braid::samples
