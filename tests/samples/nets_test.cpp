// The sample networks: the output shape of every layer at 224x224 (299x299
// for Inception-v3) against the papers' and torchvision's tables, parameter
// counts against the published ones, width scaling, other image sizes and
// the errors for impossible ones.
#include <doctest/doctest.h>

#include <array>
#include <map>
#include <string>
#include <utility>
#include <variant>

#include "nets/zoo.hpp"

using namespace braid::samples;

namespace {

struct Expected {
    std::uint32_t c = 0, h = 0;
};

NetConfig config(const std::string& net, bool aux = true) {
    NetConfig c;
    c.net = net;
    c.batch = 2;
    c.aux_classifiers = aux;
    return c;
}

// Every layer must have an expectation and meet it.
void check_every_layer(const Network& net, const std::map<std::string, Expected>& expected) {
    CHECK(expected.size() == net.layers().size());
    for (const LayerNode& l : net.layers()) {
        CAPTURE(l.name);
        const auto it = expected.find(l.name);
        REQUIRE_MESSAGE(it != expected.end(), "no expected shape for layer " << l.name);
        const Shape4 out = output_of(l.spec);
        CHECK(out.n == 2);
        CHECK(out.c == it->second.c);
        CHECK(out.h == it->second.h);
        CHECK(out.w == it->second.h);
    }
}

// Szegedy et al. 2015, Table 1 (and the auxiliary heads of section 5).
std::map<std::string, Expected> googlenet_table(bool aux) {
    std::map<std::string, Expected> e;
    auto both = [&](const std::string& a, const std::string& b, Expected x) { e[a] = x, e[b] = x; };
    both("conv1/7x7_s2", "conv1/relu_7x7", {64, 112});
    e["pool1/3x3_s2"] = e["pool1/norm1"] = {64, 56};
    both("conv2/3x3_reduce", "conv2/relu_3x3_reduce", {64, 56});
    both("conv2/3x3", "conv2/relu_3x3", {192, 56});
    e["conv2/norm2"] = {192, 56};
    e["pool2/3x3_s2"] = {192, 28};
    struct Module {
        const char* name;
        std::uint32_t in, size, c1, c3r, c3, c5r, c5, pp;
    };
    const Module modules[] = {
        {"inception_3a", 192, 28, 64, 96, 128, 16, 32, 32},    {"inception_3b", 256, 28, 128, 128, 192, 32, 96, 64},
        {"inception_4a", 480, 14, 192, 96, 208, 16, 48, 64},   {"inception_4b", 512, 14, 160, 112, 224, 24, 64, 64},
        {"inception_4c", 512, 14, 128, 128, 256, 24, 64, 64},  {"inception_4d", 512, 14, 112, 144, 288, 32, 64, 64},
        {"inception_4e", 528, 14, 256, 160, 320, 32, 128, 128}, {"inception_5a", 832, 7, 256, 160, 320, 32, 128, 128},
        {"inception_5b", 832, 7, 384, 192, 384, 48, 128, 128},
    };
    const std::map<std::string, std::uint32_t> outputs{
        {"inception_3a", 256}, {"inception_3b", 480}, {"inception_4a", 512}, {"inception_4b", 512}, {"inception_4c", 512},
        {"inception_4d", 528}, {"inception_4e", 832}, {"inception_5a", 832}, {"inception_5b", 1024}};
    for (const Module& m : modules) {
        const std::string p = m.name;
        both(p + "/1x1", p + "/relu_1x1", {m.c1, m.size});
        both(p + "/3x3_reduce", p + "/relu_3x3_reduce", {m.c3r, m.size});
        both(p + "/3x3", p + "/relu_3x3", {m.c3, m.size});
        both(p + "/5x5_reduce", p + "/relu_5x5_reduce", {m.c5r, m.size});
        both(p + "/5x5", p + "/relu_5x5", {m.c5, m.size});
        e[p + "/pool"] = {m.in, m.size};
        both(p + "/pool_proj", p + "/relu_pool_proj", {m.pp, m.size});
        e[p + "/output"] = {m.c1 + m.c3 + m.c5 + m.pp, m.size};
        CHECK(m.c1 + m.c3 + m.c5 + m.pp == outputs.at(p));  // the table's output depths
    }
    e["pool3/3x3_s2"] = {480, 14};
    e["pool4/3x3_s2"] = {832, 7};
    e["pool5/7x7_s1"] = e["pool5/drop_7x7_s1"] = {1024, 1};
    e["loss3/classifier"] = e["loss3/loss3"] = {1000, 1};
    if (aux) {
        for (auto [p, in] : {std::pair{"loss1", 512u}, std::pair{"loss2", 528u}}) {
            const std::string s = p;
            e[s + "/ave_pool"] = {in, 4};
            both(s + "/conv", s + "/relu_conv", {128, 4});
            e[s + "/fc"] = e[s + "/relu_fc"] = e[s + "/drop_fc"] = {1024, 1};
            e[s + "/classifier"] = e[s + "/loss"] = {1000, 1};
        }
    }
    return e;
}

// He et al. 2016, Table 1, with torchvision's layer names.
std::map<std::string, Expected> resnet_table(std::uint32_t depth) {
    std::array<std::uint32_t, 4> count{};
    switch (depth) {
        case 18: count = {2, 2, 2, 2}; break;
        case 34: count = {3, 4, 6, 3}; break;
        case 50: count = {3, 4, 6, 3}; break;
        case 101: count = {3, 4, 23, 3}; break;
        default: count = {3, 8, 36, 3}; break;
    }
    const bool bottleneck = depth >= 50;
    const std::uint32_t expansion = bottleneck ? 4 : 1;
    std::map<std::string, Expected> e;
    e["conv1"] = e["bn1"] = e["relu"] = {64, 112};
    e["maxpool"] = {64, 56};
    std::uint32_t size = 56, in_channels = 64;
    for (std::uint32_t s = 0; s < 4; ++s) {
        const std::uint32_t planes = 64u << s, out = planes * expansion;
        const std::uint32_t in_size = size;
        if (s > 0) size /= 2;  // conv3_1, conv4_1, conv5_1 downsample with stride 2
        for (std::uint32_t b = 0; b < count[s]; ++b) {
            const std::string p = "layer" + std::to_string(s + 1) + "." + std::to_string(b);
            if (bottleneck) {
                // torchvision (V1.5): the stride sits on the 3x3 convolution.
                const std::uint32_t first = b == 0 ? in_size : size;
                e[p + ".conv1"] = e[p + ".bn1"] = e[p + ".relu1"] = {planes, first};
                e[p + ".conv2"] = e[p + ".bn2"] = e[p + ".relu2"] = {planes, size};
                e[p + ".conv3"] = e[p + ".bn3"] = {out, size};
            } else {
                e[p + ".conv1"] = e[p + ".bn1"] = e[p + ".relu1"] = {planes, size};
                e[p + ".conv2"] = e[p + ".bn2"] = {planes, size};
            }
            if (b == 0 && (s > 0 || in_channels != out)) e[p + ".downsample.0"] = e[p + ".downsample.1"] = {out, size};
            e[p + ".add"] = e[p + ".relu"] = {out, size};
        }
        in_channels = out;
    }
    e["avgpool"] = {512 * expansion, 1};
    e["fc"] = e["loss"] = {1000, 1};
    return e;
}

// torchvision's inception.py: the channels of every BasicConv2d in each
// module's __init__, and the sizes its _forward comments give at 299x299.
std::map<std::string, Expected> inception_v3_table(bool aux) {
    std::map<std::string, Expected> e;
    auto basic = [&](const std::string& p, Expected x) { e[p + ".conv"] = e[p + ".bn"] = e[p + ".relu"] = x; };
    basic("Conv2d_1a_3x3", {32, 149});
    basic("Conv2d_2a_3x3", {32, 147});
    basic("Conv2d_2b_3x3", {64, 147});
    e["maxpool1"] = {64, 73};
    basic("Conv2d_3b_1x1", {80, 73});
    basic("Conv2d_4a_3x3", {192, 71});
    e["maxpool2"] = {192, 35};
    std::uint32_t in = 192;
    for (auto [m, pool_features] : {std::pair{"Mixed_5b", 32u}, std::pair{"Mixed_5c", 64u}, std::pair{"Mixed_5d", 64u}}) {
        const std::string p = m;
        basic(p + ".branch1x1", {64, 35});
        basic(p + ".branch5x5_1", {48, 35});
        basic(p + ".branch5x5_2", {64, 35});
        basic(p + ".branch3x3dbl_1", {64, 35});
        basic(p + ".branch3x3dbl_2", {96, 35});
        basic(p + ".branch3x3dbl_3", {96, 35});
        e[p + ".avg_pool"] = {in, 35};
        basic(p + ".branch_pool", {pool_features, 35});
        in = 64 + 64 + 96 + pool_features;
        e[p + ".cat"] = {in, 35};
    }
    CHECK(in == 288);
    basic("Mixed_6a.branch3x3", {384, 17});
    basic("Mixed_6a.branch3x3dbl_1", {64, 35});
    basic("Mixed_6a.branch3x3dbl_2", {96, 35});
    basic("Mixed_6a.branch3x3dbl_3", {96, 17});
    e["Mixed_6a.max_pool"] = {288, 17};
    e["Mixed_6a.cat"] = {384 + 96 + 288, 17};
    for (auto [m, c7] : {std::pair{"Mixed_6b", 128u}, std::pair{"Mixed_6c", 160u}, std::pair{"Mixed_6d", 160u},
                         std::pair{"Mixed_6e", 192u}}) {
        const std::string p = m;
        basic(p + ".branch1x1", {192, 17});
        basic(p + ".branch7x7_1", {c7, 17});
        basic(p + ".branch7x7_2", {c7, 17});
        basic(p + ".branch7x7_3", {192, 17});
        for (const char* i : {"1", "2", "3", "4"}) basic(p + ".branch7x7dbl_" + i, {c7, 17});
        basic(p + ".branch7x7dbl_5", {192, 17});
        e[p + ".avg_pool"] = {768, 17};
        basic(p + ".branch_pool", {192, 17});
        e[p + ".cat"] = {768, 17};
    }
    if (aux) {
        e["AuxLogits.avg_pool"] = {768, 5};
        basic("AuxLogits.conv0", {128, 5});
        basic("AuxLogits.conv1", {768, 1});
        e["AuxLogits.avgpool"] = {768, 1};
        e["AuxLogits.fc"] = e["AuxLogits.loss"] = {1000, 1};
    }
    basic("Mixed_7a.branch3x3_1", {192, 17});
    basic("Mixed_7a.branch3x3_2", {320, 8});
    for (const char* i : {"1", "2", "3"}) basic(std::string("Mixed_7a.branch7x7x3_") + i, {192, 17});
    basic("Mixed_7a.branch7x7x3_4", {192, 8});
    e["Mixed_7a.max_pool"] = {768, 8};
    e["Mixed_7a.cat"] = {320 + 192 + 768, 8};
    for (auto [m, c] : {std::pair{"Mixed_7b", 1280u}, std::pair{"Mixed_7c", 2048u}}) {
        const std::string p = m;
        basic(p + ".branch1x1", {320, 8});
        for (const char* b : {".branch3x3_1", ".branch3x3_2a", ".branch3x3_2b", ".branch3x3dbl_2", ".branch3x3dbl_3a",
                              ".branch3x3dbl_3b"})
            basic(p + b, {384, 8});
        basic(p + ".branch3x3dbl_1", {448, 8});
        e[p + ".avg_pool"] = {c, 8};
        basic(p + ".branch_pool", {192, 8});
        e[p + ".cat"] = {320 + 768 + 768 + 192, 8};
    }
    e["avgpool"] = e["dropout"] = {2048, 1};
    e["fc"] = e["loss"] = {1000, 1};
    return e;
}

NetConfig inception(bool aux = true) {
    NetConfig c = config("inception_v3", aux);
    c.image = default_image("inception_v3");
    return c;
}

// Multiply-adds of one image's convolutions and fully connected layers.
double conv_fc_macs_per_image(const Network& net) {
    double macs = 0.0;
    for (const LayerNode& l : net.layers()) {
        if (const auto* c = std::get_if<Conv2d>(&l.spec)) macs += static_cast<double>(c->macs());
        if (const auto* f = std::get_if<FullyConnected>(&l.spec))
            macs += static_cast<double>(f->in.n * f->in_features() * f->config.out_features);
    }
    return macs / net.batch();
}

}  // namespace

