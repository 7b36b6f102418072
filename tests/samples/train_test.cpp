// Training on the host with the serial runner: reduced-width GoogLeNet and
// ResNet-18 at 32x32 learn; split batches and repeated runs give the same
// bits; the weight comparison finds a difference and names it; one-ulp
// rounding differences per op stay within the GPU tests' bound.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "near_host.hpp"
#include "samples_test_util.hpp"
#include "train/host_model.hpp"
#include "train/net_settings.hpp"
#include "train/synthetic_data.hpp"
#include "train/training_loop.hpp"

using namespace samples_test;

namespace {

TrainConfig small(const std::string& net, std::uint64_t data_batches) {
    TrainConfig c;
    c.model.net = net;
    c.model.batch = 8;
    c.model.image = 32;
    c.model.classes = 10;
    c.model.width_scale = 0.25;
    c.model.aux_classifiers = false;  // the heads need 47x47 images or more
    c.optimizer = SgdConfig{0.01f, 0.9f, 5e-4f};
    c.seed = 1;
    c.data_batches = data_batches;
    return c;
}

std::vector<double> train(const TrainingGraph& tg, int iterations) {
    HostModel model(tg);
    std::vector<double> losses;
    for (int i = 0; i < iterations; ++i) {
        model.run_serial_iteration();
        losses.push_back(model.loss());
    }
    return losses;
}

double mean(const std::vector<double>& v, std::size_t from, std::size_t to) {
    return std::accumulate(v.begin() + static_cast<std::ptrdiff_t>(from), v.begin() + static_cast<std::ptrdiff_t>(to),
                           0.0) /
           static_cast<double>(to - from);
}

}  // namespace

