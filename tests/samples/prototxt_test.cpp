// The Caffe prototxt reader: the project's GoogLeNet and ResNet-50
// prototxts (samples/caffe/models, Caffe's conventions) give the same
// networks and training graphs as the bundled C++ builders, the command
// line's batch, image and classes replace the file's, the legacy format
// reads like the current one, nothing is dropped without a note, and bad
// files fail naming the file, line and layer.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "caffe/prototxt.hpp"
#include "error_of.hpp"
#include "nets/zoo.hpp"
#include "train/training_graph.hpp"

using namespace braid::samples;
using braid::testing::error_of;

namespace {

const std::string models = std::string(BRAID_SOURCE_DIR) + "/samples/caffe/models/";

std::string fingerprint(Network net) {
    return build_training_graph(std::move(net), SgdConfig{}, 1).graph.fingerprint();
}

bool same_float(float a, float b) { return std::fabs(a - b) <= 1e-6f * std::max(1.0f, std::fabs(a)); }

// Layer by layer: name, kind, inputs by name, output shape and the settings
// that change the arithmetic.
void check_same_layers(const Network& got, const Network& want) {
    REQUIRE(got.layers().size() == want.layers().size());
    CHECK(got.input_shape() == want.input_shape());
    for (std::size_t i = 0; i < want.layers().size(); ++i) {
        const LayerNode& g = got.layers()[i];
        const LayerNode& w = want.layers()[i];
        CAPTURE(w.name);
        REQUIRE(g.name == w.name);
        CHECK(kind_of(g.spec) == kind_of(w.spec));
        CHECK(output_of(g.spec) == output_of(w.spec));
        REQUIRE(g.inputs.size() == w.inputs.size());
        for (std::size_t k = 0; k < w.inputs.size(); ++k)
            CHECK(got.tensor(g.inputs[k]).name == want.tensor(w.inputs[k]).name);
        if (auto* c = std::get_if<Conv2d>(&w.spec)) {
            const ConvConfig& gc = std::get<Conv2d>(g.spec).config;
            CHECK(gc.kernel == c->config.kernel);
            CHECK(gc.stride == c->config.stride);
            CHECK(gc.pad == c->config.pad);
            CHECK(gc.groups == c->config.groups);
            CHECK(gc.bias == c->config.bias);
            CHECK(gc.weight_init == c->config.weight_init);
            CHECK(gc.bias_init == c->config.bias_init);
        } else if (auto* p = std::get_if<Pool2d>(&w.spec)) {
            const PoolConfig& gp = std::get<Pool2d>(g.spec).config;
            CHECK(gp.kernel == p->config.kernel);
            CHECK(gp.stride == p->config.stride);
            CHECK(gp.pad == p->config.pad);
            CHECK(gp.ceil_mode == p->config.ceil_mode);
            CHECK(gp.global == p->config.global);
        } else if (auto* b = std::get_if<BatchNorm2d>(&w.spec)) {
            const BatchNormConfig& gb = std::get<BatchNorm2d>(g.spec).config;
            CHECK(same_float(gb.epsilon, b->config.epsilon));
            CHECK(same_float(gb.momentum, b->config.momentum));
        } else if (auto* l = std::get_if<Lrn>(&w.spec)) {
            const LrnConfig& gl = std::get<Lrn>(g.spec).config;
            CHECK(gl.size == l->config.size);
            CHECK(gl.alpha == l->config.alpha);
            CHECK(gl.beta == l->config.beta);
            CHECK(gl.k == l->config.k);
        } else if (auto* d = std::get_if<Dropout>(&w.spec)) {
            CHECK(std::get<Dropout>(g.spec).config.ratio == d->config.ratio);
        } else if (auto* s = std::get_if<SoftmaxCrossEntropy>(&w.spec)) {
            CHECK(std::get<SoftmaxCrossEntropy>(g.spec).config.weight == s->config.weight);
        } else if (auto* f = std::get_if<FullyConnected>(&w.spec)) {
            CHECK(std::get<FullyConnected>(g.spec).config.bias == f->config.bias);
        }
    }
    CHECK(got.parameter_count() == want.parameter_count());
    CHECK(got.classes() == want.classes());
}

NetConfig bundled(const std::string& net, std::uint32_t batch, std::uint32_t image, std::uint32_t classes) {
    NetConfig c;
    c.net = net;
    c.batch = batch;
    c.image = image;
    c.classes = classes;
    return c;
}

bool has_note(const PrototxtNet& p, const std::string& part) {
    for (const std::string& n : p.notes)
        if (n.find(part) != std::string::npos) return true;
    return false;
}

PrototxtNet parse(const std::string& text, const PrototxtOptions& o = {}) { return parse_prototxt(text, "net.prototxt", o); }

// A small net in the current format, and the same net in the legacy one.
const char* small_current = R"(name: "small"
input: "data"
input: "label"
input_shape { dim: 2 dim: 3 dim: 16 dim: 16 }
input_shape { dim: 2 }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
        convolution_param { num_output: 8 kernel_size: 3 pad: 1 weight_filler { type: "xavier" } } }
layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" }
layer { name: "pool" type: "Pooling" bottom: "conv" top: "pool" pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "fc" type: "InnerProduct" bottom: "pool" top: "fc" inner_product_param { num_output: 5 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "fc" bottom: "label" top: "loss" }
)";

const char* small_legacy = R"(name: "small"
input: "data"
input: "label"
input_dim: 2 input_dim: 3 input_dim: 16 input_dim: 16
input_dim: 2 input_dim: 1 input_dim: 1 input_dim: 1
layers { name: "conv" type: CONVOLUTION bottom: "data" top: "conv" blobs_lr: 1 blobs_lr: 2
         convolution_param { num_output: 8 kernel_size: 3 pad: 1 weight_filler { type: "xavier" } } }
layers { name: "relu" type: RELU bottom: "conv" top: "conv" }
layers { name: "pool" type: POOLING bottom: "conv" top: "pool" pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layers { name: "fc" type: INNER_PRODUCT bottom: "pool" top: "fc" inner_product_param { num_output: 5 } }
layers { name: "loss" type: SOFTMAX_LOSS bottom: "fc" bottom: "label" top: "loss" }
)";

// `text` with the first `replace` replaced by `with`.
std::string replaced(std::string text, const std::string& replace, const std::string& with) {
    const auto at = text.find(replace);
    REQUIRE(at != std::string::npos);
    return text.replace(at, replace.size(), with);
}

std::string small_with(const std::string& replace, const std::string& with) {
    return replaced(small_current, replace, with);
}

}  // namespace

TEST_CASE("the project's GoogLeNet prototxt is braid's GoogLeNet, same training graph") {
    const PrototxtNet p = read_prototxt(models + "googlenet.prototxt");
    const Network want = make_network(bundled("googlenet", 32, 224, 1000));
    CHECK(p.network.name() == "GoogleNet");
    check_same_layers(p.network, want);
    CHECK(p.network.parameter_count() == 13378280);  // BVLC GoogLeNet with both auxiliary heads
    CHECK(fingerprint(p.network) == fingerprint(want));
}

TEST_CASE("the project's ResNet-50 prototxt is braid's ResNet-50, same training graph") {
    const PrototxtNet p = read_prototxt(models + "resnet50.prototxt");
    const Network want = make_network(bundled("resnet50", 32, 224, 1000));
    check_same_layers(p.network, want);
    CHECK(p.network.parameter_count() == 25557032);  // torchvision's resnet50
    CHECK(fingerprint(p.network) == fingerprint(want));
}

TEST_CASE("--batch, --image and --classes replace the file's") {
    PrototxtOptions o;
    o.batch = 4;
    o.image = 160;
    o.classes = 10;
    for (const char* net : {"googlenet", "resnet50"}) {
        CAPTURE(net);
        const PrototxtNet p = read_prototxt(models + net + ".prototxt", o);
        const Network want = make_network(bundled(net, 4, 160, 10));
        check_same_layers(p.network, want);
        CHECK(fingerprint(p.network) == fingerprint(want));
    }
}

TEST_CASE("what is not carried over is noted once, with a count and the first line") {
    const PrototxtNet p = read_prototxt(models + "googlenet.prototxt");
    CHECK(has_note(p, "skipped: layers of the TEST phase only"));
    // Two `param { lr_mult decay_mult }` blocks on each of 59 convolutions and 5 InnerProducts.
    CHECK(has_note(p, "ignored: field 'param' of LayerParameter (braid does not read it) (128 times, first on line 48)"));
    CHECK(has_note(p, "ignored: field 'accuracy_param' of LayerParameter"));
    CHECK(has_note(p, "ignored: field 'mean_file' of TransformationParameter"));
    CHECK(has_note(p, "ignored: field 'source' of DataParameter"));
    CHECK(has_note(p, "the channel count comes from the database"));
    CHECK(has_note(p, "InnerProduct fillers are not read"));
    for (const std::string& n : p.notes) CHECK(n.find("ignored: field 'param'") == n.rfind("ignored: field 'param'"));

    const PrototxtNet r = read_prototxt(models + "resnet50.prototxt");
    CHECK(has_note(r, "each BatchNorm + Scale pair is one braid batch norm"));
    CHECK(has_note(r, "weight_filler \"msra\""));
}