TEST_SUITE("cpu") {

TEST_CASE("inception_v3: every layer's output shape at 299x299 matches torchvision's") {
    CHECK(default_image("inception_v3") == 299);
    CHECK(default_image("resnet50") == 224);
    CHECK(default_image("googlenet") == 224);
    SUBCASE("with AuxLogits") { check_every_layer(make_network(inception()), inception_v3_table(true)); }
    SUBCASE("without") { check_every_layer(make_network(inception(false)), inception_v3_table(false)); }
}

TEST_CASE("inception_v3: BasicConv2d, rectangular kernels, pools and heads as torchvision defines them") {
    const Network net = make_network(inception());
    const auto conv = [&](const std::string& name) { return std::get<Conv2d>(net.layer(net.layer_id(name)).spec); };
    const Conv2d c17 = conv("Mixed_6b.branch7x7_2.conv"), c71 = conv("Mixed_6b.branch7x7_3.conv");
    CHECK(c17.config.kernel == Size2{1, 7});
    CHECK(c17.config.pad == Size2{0, 3});
    CHECK(c17.parameters().front().shape == Shape4{128, 128, 1, 7});
    CHECK(c71.config.kernel == Size2{7, 1});
    CHECK(c71.config.pad == Size2{3, 0});
    CHECK(conv("Mixed_7c.branch3x3dbl_3a.conv").config.kernel == Size2{1, 3});
    CHECK(conv("Mixed_7c.branch3x3dbl_3b.conv").config.pad == Size2{1, 0});
    CHECK(conv("Mixed_7a.branch7x7x3_2.conv").config.kernel == Size2{1, 7});
    std::size_t convs = 0, batch_norms = 0;
    for (const LayerNode& l : net.layers()) {
        if (const auto* c = std::get_if<Conv2d>(&l.spec)) {
            ++convs;
            CAPTURE(l.name);
            CHECK_FALSE(c->config.bias);  // BasicConv2d: bias=False, then
            const LayerNode& next = net.layer(net.tensor(l.output).consumers.at(0).layer);
            REQUIRE(std::holds_alternative<BatchNorm2d>(next.spec));
            CHECK(std::get<BatchNorm2d>(next.spec).config.epsilon == 0.001f);  // BatchNorm2d(eps=0.001)
            ++batch_norms;
        }
    }
    CHECK(convs == 94 + 2);  // torchvision's 94 in the trunk, 2 in AuxLogits
    CHECK(batch_norms == convs);
    const auto pool = [&](const std::string& name) { return std::get<Pool2d>(net.layer(net.layer_id(name)).spec); };
    CHECK(pool("maxpool1").config.mode == PoolMode::max);
    CHECK_FALSE(pool("maxpool1").config.ceil_mode);  // nn.MaxPool2d(3, stride=2): floor
    CHECK(pool("Mixed_5b.avg_pool").config.mode == PoolMode::average);
    CHECK(pool("Mixed_5b.avg_pool").pad == 1);
    CHECK(pool("avgpool").config.global);
    CHECK(pool("AuxLogits.avgpool").config.global);
    CHECK(std::get<Dropout>(net.layer(net.layer_id("dropout")).spec).config.ratio == 0.5f);
    const std::vector<LayerId> losses = net.loss_layers();
    REQUIRE(losses.size() == 2);
    CHECK(net.layer(losses[0]).name == "AuxLogits.loss");
    CHECK(std::get<SoftmaxCrossEntropy>(net.layer(losses[0]).spec).config.weight == 0.4f);
    CHECK(std::get<SoftmaxCrossEntropy>(net.layer(losses[1]).spec).config.weight == 1.0f);
    // Forward multiply-adds of the convolutions and FCs: torchvision's "_ops"
    // of Inception_V3_Weights, 5.713 G (counted in eval mode: without AuxLogits).
    CHECK(conv_fc_macs_per_image(make_network(inception(false))) / 1e9 == doctest::Approx(5.713).epsilon(1e-4));
}

TEST_CASE("every layer's output shape at 224x224 matches the papers' tables") {
    SUBCASE("googlenet with auxiliary classifiers") {
        check_every_layer(make_network(config("googlenet")), googlenet_table(true));
    }
    SUBCASE("googlenet without") { check_every_layer(make_network(config("googlenet", false)), googlenet_table(false)); }
    for (std::uint32_t depth : {18u, 34u, 50u, 101u, 152u}) {
        CAPTURE(depth);
        check_every_layer(make_network(config("resnet" + std::to_string(depth))), resnet_table(depth));
    }
}

TEST_CASE("parameter counts equal the published ones (224x224, 1000 classes)") {
    // torchvision's model docs (num_params of the IMAGENET1K_V1 weights).
    CHECK(make_network(config("resnet18")).parameter_count() == 11'689'512);
    CHECK(make_network(config("resnet34")).parameter_count() == 21'797'672);
    CHECK(make_network(config("resnet50")).parameter_count() == 25'557'032);
    CHECK(make_network(config("resnet101")).parameter_count() == 44'549'160);
    CHECK(make_network(config("resnet152")).parameter_count() == 60'192'808);
    // BVLC Caffe GoogLeNet: deploy.prototxt (no auxiliary heads) 6,998,552,
    // train_val.prototxt (with both) 13,378,280.
    CHECK(make_network(config("googlenet", false)).parameter_count() == 6'998'552);
    CHECK(make_network(config("googlenet")).parameter_count() == 13'378'280);
    // torchvision's Inception_V3_Weights num_params (aux_logits=True) at 299x299;
    // less AuxLogits' conv0 (98,560), conv1 (2,459,136) and fc (769,000).
    CHECK(make_network(inception()).parameter_count() == 27'161'264);
    CHECK(make_network(inception(false)).parameter_count() == 23'834'568);
}

TEST_CASE("class count, width scale and batch") {
    NetConfig c = config("googlenet");
    c.classes = 10;
    c.width_scale = 0.5;
    const Network g = make_network(c);
    CHECK(g.classes() == 10);
    CHECK(output_of(g.layer(g.layer_id("conv1/7x7_s2")).spec).c == 32);
    CHECK(output_of(g.layer(g.layer_id("inception_3a/output")).spec).c == 32 + 64 + 16 + 16);
    CHECK(output_of(g.layer(g.layer_id("loss3/classifier")).spec).c == 10);  // classes are not scaled
    CHECK(g.loss_layers().size() == 3);

    NetConfig r = config("resnet50");
    r.width_scale = 0.25;
    r.batch = 5;
    const Network n = make_network(r);
    CHECK(n.batch() == 5);
    CHECK(output_of(n.layer(n.layer_id("avgpool")).spec).c == 512);  // 128 planes x 4
    CHECK(scaled_channels(16, 0.01) == 1);
}

TEST_CASE("other image sizes: shapes follow, impossible ones say why and what would work") {
    NetConfig c = config("googlenet", false);
    c.image = 32;
    const Network small = make_network(c);
    CHECK(output_of(small.layer(small.layer_id("inception_4e/output")).spec).h == 2);
    CHECK(output_of(small.layer(small.layer_id("inception_5b/output")).spec).h == 1);  // 2x2 -> 1x1: a clipped ceil-mode window
    CHECK(output_of(small.layer(small.layer_id("pool5/7x7_s1")).spec).h == 1);

    c.image = 300;
    CHECK(output_of(make_network(c).layers().back().spec).c == 1000);

    NetConfig aux = config("googlenet");
    aux.image = 32;
    const std::uint32_t with_aux = smallest_image(aux);
    aux.aux_classifiers = false;
    const std::uint32_t without = smallest_image(aux);
    CHECK(with_aux > without);
    aux.aux_classifiers = true;
    CHECK_THROWS_WITH_AS(make_network(aux), doctest::Contains("loss1/ave_pool"), ShapeError);
    const std::string hint = "the smallest image googlenet accepts is " + std::to_string(with_aux);
    CHECK_THROWS_WITH_AS(make_network(aux), doctest::Contains(hint.c_str()), ShapeError);
    aux.image = with_aux;
    CHECK_NOTHROW(make_network(aux));

    NetConfig tiny = config("googlenet", false);
    tiny.image = without - 1;
    CHECK_THROWS_WITH_AS(make_network(tiny), doctest::Contains("does not fit"), ShapeError);
}

TEST_CASE("inception_v3 at other sizes: AuxLogits needs 299x299, the trunk 75x75 (torchvision's min_size)") {
    NetConfig c = inception();
    CHECK(smallest_image(c) == 299);
    c.aux_classifiers = false;
    CHECK(smallest_image(c) == 75);
    c.image = 75;
    const Network small = make_network(c);
    CHECK(output_of(small.layer(small.layer_id("Mixed_6e.cat")).spec).h == 3);
    CHECK(output_of(small.layer(small.layer_id("Mixed_7c.cat")).spec).h == 1);
    c.image = 74;
    CHECK_THROWS_WITH_AS(make_network(c), doctest::Contains("the smallest image inception_v3 accepts is 75x75"),
                         ShapeError);
    NetConfig aux = inception();
    aux.image = 298;  // Mixed_6e is 16x16, the 5x5/3 pool gives 4x4 and conv1's 5x5 kernel does not fit
    CHECK_THROWS_WITH_AS(make_network(aux),
                         "network 'inception_v3', layer 'AuxLogits.conv1.conv': convolution: a 5x5 kernel with padding "
                         "0 does not fit a 4x4 input; the smallest image inception_v3 accepts is 299x299 (75x75 "
                         "without the auxiliary classifiers)",
                         ShapeError);
    aux.image = 512;
    CHECK(output_of(make_network(aux).layer(make_network(aux).layer_id("Mixed_7c.cat")).spec).h == 14);
}

TEST_CASE("bad network configurations name the problem") {
    NetConfig c = config("alexnet");
    CHECK_THROWS_WITH_AS(make_network(c), doctest::Contains("unknown network 'alexnet'"), ShapeError);
    c = config("resnet18");
    c.batch = 0;
    CHECK_THROWS_WITH_AS(make_network(c), doctest::Contains("at least one image"), ShapeError);
    c = config("resnet18");
    c.classes = 1;
    CHECK_THROWS_WITH_AS(make_network(c), doctest::Contains("at least 2 classes"), ShapeError);
    c = config("resnet18");
    c.width_scale = 0.0;
    CHECK_THROWS_WITH_AS(make_network(c), doctest::Contains("width scale"), ShapeError);
}

TEST_CASE("network builder checks: names, concat inputs, losses") {
    NetworkBuilder b("mini", Shape4{2, 3, 8, 8});
    const TensorId x = b.conv("conv", b.images(), ConvConfig{4, 3, 1, 1, 1, true});
    CHECK_THROWS_WITH_AS(b.relu("conv", x), doctest::Contains("layer 'conv': the name is already taken"), ShapeError);
    CHECK_THROWS_WITH_AS(b.add("bad_add", x, b.images()), doctest::Contains("layer 'bad_add'"), ShapeError);
    const TensorId r = b.relu("relu", x);
    const TensorId y = b.relu("relu2", x);
    b.concat("cat", {r, y});
    b.relu("relu3", r);  // r is read beside the concat: it cannot be a slice of it
    b.softmax_loss("loss", b.fully_connected("fc", r, FullyConnectedConfig{3, true}));
    CHECK_THROWS_WITH_AS(b.finish(), doctest::Contains("input 'relu' is also read by other layers"), ShapeError);

    NetworkBuilder nl("no_loss", Shape4{1, 1, 4, 4});
    nl.relu("r", nl.images());
    CHECK_THROWS_WITH_AS(nl.finish(), doctest::Contains("no softmax loss"), ShapeError);
}

TEST_CASE("fusing ReLUs into adds: only an add's unread output, once") {
    NetworkBuilder b("fuse_add", Shape4{2, 3, 8, 8});
    b.fuse_relu(true);
    const TensorId c = b.conv("conv", b.images(), ConvConfig{4, 3, 1, 1, 1, false});
    const TensorId d = b.conv("conv2", b.images(), ConvConfig{4, 3, 1, 1, 1, false});
    const TensorId sum = b.add("sum", c, d);
    CHECK(b.relu("relu", sum) == sum);  // the add took the ReLU on
    const TensorId again = b.relu("relu_again", sum);  // a ReLU of a ReLU's output: a layer
    CHECK(again != sum);
    const TensorId sum2 = b.add("sum2", c, d);
    const TensorId read = b.conv("reader", sum2, ConvConfig{4, 1, 1, 0, 1, false});
    const TensorId late = b.relu("late", sum2);  // sum2 is read already: not fused
    CHECK(late != sum2);
    b.softmax_loss("loss", b.fully_connected("fc", b.add("t", b.add("u", again, read), late),
                                             FullyConnectedConfig{3, true}));
    const Network net = b.finish();
    CHECK(std::get<Add>(net.layer(net.layer_id("sum")).spec).relu);
    CHECK_FALSE(std::get<Add>(net.layer(net.layer_id("sum2")).spec).relu);
    CHECK_FALSE(std::get<Add>(net.layer(net.layer_id("t")).spec).relu);
    CHECK_FALSE(net.find_layer("relu"));
    CHECK(net.find_layer("relu_again"));
    CHECK(net.find_layer("late"));
}

TEST_CASE("fusing ReLUs into batch norms: only a batch norm's unread output, once") {
    NetworkBuilder b("fuse", Shape4{2, 3, 8, 8});
    b.fuse_relu(true);
    const TensorId c = b.conv("conv", b.images(), ConvConfig{4, 3, 1, 1, 1, false});
    const TensorId bn = b.batch_norm("bn", c);
    const TensorId r = b.relu("relu", bn);
    CHECK(r == bn);  // no layer: the batch norm took the ReLU on
    const TensorId again = b.relu("relu_again", r);  // its output is a ReLU's already: a layer of its own
    CHECK(again != r);
    const TensorId bn2 = b.batch_norm("bn2", c);
    const TensorId read = b.add("read", bn2, bn2);
    const TensorId late = b.relu("late", bn2);  // bn2's raw output is read already: not fused
    CHECK(late != bn2);
    const TensorId not_bn = b.relu("not_bn", c);  // not a batch norm's output
    CHECK(not_bn != c);
    b.softmax_loss("loss", b.fully_connected("fc", b.add("sum", b.add("s", again, read), b.add("t", late, not_bn)),
                                             FullyConnectedConfig{3, true}));
    const Network net = b.finish();
    CHECK(std::get<BatchNorm2d>(net.layer(net.layer_id("bn")).spec).config.relu);
    CHECK_FALSE(std::get<BatchNorm2d>(net.layer(net.layer_id("bn2")).spec).config.relu);
    CHECK_FALSE(net.find_layer("relu"));
    CHECK(net.find_layer("relu_again"));
    CHECK(net.find_layer("late"));
    CHECK(net.find_layer("not_bn"));
}

TEST_CASE("fused nets: every ReLU after a batch norm or an add folds, the rest stays") {
    for (const char* name : {"resnet50", "inception_v3", "googlenet"}) {
        CAPTURE(name);
        NetConfig c = config(name);
        c.image = default_image(name);
        const Network plain = make_network(c);
        c.fuse_relu = true;
        const Network fused = make_network(c);
        std::size_t relus_after_bn = 0, relus_after_add = 0, fused_bns = 0, fused_adds = 0;
        for (const LayerNode& l : plain.layers()) {
            if (!std::holds_alternative<Relu>(l.spec) || !plain.tensor(l.inputs[0]).producer) continue;
            const LayerSpec& producer = plain.layer(*plain.tensor(l.inputs[0]).producer).spec;
            if (std::holds_alternative<BatchNorm2d>(producer)) ++relus_after_bn;
            if (std::holds_alternative<Add>(producer)) ++relus_after_add;
        }
        for (const LayerNode& l : fused.layers()) {
            if (const auto* bn = std::get_if<BatchNorm2d>(&l.spec); bn && bn->config.relu) ++fused_bns;
            if (const auto* a = std::get_if<Add>(&l.spec); a && a->relu) ++fused_adds;
        }
        CHECK(fused_bns == relus_after_bn);
        CHECK(fused_adds == relus_after_add);
        CHECK(fused.layers().size() == plain.layers().size() - relus_after_bn - relus_after_add);
        CHECK(fused.parameter_count() == plain.parameter_count());
        if (std::string(name) == "resnet50") {
            CHECK(relus_after_bn == 33);   // the stem and two per bottleneck
            CHECK(relus_after_add == 16);  // one per bottleneck: every ReLU of ResNet-50 folds
            for (const LayerNode& l : fused.layers()) CHECK_FALSE(std::holds_alternative<Relu>(l.spec));
        }
        if (std::string(name) == "inception_v3") CHECK(relus_after_bn == 96);  // one per BasicConv2d, AuxLogits' two included
        if (std::string(name) != "resnet50") CHECK(relus_after_add == 0);
        if (std::string(name) == "googlenet") CHECK(relus_after_bn == 0);  // no batch norm
    }
}

TEST_CASE("shared batch-norm sums: every batch norm shares, nothing else changes") {
    for (const char* name : {"resnet50", "inception_v3"}) {
        CAPTURE(name);
        NetConfig c = config(name);
        c.image = default_image(name);
        const Network plain = make_network(c);
        c.share_batch_norm_sums = true;
        const Network shared = make_network(c);
        REQUIRE(shared.layers().size() == plain.layers().size());
        std::size_t bns = 0, sharing = 0;
        for (const LayerNode& l : shared.layers())
            if (const auto* bn = std::get_if<BatchNorm2d>(&l.spec)) {
                ++bns;
                if (bn->config.share_sums && !bn->config.relu) ++sharing;
            }
        CHECK(bns > 50);
        CHECK(sharing == bns);
        for (const LayerNode& l : plain.layers())
            if (const auto* bn = std::get_if<BatchNorm2d>(&l.spec)) CHECK_FALSE(bn->config.share_sums);
        CHECK(shared.parameter_count() == plain.parameter_count());
    }
}

}  // TEST_SUITE