TEST_SUITE("cpu") {

TEST_CASE("reduced-width GoogLeNet at 32x32 learns in 20 iterations") {
    // Without batch norm, a 22-layer GoogLeNet sits near chance on fresh
    // data for hundreds of steps (its auxiliary heads, which need larger
    // images, are what helps it in the paper); fitting one fixed batch
    // shows every gradient reaching the weights.
    const TrainingGraph tg = build_training_graph(small("googlenet", 1));
    const std::vector<double> loss = train(tg, 20);
    for (double l : loss) REQUIRE(std::isfinite(l));
    MESSAGE("googlenet losses: first " << loss.front() << ", last " << loss.back());
    CHECK(mean(loss, 15, 20) < 0.8 * mean(loss, 0, 3));
    CHECK(mean(loss, 15, 20) < std::log(10.0) - 0.4);  // well below chance
}

TEST_CASE("reduced-width ResNet-18 at 32x32 learns in 20 iterations") {
    const TrainingGraph tg = build_training_graph(small("resnet18", 2));
    const std::vector<double> loss = train(tg, 20);
    for (double l : loss) REQUIRE(std::isfinite(l));
    MESSAGE("resnet18 losses: first " << loss.front() << ", last " << loss.back());
    CHECK(mean(loss, 0, 3) > 0.5 * std::log(10.0));
    CHECK(mean(loss, 15, 20) < 0.5 * mean(loss, 0, 3));
}

TEST_CASE("split batches give the bits of whole batches on the sample nets") {
    TrainConfig g = small("googlenet", 0);
    g.model.aux_classifiers = true;  // dropout in the heads, five-way gradient sums
    g.model.image = smallest_image(g.model);
    g.model.width_scale = 0.125;
    g.model.batch = 4;
    TrainConfig r = small("resnet18", 0);
    r.model.batch = 4;
    for (const TrainConfig& c : {g, r}) {
        CAPTURE(c.model.net);
        const TrainingGraph tg = build_training_graph(c);
        HostModel whole(tg), parts(tg);
        SerialRunOptions split;
        split.parts = 3;
        for (int i = 0; i < 2; ++i) {
            whole.run_serial_iteration();
            parts.run_serial_iteration(split);
        }
        const WeightComparison cmp = compare_weights(whole, parts);
        CHECK_MESSAGE(cmp.identical, cmp.describe());
        CHECK(whole.loss() == parts.loss());
    }
}

TEST_CASE("ReLUs fused into batch norms and adds train to the bits of the separate layers") {
    TrainConfig r = small("resnet18", 0);
    r.model.batch = 4;
    TrainConfig v = small("inception_v3", 0);  // dropout before the classifier: its masks must not move
    v.model.image = smallest_image(v.model);
    v.model.width_scale = 0.125;
    v.model.batch = 2;
    for (TrainConfig c : {r, v}) {
        CAPTURE(c.model.net);
        const TrainingGraph plain = build_training_graph(c);
        c.model.fuse_relu = true;
        const TrainingGraph fused = build_training_graph(c);
        REQUIRE(fused.network.layers().size() < plain.network.layers().size());
        HostModel a(plain), b(fused);
        SerialRunOptions split;
        split.parts = 2;  // the ops around the fused ones split as before
        for (int i = 0; i < 2; ++i) {
            a.run_serial_iteration();
            b.run_serial_iteration(split);
        }
        CHECK(a.loss() == b.loss());
        // Every parameter and every state buffer (running statistics), by layer name.
        std::size_t compared = 0;
        for (const LayerNode& l : fused.network.layers()) {
            CAPTURE(l.name);
            const LayerBuffers& fb = fused.layers[fused.network.layer_id(l.name)];
            const LayerBuffers& pb = plain.layers[plain.network.layer_id(l.name)];
            REQUIRE(fb.params.size() == pb.params.size());
            REQUIRE(fb.aux.size() == pb.aux.size());
            for (std::size_t i = 0; i < fb.params.size(); ++i, ++compared)
                CHECK(same_bits(a.values(pb.params[i]), b.values(fb.params[i])));
            for (std::size_t i = 0; i < fb.aux.size(); ++i, ++compared)
                CHECK(same_bits(a.values(pb.aux[i]), b.values(fb.aux[i])));
        }
        CHECK(compared > 100);
    }
}

TEST_CASE("shared batch-norm sums train to the bits of two backward passes") {
    TrainConfig r = small("resnet18", 0);
    r.model.batch = 4;
    const TrainingGraph plain = build_training_graph(r);
    r.model.share_batch_norm_sums = true;
    const TrainingGraph shared = build_training_graph(r);
    REQUIRE(shared.graph.op_count() < plain.graph.op_count());  // no backward_weight op per batch norm
    HostModel a(plain), b(shared);
    for (int i = 0; i < 2; ++i) {
        a.run_serial_iteration();
        b.run_serial_iteration();
    }
    CHECK(std::isfinite(b.loss()));
    CHECK(b.loss() == a.loss());
    std::size_t compared = 0;
    for (LayerId l = 0; l < plain.layers.size(); ++l)
        for (std::size_t i = 0; i < plain.layers[l].params.size(); ++i, ++compared) {
            CAPTURE(plain.network.layer(l).name);
            CHECK(same_bits(b.values(shared.layers[l].params[i]), a.values(plain.layers[l].params[i])));
            CHECK(same_bits(b.values(shared.layers[l].momentum[i]), a.values(plain.layers[l].momentum[i])));
        }
    CHECK(compared > 50);
}

TEST_CASE("a profile's network settings say whether ReLUs are fused and sums shared, and rebuild that graph") {
    NetConfig c = small("resnet18", 0).model;
    for (int variant = 0; variant < 8; ++variant) {
        const bool fuse = (variant & 1) != 0, share = (variant & 2) != 0;
        const std::uint64_t bucket = (variant & 4) != 0 ? 20000 : 0;
        CAPTURE(fuse);
        CAPTURE(share);
        CAPTURE(bucket);
        c.fuse_relu = fuse;
        c.share_batch_norm_sums = share;
        c.update_bucket_bytes = bucket;
        const braid::ProfileSettings s = net_settings(c);
        CHECK(s.contains("fuse_relu") == fuse);  // profiles from before the options read as neither
        CHECK(s.contains("share_bn_sums") == share);
        CHECK(s.contains("update_bucket_bytes") == (bucket > 0));
        const std::optional<NetConfig> back = net_config_from_settings(s);
        REQUIRE(back);
        CHECK(back->fuse_relu == fuse);
        CHECK(back->share_batch_norm_sums == share);
        CHECK(back->update_bucket_bytes == bucket);
        TrainConfig tc;
        tc.model = *back;
        const TrainingGraph tg = build_training_graph(tc);
        CHECK(net_estimates(s, tg.graph));  // the fingerprint check passes for the graph the settings describe
        for (int flip = 0; flip < 3; ++flip) {
            TrainConfig other = tc;
            if (flip == 0) other.model.fuse_relu = !fuse;
            if (flip == 1) other.model.share_batch_norm_sums = !share;
            if (flip == 2) other.model.update_bucket_bytes = bucket > 0 ? 0 : 20000;
            CHECK_THROWS_WITH_AS(net_estimates(s, build_training_graph(other).graph),
                                 doctest::Contains("profile it again"), braid::ProfileError);
        }
    }
    braid::ProfileSettings bad = net_settings(c);
    bad["update_bucket_bytes"] = std::int64_t{-1};
    CHECK_THROWS_WITH_AS(net_config_from_settings(bad), doctest::Contains("'update_bucket_bytes' must be >= 0"),
                         braid::Error);

    // The kernels a profiled run used sit beside the network's settings: the same network, other kernels.
    braid::ProfileSettings kernels = net_settings(c);
    CHECK(!kernel_settings_from(kernels).conv_graph_api);
    CHECK(!kernel_settings_from(kernels).cudnn_batch_norm);
    kernels["conv_api"] = std::string("graph");
    kernels["batch_norm"] = std::string("cudnn");
    REQUIRE(net_config_from_settings(kernels));
    CHECK(net_config_from_settings(kernels)->net == c.net);
    CHECK(kernel_settings_from(kernels).conv_graph_api);
    CHECK(kernel_settings_from(kernels).cudnn_batch_norm);
    kernels["conv_api"] = std::string("legacy");
    CHECK(!kernel_settings_from(kernels).conv_graph_api);
    kernels["conv_api"] = std::string("frontend");
    CHECK_THROWS_WITH_AS(net_config_from_settings(kernels),
                         doctest::Contains("kernel setting 'conv_api' is 'frontend', not 'legacy' or 'graph'"),
                         braid::Error);
    kernels["conv_api"] = std::string("graph");
    kernels["batch_norm"] = std::string("fused");
    CHECK_THROWS_WITH_AS(kernel_settings_from(kernels),
                         doctest::Contains("kernel setting 'batch_norm' is 'fused', not 'own' or 'cudnn'"), braid::Error);
    CHECK(to_string(KernelSettings{true, false, false}) == "conv_api graph, batch_norm own, layout nchw");
    kernels["batch_norm"] = std::string("own");
    kernels["layout"] = std::string("nhwc");
    CHECK(kernel_settings_from(kernels).channels_last);
    CHECK(net_config_from_settings(kernels));
    kernels["layout"] = std::string("chwn");
    CHECK_THROWS_WITH_AS(kernel_settings_from(kernels),
                         doctest::Contains("kernel setting 'layout' is 'chwn', not 'nchw' or 'nhwc'"), braid::Error);
    kernels.erase("layout");
    kernels["conv_api"] = std::int64_t{1};
    CHECK_THROWS_WITH_AS(kernel_settings_from(kernels), "network setting 'conv_api' must be a string, got a whole number",
                         braid::Error);
    kernels.erase("conv_api");
    // A whole width scale is a number too, as JSON writes 1.0.
    kernels["width_scale"] = std::int64_t{2};
    REQUIRE(net_config_from_settings(kernels));
    CHECK(net_config_from_settings(kernels)->width_scale == 2.0);
    kernels["width_scale"] = std::int64_t{65};
    CHECK_THROWS_WITH_AS(net_config_from_settings(kernels), "network setting 'width_scale' must be from 1e-06 to 64, got 65",
                         braid::Error);
    kernels["width_scale"] = std::string("half");
    CHECK_THROWS_WITH_AS(net_config_from_settings(kernels),
                         "network setting 'width_scale' must be a number, got a string", braid::Error);
    kernels["width_scale"] = 0.5;
    kernels["batch"] = 4.5;
    CHECK_THROWS_WITH_AS(net_config_from_settings(kernels), "network setting 'batch' must be a whole number, got a number "
                                                            "with a fraction",
                         braid::Error);
}

TEST_CASE("weight comparison names the first differing tensor and index") {
    const TrainingGraph tg = build_training_graph(small("resnet18", 0));
    HostModel a(tg), b(tg);
    CHECK(compare_weights(a, b).identical);
    CHECK(compare_weights(a, b).describe().find("bitwise identical") == 0);
    const braid::BufferId w = tg.layers[tg.network.layer_id("layer2.0.conv1")].params[0];
    float* p = b.data<float>(w);
    std::uint32_t bits = 0;
    std::memcpy(&bits, p + 5, 4);
    bits ^= 1u;  // one ulp
    std::memcpy(p + 5, &bits, 4);
    const WeightComparison cmp = compare_weights(a, b);
    CHECK_FALSE(cmp.identical);
    CHECK(cmp.tensor == "layer2.0.conv1.weight");
    CHECK(cmp.index == 5);
    CHECK(cmp.describe().find("first difference: tensor 'layer2.0.conv1.weight' index 5") == 0);

    const TrainingGraph other = build_training_graph(small("googlenet", 0));
    HostModel c(other);
    CHECK_THROWS_WITH_AS(compare_weights(a, c), doctest::Contains("different graphs"), braid::Error);
}

TEST_CASE("seeded initialization and data") {
    TrainConfig c = small("resnet18", 2);
    const TrainingGraph tg = build_training_graph(c);
    c.seed = 2;
    const TrainingGraph other_seed = build_training_graph(c);
    HostModel a(tg), b(tg), d(other_seed);
    const braid::BufferId w = tg.layers[tg.network.layer_id("conv1")].params[0];
    CHECK(same_bits(a.values(w), b.values(w)));
    CHECK_FALSE(same_bits(a.values(w), d.values(w)));
    // He-uniform: |w| <= sqrt(6 / fan_in), fan_in = 3 * 7 * 7.
    for (float v : a.values(w)) REQUIRE(std::abs(v) <= std::sqrt(6.0f / 147.0f));
    // BN starts at gamma 1, beta 0, running variance 1.
    const LayerBuffers& bn = tg.layers[tg.network.layer_id("bn1")];
    CHECK(a.values(bn.params[0]).front() == 1.0f);
    CHECK(a.values(bn.params[1]).front() == 0.0f);
    CHECK(a.values(bn.aux[BatchNorm2d::running_var]).back() == 1.0f);

    // Iterations 0 and 2 train on the same batch of a 2-batch dataset.
    std::vector<std::vector<float>> images;
    std::vector<std::vector<std::int32_t>> labels;
    for (int i = 0; i < 3; ++i) {
        a.run_serial_iteration();
        images.push_back(a.values(tg.images));
        const std::int32_t* l = a.data<std::int32_t>(tg.labels);
        labels.emplace_back(l, l + 8);
        for (std::int32_t label : labels.back()) REQUIRE((label >= 0 && label < 10));
    }
    CHECK(same_bits(images[0], images[2]));
    CHECK(labels[0] == labels[2]);
    CHECK_FALSE(same_bits(images[0], images[1]));
    // The data op's bits are the formula's.
    CHECK(images[1][7] == synthetic_pixel(1, 1, 0, labels[1][0], 7, 3 * 32 * 32, 32 * 32));
    CHECK(a.step() == 3);
}

TEST_CASE("a failing body is reported with its op") {
    const TrainingGraph tg = build_training_graph(small("resnet18", 0));
    HostModel model(tg);
    std::vector<HostBody> bodies = model.bodies();
    const braid::OpId bad = tg.op("fc", OpRole::forward);
    bodies[bad] = [](const braid::OpContext&) { throw std::runtime_error("out of paper"); };
    CHECK_THROWS_WITH_AS(run_serial(tg.graph, bodies), "op 'fc.forward': out of paper", braid::ExecutionError);
    bodies.pop_back();
    CHECK_THROWS_AS(run_serial(tg.graph, bodies), braid::ExecutionError);
}

TEST_CASE("a loss that is not finite stops the training loop and fails the run") {
    for (const double bad : {std::nan(""), std::numeric_limits<double>::infinity()}) {
        CAPTURE(bad);
        int iterations = 0;
        TrainingLoop loop;
        loop.iterations = 5;
        loop.batch = 8;
        loop.iterate_ms = [&] { return ++iterations, 1.0; };
        loop.loss = [&] { return iterations == 2 ? bad : 2.3; };
        CHECK(run_training_loop(loop) == 1);
        CHECK(iterations == 2);
    }
    int iterations = 0;
    TrainingLoop fine;
    fine.iterations = 3;
    fine.batch = 8;
    fine.iterate_ms = [&] { return ++iterations, 1.0; };
    fine.loss = [] { return 2.3; };
    CHECK(run_training_loop(fine) == 0);
    CHECK(iterations == 3);
}

TEST_CASE("a step larger than the machine's memory is refused before the host backend allocates it") {
    TrainConfig huge = small("resnet18", 0);
    huge.model.batch = 1u << 20;
    huge.model.image = 1024;
    huge.model.width_scale = 1.0;
    const TrainingGraph tg = build_training_graph(huge);
    REQUIRE(tg.allocated_bytes() > (std::uint64_t{1} << 50));  // a petabyte: more than any host
    CHECK_THROWS_WITH_AS(HostModel{tg}, doctest::Contains("GiB for the training step's buffers, more than the"),
                         braid::Error);
}

// The argument behind gpu_train_test.cpp's bound, checked without a GPU: two
// steps of the reference with every op's results one ulp off (another
// implementation's rounding) stay far inside the bound for the GPU tests'
// configurations, Inception-v3's weights do not (only its loss does), and
// ResNet-18 at 32x32 shows why they are not 32x32.
TEST_CASE("rounding differences per op stay within the GPU tests' bound on their nets, not on ResNet-18 at 32x32") {
    for (const TrainConfig& config : near_host_configs()) {
        CAPTURE(config.model.net);
        CAPTURE(config.model.image);
        const TrainingGraph tg = build_training_graph(config);
        HostModel reference(tg);
        for (int i = 0; i < 2; ++i) reference.run_serial_iteration();
        const NearCount c = count_near(train_with_rounding_noise(tg, 2), snapshot_weights(reference));
        CAPTURE(c.worst);
        CHECK(c.near());
        CHECK(c.beyond_loose == 0);
        // A tenth of the 0.1% the bound allows: room for a GPU that rounds by more than an ulp.
        CHECK(c.beyond_tight * 10000 <= c.elements);
        MESSAGE(config.model.net << " at " << config.model.image << "x" << config.model.image << ": " << c.beyond_tight
                                 << " of " << c.elements << " beyond the tight bound");
    }
    // Inception-v3: the first loss well inside the GPU tests' 1e-4, its weights after a step not near.
    {
        const TrainingGraph tg = build_training_graph(near_host_config("inception_v3"));
        HostModel reference(tg);
        reference.run_serial_iteration();
        double loss = 0.0;
        const NearCount c = count_near(train_with_rounding_noise(tg, 1, &loss), snapshot_weights(reference));
        MESSAGE("inception_v3 at 107x107: first loss " << loss << " against " << reference.loss() << "; after one step "
                                                      << c.beyond_loose << " of " << c.elements
                                                      << " weight elements beyond the loose bound");
        CHECK(std::abs(loss - reference.loss()) <= 1e-5 * std::abs(reference.loss()));
        CHECK(c.beyond_loose * 100 > c.elements);  // 3.7 %, where the bound allows none
        CHECK_FALSE(c.near());
    }
    TrainConfig ill = near_host_config("resnet18");
    ill.model.image = 32;
    const TrainingGraph tg = build_training_graph(ill);
    HostModel reference(tg);
    for (int i = 0; i < 2; ++i) reference.run_serial_iteration();
    const NearCount c = count_near(train_with_rounding_noise(tg, 2), snapshot_weights(reference));
    MESSAGE("resnet18 at 32x32: " << c.beyond_tight << " of " << c.elements << " beyond the tight bound, "
                                  << c.beyond_loose << " beyond the loose one");
    CHECK(c.beyond_tight * 100 > c.elements);  // over 1%: the H200's CudaModel was at 8.3% here
    CHECK_FALSE(c.near());
}

}  // TEST_SUITE