TEST_CASE("the legacy `layers { type: ENUM }` format reads like the current one") {
    const PrototxtNet current = parse(small_current);
    const PrototxtNet legacy = parse(small_legacy);
    check_same_layers(legacy.network, current.network);
    CHECK(fingerprint(legacy.network) == fingerprint(current.network));
    CHECK(legacy.network.input_shape() == Shape4{2, 3, 16, 16});
    CHECK(has_note(legacy, "ignored: field 'blobs_lr' of V1LayerParameter"));
}

TEST_CASE("Accuracy layers of the TRAIN phase are skipped with a note") {
    const PrototxtNet p = parse(std::string(small_current) +
                                R"(layer { name: "acc" type: "Accuracy" bottom: "fc" bottom: "label" top: "acc" })");
    CHECK(p.network.layers().size() == 5);
    CHECK(has_note(p, "skipped: Accuracy layers (they measure, they do not train) (line 12)"));
}

TEST_CASE("a deploy net's Softmax output is trained as SoftmaxWithLoss, with a note") {
    const PrototxtNet p = parse(small_with(R"(layer { name: "loss" type: "SoftmaxWithLoss" bottom: "fc" bottom: "label" top: "loss" })",
                                           R"(layer { name: "prob" type: "Softmax" bottom: "fc" top: "prob" })"));
    REQUIRE(p.network.loss_layers().size() == 1);
    CHECK(p.network.layers()[p.network.loss_layers()[0]].name == "prob");
    CHECK(has_note(p, "layer 'prob' (Softmax) is the net's output and it has no loss"));
}

TEST_CASE("rectangular convolution kernels and pads: kernel_h/kernel_w, pad_h/pad_w, or two values") {
    for (const char* conv : {"kernel_h: 3 kernel_w: 1 pad_h: 1 pad_w: 0", "kernel_size: 3 kernel_size: 1 pad: 1 pad: 0"}) {
        CAPTURE(conv);
        const PrototxtNet p = parse(small_with("kernel_size: 3 pad: 1", conv));
        const Conv2d& c = std::get<Conv2d>(p.network.layer(p.network.layer_id("conv")).spec);
        CHECK(c.config.kernel == Size2{3, 1});
        CHECK(c.config.pad == Size2{1, 0});
        CHECK(c.out == Shape4{2, 8, 16, 16});
        CHECK(c.parameters().front().shape == Shape4{8, 3, 3, 1});
    }
    // A 1x7 kernel without padding narrows the width only.
    const PrototxtNet p = parse(small_with("kernel_size: 3 pad: 1", "kernel_h: 1 kernel_w: 7"));
    CHECK(output_of(p.network.layer(p.network.layer_id("conv")).spec) == Shape4{2, 8, 16, 10});
}

TEST_CASE("bad prototxts fail naming the file, the line and the layer") {
    CHECK(error_of([] { parse(std::string(small_current).substr(0, 300)); }) ==
          "net.prototxt:8:20: Unexpected end of string.");  // truncated (in protobuf's words)
    CHECK(error_of([] { parse(small_with("\"ReLU\"", "\"Sigmoid\"")); }) ==
          "net.prototxt:8: layer 'relu' (Sigmoid): braid does not train this layer type; it reads Input, Data, "
          "ImageData, Convolution, Pooling, LRN, ReLU, BatchNorm + Scale, Eltwise (SUM), Concat, InnerProduct, "
          "Dropout, Split, Softmax, SoftmaxWithLoss and skips Accuracy");
    CHECK(error_of([] { parse(small_with("bottom: \"pool\" top: \"fc\"", "bottom: \"pol\" top: \"fc\"")); }) ==
          "net.prototxt:10: layer 'fc' (InnerProduct): no earlier layer has a top named 'pol'");
    CHECK(error_of([] { parse(small_with("bottom: \"data\" top: \"conv\"", "bottom: \"pool\" top: \"conv\"")); }) ==
          "net.prototxt:6: layer 'conv' (Convolution): bottom 'pool' is produced only by layer 'pool' on line 9, "
          "which comes later; Caffe runs layers in file order, so the net has a cycle or its layers are out of order");
    CHECK(error_of([] {
              parse(small_with("layer { name: \"fc\"",
                               "layer { name: \"sum\" type: \"Eltwise\" bottom: \"conv\" bottom: \"pool\" top: \"sum\" }\n"
                               "layer { name: \"fc\""));
          }) == "net.prototxt:10: network 'small', layer 'sum': add: input shapes 2x8x16x16 and 2x8x8x8 differ");
    CHECK(error_of([] { parse(small_with("\"ReLU\" bottom: \"conv\"", "\"BatchNorm\" bottom: \"conv\"")); }) ==
          "net.prototxt:9: layer 'pool' (Pooling): reads the top of BatchNorm 'relu' before a Scale does; braid's "
          "batch norm learns a scale and a shift, so a BatchNorm must be followed by a Scale layer with "
          "`bias_term: true` that reads its top");
    CHECK(error_of([] { parse(small_with("kernel_size: 3 pad: 1", "kernel_size: 3 pad: 2 dilation: 2")); }) ==
          "net.prototxt:6: layer 'conv' (Convolution): dilation 2: braid's convolutions are not dilated (dilation 1 "
          "only)");
    CHECK(error_of([] { parse(small_with("kernel_size: 3 pad: 1", "kernel_size: 3 pad: 1 stride_h: 2 stride_w: 1")); }) ==
          "net.prototxt:6: layer 'conv' (Convolution): stride_h 2 differs from stride_w 1; braid's convolution strides "
          "are square");
    CHECK(error_of([] { parse(small_with("kernel_size: 2 stride: 2", "kernel_h: 2 kernel_w: 3 stride: 2")); }) ==
          "net.prototxt:9: layer 'pool' (Pooling): kernel_h 2 differs from kernel_w 3; braid's pooling windows are "
          "square");
    CHECK(error_of([] { parse(small_with("kernel_size: 3 pad: 1", "kernel_h: 3 pad: 1")); }) ==
          "net.prototxt:6: layer 'conv' (Convolution): sets only one of kernel_h and kernel_w");
    CHECK(error_of([] { parse(small_with("bottom: \"fc\" bottom: \"label\"", "bottom: \"fc\" bottom: \"pool\"")); }) ==
          "net.prototxt:11: layer 'loss' (SoftmaxWithLoss): second bottom 'pool' is not the labels of the net's input");
    CHECK(error_of([] {
              parse(small_with(R"(layer { name: "loss" type: "SoftmaxWithLoss" bottom: "fc" bottom: "label" top: "loss" })", ""));
          }) == "net.prototxt: network 'small' has no softmax loss layer to train against");
    CHECK(error_of([] { parse(small_with("layer { name: \"loss\"", "layer { name: \"relu\"")); }) ==
          "net.prototxt:11: network 'small', layer 'relu': the name is already taken");
    CHECK(error_of([] { parse(small_with("bottom: \"conv\" top: \"conv\" }", "bottom: \"r\" top: \"r\" }")); }) ==
          "net.prototxt:8: layer 'relu' (ReLU): reads its own top 'r', which no earlier layer produces");
    CHECK(error_of([] {
              parse(small_with("layer { name: \"pool\" type: \"Pooling\" bottom: \"conv\"",
                               "layer { name: \"bn\" type: \"BatchNorm\" bottom: \"conv\" top: \"bn\" }\n"
                               "layer { name: \"sc\" type: \"Scale\" bottom: \"bn\" top: \"sc\" scale_param { bias_term: true } }\n"
                               "layer { name: \"pool\" type: \"Pooling\" bottom: \"bn\""));
          }) == "net.prototxt:11: layer 'pool' (Pooling): bottom 'bn' is the top of layer 'bn' (BatchNorm, line 9), "
                "which braid folds into the layer after it or skips; read that layer's top instead");
    CHECK(error_of([] { parse(""); }) == "net.prototxt: no layers (not a Caffe net?)");
    CHECK(error_of([] { parse("layer { name: \"a\" type: \"ReLU\" bottom: \"x\" top: \"x\" }"); }) ==
          "net.prototxt:1: layer 'a' (ReLU): comes before the net's input (an Input, Data or ImageData layer, or "
          "`input:`)");
    CHECK(error_of([] { read_prototxt("/nonexistent/net.prototxt"); }) ==
          "cannot read prototxt '/nonexistent/net.prototxt': no such file or no permission");
    CHECK(error_of([] { read_prototxt(models); }).find("it is a folder, not a file") != std::string::npos);
}

TEST_CASE("numbers past braid's limits are refused naming the field, before anything overflows") {
    CHECK(error_of([] { parse(small_with("num_output: 8", "num_output: 4000000000")); }) ==
          "net.prototxt:6: layer 'conv' (Convolution): num_output 4000000000 is more than 1048576, braid's limit");
    CHECK(error_of([] { parse(small_with("kernel_size: 3 pad: 1", "kernel_size: 3 pad: 70000")); }) ==
          "net.prototxt:6: layer 'conv' (Convolution): pad 70000 is more than 65535, braid's limit");
    CHECK(error_of([] { parse(small_with("kernel_size: 2 stride: 2", "kernel_size: 2 stride: 2 pad: 2")); }) ==
          "net.prototxt:9: layer 'pool' (Pooling): pad 2 must be less than the kernel 2 (Caffe's rule too: a window "
          "must not lie wholly in the padding)");
    CHECK(error_of([] {
              parse(small_with("dim: 2 dim: 3 dim: 16 dim: 16", "dim: 16777216 dim: 16777216 dim: 16777216 dim: 16777216"));
          }) == "net.prototxt:2: layer 'data' (input): the input 16777216x16777216x16777216x16777216 has a batch of "
                "16777216, more than 1048576, braid's limit (as for --batch)");
    // The input is held to --batch's and --image's limits, after they apply.
    CHECK(error_of([] { parse(small_with("dim: 2 dim: 3 dim: 16 dim: 16", "dim: 2 dim: 3 dim: 100000 dim: 16")); }) ==
          "net.prototxt:2: layer 'data' (input): the input 2x3x100000x16 is larger than 8192 pixels on a side, "
          "braid's limit (as for --image)");
    PrototxtOptions small_image;
    small_image.image = 16;
    CHECK(parse(small_with("dim: 2 dim: 3 dim: 16 dim: 16", "dim: 2 dim: 3 dim: 100000 dim: 16"), small_image)
              .network.input_shape() == Shape4{2, 3, 16, 16});
    CHECK(error_of([] { parse(small_with("dim: 2 dim: 3 dim: 16 dim: 16", "dim: 2 dim: 2000000 dim: 16 dim: 16")); }) ==
          "net.prototxt:2: layer 'data' (input): the input 2x2000000x16x16 has more than 1048576 channels, braid's "
          "limit");
    const std::string data_layer =
        "name: \"d\"\nlayer { name: \"data\" type: \"Data\" top: \"data\" top: \"label\" "
        "transform_param { crop_size: 16 } data_param { batch_size: 2000000 } }\n" +
        std::string(small_current).substr(std::string(small_current).find("layer {"));
    CHECK(error_of([&] { parse(data_layer); }) ==
          "net.prototxt:2: layer 'data' (Data): the input 2000000x3x16x16 has a batch of 2000000, more than 1048576, "
          "braid's limit (as for --batch)");
    CHECK(error_of([] {
              parse(replaced(small_with("dim: 2 dim: 3 dim: 16 dim: 16", "dim: 1024 dim: 3 dim: 1024 dim: 1024"),
                             "num_output: 8", "num_output: 2048"));
          }) == "net.prototxt:6: layer 'conv' (Convolution): its output 1024x2048x1024x1024 has more than 2^40 elements, "
                "braid's limit for one tensor");
}

TEST_CASE("layer constants that are not finite are refused naming the field, before training turns to NaN") {
    CHECK(error_of([] { parse(small_with("top: \"loss\" }", "top: \"loss\" loss_weight: inf }")); }) ==
          "net.prototxt:11: layer 'loss' (SoftmaxWithLoss): loss_weight must be a finite number > 0, got inf");
    CHECK(error_of([] { parse(small_with("top: \"loss\" }", "top: \"loss\" loss_weight: nan }")); }) ==
          "net.prototxt:11: layer 'loss' (SoftmaxWithLoss): loss_weight must be a finite number > 0, got nan");
    CHECK(error_of([] { parse(small_with("top: \"loss\" }", "top: \"loss\" loss_weight: 1 loss_weight: 2 }")); }) ==
          "net.prototxt:11: layer 'loss' (SoftmaxWithLoss): loss_weight is given 2 times; braid's loss has one top, "
          "so one weight");
    CHECK(error_of([] { parse(small_with("top: \"fc\"", "top: \"fc\" loss_weight: 0.5")); }) ==
          "net.prototxt:10: layer 'fc' (InnerProduct): loss_weight 0.5: braid's loss is its SoftmaxWithLoss layer; no "
          "other layer's top adds to it");
    // Caffe's default for a layer that is not a loss: accepted, it changes nothing.
    CHECK(fingerprint(parse(small_with("top: \"fc\"", "top: \"fc\" loss_weight: 0")).network) ==
          fingerprint(parse(small_current).network));
    CHECK(error_of([] {
              parse(small_with("weight_filler { type: \"xavier\" }",
                               "weight_filler { type: \"xavier\" } bias_filler { type: \"constant\" value: -inf }"));
          }) == "net.prototxt:6: layer 'conv' (Convolution): bias_filler's value must be finite, got -inf");
    const auto lrn = [](const std::string& params) {
        return small_with("layer { name: \"pool\"",
                          "layer { name: \"norm\" type: \"LRN\" bottom: \"conv\" top: \"conv\" lrn_param { " + params +
                              " } }\nlayer { name: \"pool\"");
    };
    CHECK(parse(lrn("local_size: 5 alpha: 0.0001 beta: 0.75")).network.layers().size() == 6);
    CHECK(error_of([&] { parse(lrn("local_size: 5 alpha: nan")); }) ==
          "net.prototxt:9: network 'small', layer 'norm': lrn: alpha must be a finite number >= 0, got nan");
    CHECK(error_of([&] { parse(lrn("local_size: 5 alpha: -1")); }) ==
          "net.prototxt:9: network 'small', layer 'norm': lrn: alpha must be a finite number >= 0, got -1");
    CHECK(error_of([&] { parse(lrn("local_size: 5 beta: inf")); }) ==
          "net.prototxt:9: network 'small', layer 'norm': lrn: beta must be a finite number, got inf");
    CHECK(error_of([&] { parse(lrn("local_size: 5 k: inf")); }) ==
          "net.prototxt:9: network 'small', layer 'norm': lrn: k must be a finite number > 0, got inf");
    const auto batch_norm = [](const std::string& eps) {
        return small_with("layer { name: \"relu\"",
                          "layer { name: \"bn\" type: \"BatchNorm\" bottom: \"conv\" top: \"conv\" batch_norm_param { "
                          "eps: " + eps + " } }\nlayer { name: \"sc\" type: \"Scale\" bottom: \"conv\" top: \"conv\" "
                          "scale_param { bias_term: true } }\nlayer { name: \"relu\"");
    };
    CHECK(parse(batch_norm("0.00001")).network.layers().size() == 6);
    CHECK(error_of([&] { parse(batch_norm("inf")); }) ==
          "net.prototxt:8: layer 'bn' (BatchNorm): eps must be a finite number > 0, got inf");
    CHECK(error_of([&] { parse(batch_norm("nan")); }) ==
          "net.prototxt:8: layer 'bn' (BatchNorm): eps must be a finite number > 0, got nan");
    CHECK(error_of([&] { parse(batch_norm("-1e-9")); }) ==
          "net.prototxt:8: layer 'bn' (BatchNorm): eps must be a finite number > 0, got -1e-09");
}

TEST_CASE("the fuzz corpus and regressions of the prototxt reader load, or are refused with a braid::Error") {
    // tools/fuzz/run prototxt fuzzes the reader; inputs it found are kept
    // under regressions/ and run here in every build.
    std::size_t loaded = 0;
    for (const char* kind : {"corpus", "regressions"}) {
        const std::filesystem::path dir = std::filesystem::path(BRAID_SOURCE_DIR) / "tools/fuzz" / kind / "prototxt";
        if (!std::filesystem::is_directory(dir)) continue;
        for (const auto& e : std::filesystem::directory_iterator(dir)) {
            CAPTURE(e.path().string());
            try {
                const PrototxtNet p = read_prototxt(e.path().string());
                (void)build_training_graph(p.network, SgdConfig{}, 1);
                ++loaded;
            } catch (const braid::Error&) {
                CHECK(std::string(kind) == "regressions");  // the corpus holds valid nets
            }
        }
    }
    CHECK(loaded >= 2);
}
