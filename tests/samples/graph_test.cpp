// The training step as an OpGraph: op metadata, split markers, hazards,
// concat views and gradient sums. A mini network with an inception-like
// module and a residual connection is trained one iteration through its
// graph and recomputed by hand from the reference layers with a copying
// concat and explicit sums: every gradient must agree bit for bit.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <map>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "braid/exec/executor.hpp"
#include "braid/exec/host.hpp"
#include "braid/model/device_table.hpp"
#include "braid/model/estimate.hpp"
#include "braid/planner/calibration_table.hpp"
#include "braid/planner/make_plan.hpp"
#include "nn/gradient_sum.hpp"
#include "samples_test_util.hpp"
#include "train/host_model.hpp"
#include "train/conv_census.hpp"
#include "train/training_graph.hpp"

using namespace samples_test;
using braid::OpId;

namespace {

constexpr std::uint32_t N = 3;

Network mini_network() {
    NetworkBuilder b("mini", Shape4{N, 3, 6, 6});
    const TensorId stem = b.relu("stem_relu", b.conv("stem", b.images(), ConvConfig{4, 3, 1, 1, 1, true}));
    const TensorId n = b.lrn("norm", stem, LrnConfig{3, 0.5f, 0.75f, 2.0f});
    const TensorId a = b.relu("a_relu", b.conv("a", n, ConvConfig{2, 1, 1, 0, 1, true}));
    const TensorId bb = b.relu("b_relu", b.conv("b", n, ConvConfig{3, 3, 1, 1, 1, true}));
    const TensorId cp = b.pool("c_pool", n, PoolConfig{PoolMode::max, 3, 1, 1, true, false});
    const TensorId c = b.relu("c_relu", b.conv("c", cp, ConvConfig{2, 1, 1, 0, 1, true}));
    const TensorId mix = b.concat("mix", {a, bb, c});
    const TensorId r = b.batch_norm("r_bn", b.conv("r", mix, ConvConfig{7, 3, 1, 1, 1, false}));
    const TensorId res = b.relu("res_relu", b.add("res_add", r, mix));
    const TensorId gap = b.pool("gap", res, PoolConfig{PoolMode::average, 0, 1, 0, false, true});
    const TensorId d = b.dropout("drop", gap, DropoutConfig{0.5f});
    b.softmax_loss("loss", b.fully_connected("fc", d, FullyConnectedConfig{5, true}));
    return b.finish();
}

TrainingGraph mini_graph() { return build_training_graph(mini_network(), SgdConfig{0.05f, 0.9f, 1e-3f}, 42); }

bool reaches(const TrainingGraph& tg, OpId from, OpId to) { return tg.graph.descendants().test(from, to); }

std::vector<float> copy_of(const HostModel& m, braid::BufferId b) { return m.values(b); }

// Two iterations of `plan` on braid's executor (host backend, the host
// model's bodies) and, for comparison, of the serial runner.
struct ExecutorRun {
    WeightComparison weights;
    double loss = 0.0, serial_loss = 0.0;
};
ExecutorRun run_against_serial(const TrainingGraph& tg, const braid::Plan& plan) {
    HostModel reference(tg);
    for (int it = 0; it < 2; ++it) reference.run_serial_iteration();
    HostModel model(tg);
    std::vector<braid::Executor<braid::HostBackend>::Body> bodies;
    for (const HostBody& body : model.bodies())
        bodies.push_back([body](braid::HostLane&, const braid::OpContext& ctx) { body(ctx); });
    braid::HostBackend backend;
    braid::Executor<braid::HostBackend> executor(tg.graph, plan, backend, std::move(bodies));
    for (int it = 0; it < 2; ++it) executor.run();
    return {compare_weights(reference, model), model.loss(), reference.loss()};
}

// ResNet-18 at 32x32, 1/8 width, 5 classes: every block type in a second.
TrainConfig small_resnet18(std::uint32_t batch) {
    TrainConfig c;
    c.model.net = "resnet18";
    c.model.image = 32;
    c.model.width_scale = 0.125;
    c.model.batch = batch;
    c.model.classes = 5;
    return c;
}

// `strategy`'s plan of tg for the H200 on estimated costs, at most 4 streams.
braid::Plan h200_plan(const TrainingGraph& tg, const std::string& strategy) {
    const braid::DeviceSpec& device = braid::find_device("h200");
    braid::PlanOptions options;
    options.strategy = strategy;
    options.max_streams = 4;
    return braid::make_plan(tg.graph, device, braid::estimate_costs(device, op_estimates(tg)), options);
}

}  // namespace

TEST_SUITE("cpu") {

TEST_CASE("op metadata, program order and batch splits of the training graph") {
    const TrainingGraph tg = mini_graph();
    const Network& net = tg.network;
    REQUIRE(tg.ops.size() == tg.graph.op_count());
    REQUIRE(tg.buffers.size() == tg.graph.buffer_count());
    CHECK(tg.graph.op(0).name == "data");
    CHECK(tg.graph.op(static_cast<OpId>(tg.graph.op_count() - 1)).name == "step.advance");

    const OpId conv_fwd = tg.op("stem", OpRole::forward);
    CHECK(tg.graph.op(conv_fwd).name == "stem.forward");
    CHECK(tg.graph.op(conv_fwd).kind == braid::OpKind::forward);
    CHECK(tg.graph.op(conv_fwd).layer == "stem");
    CHECK(tg.graph.op(conv_fwd).split_batch == N);
    CHECK(tg.graph.op(tg.op("b", OpRole::backward_data)).split_batch == N);
    CHECK(tg.graph.op(tg.op("b", OpRole::backward_weight)).split_batch == 0);
    CHECK(tg.graph.op(tg.op("b", OpRole::backward_weight)).kind == braid::OpKind::backward_weight);
    CHECK(tg.graph.op(tg.op("b", OpRole::update)).kind == braid::OpKind::update);
    CHECK(tg.graph.op(tg.op("r_bn", OpRole::forward)).split_batch == 0);  // batch statistics
    CHECK(tg.graph.op(tg.op("r_bn", OpRole::backward_data)).split_batch == 0);
    CHECK(tg.graph.op(tg.op("loss", OpRole::forward)).split_batch == N);
    CHECK(tg.graph.op(tg.op("loss", OpRole::loss_sum)).split_batch == 0);
    CHECK(tg.graph.op(tg.op("loss", OpRole::backward_data)).split_batch == N);
    CHECK(tg.graph.op(tg.op("drop", OpRole::forward)).split_batch == N);
    CHECK(tg.graph.op(0).split_batch == N);  // the data op, per image

    // No backward-data op for the first layer (images need no gradient), for
    // the add (identity) or the concat (views); no ops at all for the concat.
    CHECK_THROWS_WITH_AS(tg.op("stem", OpRole::backward_data), doctest::Contains("'stem' has no backward_data op"),
                         braid::GraphError);
    CHECK_THROWS_AS(tg.op("res_add", OpRole::backward_data), braid::GraphError);
    CHECK_THROWS_AS(tg.op("mix", OpRole::forward), braid::GraphError);

    // Program order: forward in layer order, backward in reverse, each
    // update right after its layer's weight gradient.
    CHECK(tg.op("stem", OpRole::forward) < tg.op("fc", OpRole::forward));
    CHECK(tg.op("loss", OpRole::loss_sum) == tg.op("loss", OpRole::forward) + 1);
    CHECK(tg.op("fc", OpRole::backward_data) < tg.op("r", OpRole::backward_data));
    CHECK(tg.op("fc", OpRole::update) == tg.op("fc", OpRole::backward_weight) + 1);
    CHECK(tg.op("fc", OpRole::backward_weight) == tg.op("fc", OpRole::backward_data) + 1);
    for (std::size_t i = 0; i < tg.ops.size(); ++i) {
        const OpInfo& info = tg.ops[i];
        if (info.layer) CHECK(tg.graph.op(static_cast<OpId>(i)).layer == net.layer(*info.layer).name);
    }
}

TEST_CASE("hazards: the edges a training step needs") {
    const TrainingGraph tg = mini_graph();
    const auto& g = tg.graph;
    const OpId fwd = tg.op("r", OpRole::forward), bwd_data = tg.op("r", OpRole::backward_data),
               bwd_weight = tg.op("r", OpRole::backward_weight), update = tg.op("r", OpRole::update);
    // The update overwrites weights that forward and backward-data read.
    CHECK((g.edge_hazards(fwd, update) & braid::hazard_war) != 0);
    CHECK((g.edge_hazards(bwd_data, update) & braid::hazard_war) != 0);
    // It reads the weight gradient.
    CHECK((g.edge_hazards(bwd_weight, update) & braid::hazard_raw) != 0);
    // Backward-data and backward-weight of one layer are independent.
    CHECK_FALSE(reaches(tg, bwd_data, bwd_weight));
    CHECK_FALSE(reaches(tg, bwd_weight, bwd_data));
    // The weight gradient of a layer does not wait for the layers below.
    CHECK_FALSE(reaches(tg, tg.op("stem", OpRole::backward_weight), bwd_weight));

    // Branches write disjoint channel slices of the concat buffer: no edge
    // between them, and each feeds the concat's readers.
    const OpId a = tg.op("a_relu", OpRole::forward), b = tg.op("b_relu", OpRole::forward),
               c = tg.op("c_relu", OpRole::forward);
    CHECK_FALSE(g.has_edge(a, b));
    CHECK_FALSE(g.has_edge(b, c));
    CHECK_FALSE(reaches(tg, a, b));
    for (OpId branch : {a, b, c}) {
        CHECK((g.edge_hazards(branch, fwd) & braid::hazard_raw) != 0);
        CHECK((g.edge_hazards(branch, tg.op("res_add", OpRole::forward)) & braid::hazard_raw) != 0);
    }

    // Gradient sums read every partial after it is written and come before
    // the backward ops that read the total.
    const OpId mix_sum = g.op_id("mix.gradient_sum"), norm_sum = g.op_id("norm.gradient_sum");
    CHECK((g.edge_hazards(bwd_data, mix_sum) & braid::hazard_raw) != 0);
    CHECK((g.edge_hazards(tg.op("res_relu", OpRole::backward_data), mix_sum) & braid::hazard_raw) != 0);
    for (const char* branch : {"a_relu", "b_relu", "c_relu"})
        CHECK((g.edge_hazards(mix_sum, tg.op(branch, OpRole::backward_data)) & braid::hazard_raw) != 0);
    for (const char* reader : {"a", "b", "c_pool"})
        CHECK((g.edge_hazards(tg.op(reader, OpRole::backward_data), norm_sum) & braid::hazard_raw) != 0);
    CHECK((g.edge_hazards(norm_sum, tg.op("norm", OpRole::backward_data)) & braid::hazard_raw) != 0);

    // Data before the first layer; the step counter advances after every
    // reader of it (data, dropout forward and backward).
    CHECK((g.edge_hazards(0, tg.op("stem", OpRole::forward)) & braid::hazard_raw) != 0);
    const OpId advance = g.op_id("step.advance");
    CHECK((g.edge_hazards(tg.op("drop", OpRole::backward_data), advance) & braid::hazard_war) != 0);
    CHECK((g.edge_hazards(0, advance) & braid::hazard_war) != 0);
    // The loss sum is off the backward path.
    CHECK_FALSE(reaches(tg, tg.op("loss", OpRole::loss_sum), tg.op("loss", OpRole::backward_data)));
}

TEST_CASE("concat views, aliases and gradient sums in the buffers") {
    const TrainingGraph tg = mini_graph();
    const Network& net = tg.network;
    const auto& g = tg.graph;
    const braid::Buffer& mix = g.buffer(tg.tensors[net.layer(net.layer_id("mix")).output].value);
    CHECK_FALSE(mix.parent.has_value());
    CHECK(mix.bytes == N * 7 * 36 * 4);
    // b_relu's output: channels 2..4 of mix, one 3x6x6 chunk per image.
    const braid::Buffer& b = g.buffer(tg.tensors[net.layer(net.layer_id("b_relu")).output].value);
    CHECK(b.parent == mix.id);
    CHECK(b.chunks == N);
    CHECK(b.bytes == 3 * 36 * 4);
    CHECK(b.stride_bytes == 7 * 36 * 4);
    CHECK(b.root_offset_bytes == 2 * 36 * 4);
    // Its gradient is the same slice of the concat's gradient.
    const braid::Buffer& b_grad = g.buffer(*tg.tensors[net.layer(net.layer_id("b_relu")).output].gradient);
    CHECK(b_grad.root == *tg.tensors[net.layer(net.layer_id("mix")).output].gradient);
    CHECK(b_grad.root_offset_bytes == 2 * 36 * 4);
    CHECK(b_grad.stride_bytes == 7 * 36 * 4);
    CHECK(tg.buffers[b_grad.id].role == BufferRole::gradient);

    // The add passes its gradient on: r_bn's dy is the add's dy.
    const LayerBuffers& bn = tg.layers[net.layer_id("r_bn")];
    CHECK(bn.output_gradient == tg.layers[net.layer_id("res_add")].output_gradient);

    REQUIRE(tg.gradient_sums.size() == 2);
    for (const GradientSum& s : tg.gradient_sums) {
        const std::string tensor = net.tensor(s.tensor).name;
        CAPTURE(tensor);
        if (tensor == "mix") {
            REQUIRE(s.partials.size() == 2);
            CHECK(g.buffer(s.partials[0]).name == "mix.grad.r");
            CHECK(s.partials[1] == *tg.layers[net.layer_id("res_add")].output_gradient);
        } else {
            CHECK(tensor == "norm");
            REQUIRE(s.partials.size() == 3);
            CHECK(g.buffer(s.partials[0]).name == "norm.grad.a");
            CHECK(g.buffer(s.partials[1]).name == "norm.grad.b");
            CHECK(g.buffer(s.partials[2]).name == "norm.grad.c_pool");
        }
    }
    // Roles of a few buffers.
    CHECK(tg.buffers[tg.images].role == BufferRole::input);
    CHECK(tg.buffers[tg.labels].element == ElementType::i32);
    CHECK(tg.buffers[tg.step].role == BufferRole::state);
    CHECK(tg.buffers[bn.params[0]].role == BufferRole::parameter);
    CHECK(tg.buffers[bn.aux[BatchNorm2d::running_var]].role == BufferRole::state);
    CHECK(tg.buffers[bn.aux[BatchNorm2d::saved_mean]].role == BufferRole::saved);
    CHECK(tg.buffers[bn.momentum[1]].role == BufferRole::state);
    CHECK(tg.buffers[bn.param_gradients[0]].layer == net.layer_id("r_bn"));
}

TEST_CASE("one iteration through the graph equals a hand-written step with a copying concat") {
    const TrainingGraph tg = mini_graph();
    const Network& net = tg.network;
    HostModel model(tg);
    auto layer = [&](const char* name) -> const LayerNode& { return net.layer(net.layer_id(name)); };
    auto params = [&](const char* name, std::size_t i) { return copy_of(model, tg.layers[net.layer_id(name)].params[i]); };
    const auto w_stem = params("stem", 0), b_stem = params("stem", 1), w_a = params("a", 0), b_a = params("a", 1),
               w_b = params("b", 0), b_b = params("b", 1), w_c = params("c", 0), b_c = params("c", 1),
               w_r = params("r", 0), gamma = params("r_bn", 0), beta = params("r_bn", 1), w_fc = params("fc", 0),
               b_fc = params("fc", 1);
    model.run_serial_iteration();
    const std::vector<float> x = model.values(tg.images);
    const std::int32_t* labels = model.data<std::int32_t>(tg.labels);

    auto spec = [&](const char* name) -> const LayerSpec& { return layer(name).spec; };
    const auto& stem = std::get<Conv2d>(spec("stem"));
    const auto& relu_stem = std::get<Relu>(spec("stem_relu"));
    const auto& norm = std::get<Lrn>(spec("norm"));
    const auto& ca = std::get<Conv2d>(spec("a"));
    const auto& cb = std::get<Conv2d>(spec("b"));
    const auto& cc = std::get<Conv2d>(spec("c"));
    const auto& pool_c = std::get<Pool2d>(spec("c_pool"));
    const auto& mix = std::get<Concat>(spec("mix"));
    const auto& cr = std::get<Conv2d>(spec("r"));
    const auto& bn = std::get<BatchNorm2d>(spec("r_bn"));
    const auto& add = std::get<Add>(spec("res_add"));
    const auto& gap = std::get<Pool2d>(spec("gap"));
    const auto& drop = std::get<Dropout>(spec("drop"));
    const auto& fc = std::get<FullyConnected>(spec("fc"));
    const auto& loss = std::get<SoftmaxCrossEntropy>(spec("loss"));
    const ImageRange all{0, N};
    auto make = [](Shape4 s) { return std::vector<float>(s.elements()); };

    // Forward, contiguous buffers everywhere.
    auto stem_y = make(stem.out), stem_r = make(stem.out), n = make(stem.out);
    conv_forward<float>(stem, cview(x, stem.in), w_stem.data(), b_stem.data(), view(stem_y, stem.out), all);
    relu_forward<float>(relu_stem, cview(stem_y, stem.out), view(stem_r, stem.out), all);
    lrn_forward<float>(norm, cview(stem_r, stem.out), view(n, stem.out), all);
    auto a_y = make(ca.out), a_r = make(ca.out), b_y = make(cb.out), b_r = make(cb.out);
    auto c_p = make(pool_c.out), c_y = make(cc.out), c_r = make(cc.out);
    conv_forward<float>(ca, cview(n, ca.in), w_a.data(), b_a.data(), view(a_y, ca.out), all);
    relu_forward<float>(Relu(ca.out), cview(a_y, ca.out), view(a_r, ca.out), all);
    conv_forward<float>(cb, cview(n, cb.in), w_b.data(), b_b.data(), view(b_y, cb.out), all);
    relu_forward<float>(Relu(cb.out), cview(b_y, cb.out), view(b_r, cb.out), all);
    pool_forward<float>(pool_c, cview(n, pool_c.in), view(c_p, pool_c.out), all);
    conv_forward<float>(cc, cview(c_p, cc.in), w_c.data(), b_c.data(), view(c_y, cc.out), all);
    relu_forward<float>(Relu(cc.out), cview(c_y, cc.out), view(c_r, cc.out), all);
    auto m = make(mix.out);
    const std::vector<TensorView<const float>> parts{cview(a_r, ca.out), cview(b_r, cb.out), cview(c_r, cc.out)};
    concat_forward_copy<float>(mix, parts, view(m, mix.out), all);
    auto r_y = make(cr.out), r_bn = make(cr.out), sum = make(cr.out), res = make(cr.out);
    std::vector<float> mean(7), inv_std(7), running_mean(7, 0.0f), running_var(7, 1.0f);
    conv_forward<float>(cr, cview(m, cr.in), w_r.data(), nullptr, view(r_y, cr.out), all);
    batch_norm_forward_training<float>(bn, cview(r_y, cr.out), gamma.data(), beta.data(), view(r_bn, cr.out),
                                       mean.data(), inv_std.data(), running_mean.data(), running_var.data());
    add_forward<float>(add, cview(r_bn, cr.out), cview(m, cr.out), view(sum, cr.out), all);
    relu_forward<float>(Relu(cr.out), cview(sum, cr.out), view(res, cr.out), all);
    auto pooled = make(gap.out), dropped = make(gap.out), logits = make(fc.out), probs = make(fc.out);
    pool_forward<float>(gap, cview(res, gap.in), view(pooled, gap.out), all);
    const DropoutKey key{tg.seed, 0, 0};  // the net's first (only) dropout layer
    dropout_forward<float>(drop, key, cview(pooled, gap.out), view(dropped, gap.out), all);
    fully_connected_forward<float>(fc, cview(dropped, fc.in), w_fc.data(), b_fc.data(), view(logits, fc.out), all);
    std::vector<float> per_image(N);
    float total_loss = 0.0f;
    softmax_loss_forward<float>(loss, cview(logits, fc.out), labels, view(probs, fc.out), per_image.data(), all);
    softmax_loss_sum<float>(loss, per_image.data(), &total_loss);

    CHECK(same_bits(model.values(tg.tensors[layer("mix").output].value), m));
    CHECK(model.loss() == static_cast<double>(total_loss));
    CHECK(same_bits(model.values(tg.layers[net.layer_id("r_bn")].aux[BatchNorm2d::running_mean]), running_mean));

    // Backward, with a copying concat and the sums written out.
    auto dlogits = make(fc.out), ddropped = make(gap.out), dpooled = make(gap.out), dres = make(cr.out),
         dsum = make(cr.out), dr_y = make(cr.out), dm_r = make(mix.out), dm = make(mix.out);
    std::vector<float> dw_fc(w_fc.size()), db_fc(b_fc.size()), dgamma(7), dbeta(7), dw_r(w_r.size());
    softmax_loss_backward_data<float>(loss, cview(probs, fc.out), labels, view(dlogits, fc.out), all);
    fully_connected_backward_data<float>(fc, cview(dlogits, fc.out), w_fc.data(), view(ddropped, fc.in), all);
    fully_connected_backward_weight<float>(fc, cview(dropped, fc.in), cview(dlogits, fc.out), dw_fc.data(), db_fc.data());
    dropout_backward_data<float>(drop, key, cview(ddropped, gap.out), view(dpooled, gap.out), all);
    pool_backward_data<float>(gap, {}, {}, cview(dpooled, gap.out), view(dres, gap.in), all);
    relu_backward_data<float>(Relu(cr.out), cview(res, cr.out), cview(dres, cr.out), view(dsum, cr.out), all);
    batch_norm_backward_data<float>(bn, cview(r_y, cr.out), cview(dsum, cr.out), gamma.data(), mean.data(),
                                    inv_std.data(), view(dr_y, cr.out));
    batch_norm_backward_weight<float>(bn, cview(r_y, cr.out), cview(dsum, cr.out), mean.data(), inv_std.data(),
                                      dgamma.data(), dbeta.data());
    conv_backward_data<float>(cr, cview(dr_y, cr.out), w_r.data(), view(dm_r, mix.out), all);
    conv_backward_weight<float>(cr, cview(m, cr.in), cview(dr_y, cr.out), dw_r.data(), nullptr);
    const std::vector<TensorView<const float>> mix_partials{cview(dm_r, mix.out), cview(dsum, mix.out)};
    gradient_sum<float>(mix_partials, view(dm, mix.out), all);
    auto da_r = make(ca.out), db_r = make(cb.out), dc_r = make(cc.out);
    const std::vector<TensorView<float>> slices{view(da_r, ca.out), view(db_r, cb.out), view(dc_r, cc.out)};
    concat_backward_copy<float>(mix, cview(dm, mix.out), slices, all);
    auto da_y = make(ca.out), db_y = make(cb.out), dc_y = make(cc.out), dc_p = make(pool_c.out);
    auto dn_a = make(stem.out), dn_b = make(stem.out), dn_c = make(stem.out), dn = make(stem.out);
    std::vector<float> dw_a(w_a.size()), db_a(b_a.size()), dw_b(w_b.size()), db_b(b_b.size()), dw_c(w_c.size()),
        db_c(b_c.size());
    relu_backward_data<float>(Relu(ca.out), cview(a_r, ca.out), cview(da_r, ca.out), view(da_y, ca.out), all);
    conv_backward_data<float>(ca, cview(da_y, ca.out), w_a.data(), view(dn_a, ca.in), all);
    conv_backward_weight<float>(ca, cview(n, ca.in), cview(da_y, ca.out), dw_a.data(), db_a.data());
    relu_backward_data<float>(Relu(cb.out), cview(b_r, cb.out), cview(db_r, cb.out), view(db_y, cb.out), all);
    conv_backward_data<float>(cb, cview(db_y, cb.out), w_b.data(), view(dn_b, cb.in), all);
    conv_backward_weight<float>(cb, cview(n, cb.in), cview(db_y, cb.out), dw_b.data(), db_b.data());
    relu_backward_data<float>(Relu(cc.out), cview(c_r, cc.out), cview(dc_r, cc.out), view(dc_y, cc.out), all);
    conv_backward_data<float>(cc, cview(dc_y, cc.out), w_c.data(), view(dc_p, cc.in), all);
    conv_backward_weight<float>(cc, cview(c_p, cc.in), cview(dc_y, cc.out), dw_c.data(), db_c.data());
    pool_backward_data<float>(pool_c, cview(n, pool_c.in), cview(c_p, pool_c.out), cview(dc_p, pool_c.out),
                              view(dn_c, pool_c.in), all);
    const std::vector<TensorView<const float>> norm_partials{cview(dn_a, stem.out), cview(dn_b, stem.out),
                                                             cview(dn_c, stem.out)};
    gradient_sum<float>(norm_partials, view(dn, stem.out), all);
    auto dstem_r = make(stem.out), dstem_y = make(stem.out);
    std::vector<float> dw_stem(w_stem.size()), db_stem(b_stem.size());
    lrn_backward_data<float>(norm, cview(stem_r, stem.out), cview(n, stem.out), cview(dn, stem.out),
                             view(dstem_r, stem.out), all);
    relu_backward_data<float>(relu_stem, cview(stem_r, stem.out), cview(dstem_r, stem.out), view(dstem_y, stem.out), all);
    conv_backward_weight<float>(stem, cview(x, stem.in), cview(dstem_y, stem.out), dw_stem.data(), db_stem.data());

    auto grad = [&](const char* name, std::size_t i) {
        return model.values(tg.layers[net.layer_id(name)].param_gradients[i]);
    };
    CHECK(same_bits(model.values(*tg.tensors[layer("mix").output].gradient), dm));
    CHECK(same_bits(model.values(*tg.tensors[layer("norm").output].gradient), dn));
    CHECK(same_bits(grad("fc", 0), dw_fc));
    CHECK(same_bits(grad("fc", 1), db_fc));
    CHECK(same_bits(grad("r_bn", 0), dgamma));
    CHECK(same_bits(grad("r_bn", 1), dbeta));
    CHECK(same_bits(grad("r", 0), dw_r));
    CHECK(same_bits(grad("a", 0), dw_a));
    CHECK(same_bits(grad("b", 0), dw_b));
    CHECK(same_bits(grad("b", 1), db_b));
    CHECK(same_bits(grad("c", 0), dw_c));
    CHECK(same_bits(grad("stem", 0), dw_stem));
    CHECK(same_bits(grad("stem", 1), db_stem));
    // And the update used them: w - lr * (g + wd * w) with zero momentum.
    const std::vector<float> w_fc_after = model.values(tg.layers[net.layer_id("fc")].params[0]);
    CHECK(w_fc_after[3] == w_fc[3] - 0.05f * (dw_fc[3] + 1e-3f * w_fc[3]));
    CHECK(model.step() == 1);
}

TEST_CASE("a run with every splittable op in 3 parts gives the same bits as whole batches") {
    const TrainingGraph tg = mini_graph();
    HostModel whole(tg), split(tg);
    SerialRunOptions three;
    three.parts = 3;
    for (int it = 0; it < 3; ++it) {
        whole.run_serial_iteration();
        split.run_serial_iteration(three);
    }
    const WeightComparison cmp = compare_weights(whole, split);
    CHECK_MESSAGE(cmp.identical, cmp.describe());
    CHECK(cmp.tensors_compared > 20);
}

TEST_CASE("the executor runs every strategy's plan concurrently to the serial runner's bits") {
    TrainConfig c;
    c.model.net = "googlenet";  // with its auxiliary heads: 5-way gradient sums, dropout in three places
    c.model.image = smallest_image(c.model);
    c.model.width_scale = 0.125;
    c.model.batch = 4;
    c.model.classes = 6;
    for (const TrainingGraph& tg : {mini_graph(), build_training_graph(c)}) {
        CAPTURE(tg.network.name());
        const braid::DeviceSpec& device = braid::find_device("h100");
        const braid::OpCosts costs = braid::estimate_costs(device, op_estimates(tg));
        for (const std::string strategy : {"serial", "glp4nn", "nimble", "braid"}) {
            CAPTURE(strategy);
            braid::PlanOptions options;
            options.strategy = strategy;
            options.max_streams = 4;
            const ExecutorRun run = run_against_serial(tg, braid::make_plan(tg.graph, device, costs, options));
            CHECK_MESSAGE(run.weights.identical, run.weights.describe());
            CHECK(run.loss == run.serial_loss);
        }
    }
}

TEST_CASE("inception_v3's training step: acyclic, independent branches, slices and gradient sums in order") {
    TrainConfig c;
    c.model.net = "inception_v3";
    c.model.image = default_image(c.model.net);
    const TrainingGraph tg = build_training_graph(c);
    const braid::OpGraph& g = tg.graph;
    const Network& net = tg.network;
    REQUIRE(g.topological_order().size() == g.op_count());
    for (const braid::Edge& e : g.edges()) REQUIRE(g.topological_position()[e.from] < g.topological_position()[e.to]);
    // 320 layers: 96 convolutions with their batch norms and ReLUs, 11 concats (views, no ops), 2 FCs, 2 losses.
    REQUIRE(net.layers().size() == 320);
    std::map<braid::OpKind, std::size_t> kinds;
    for (const braid::Op& op : g.ops()) ++kinds[op.kind];
    CHECK(kinds[braid::OpKind::forward] == 320 - 11 + 2);               // and the two loss sums
    CHECK(kinds[braid::OpKind::backward_data] == 320 - 11 - 1 + 15);    // not Conv2d_1a_3x3's; the gradient sums
    CHECK(kinds[braid::OpKind::backward_weight] == 96 + 96 + 2);
    CHECK(kinds[braid::OpKind::update] == 96 + 96 + 2);
    // A module's branches have no path between them, nor InceptionE's 1x3 and 3x1 halves, nor AuxLogits and Mixed_7a.
    const auto fwd = [&](const char* layer) { return tg.op(layer, OpRole::forward); };
    for (auto [a, b] : {std::pair{"Mixed_5b.branch1x1.conv", "Mixed_5b.branch5x5_2.conv"},
                        std::pair{"Mixed_6c.branch7x7_3.conv", "Mixed_6c.branch7x7dbl_5.conv"},
                        std::pair{"AuxLogits.conv1.conv", "Mixed_7a.branch3x3_2.conv"},
                        std::pair{"Mixed_7b.branch3x3_2a.conv", "Mixed_7b.branch3x3_2b.conv"},
                        std::pair{"Mixed_7a.max_pool", "Mixed_7a.branch3x3_2.conv"}}) {
        const std::string pair = std::string(a) + " and " + b;
        CAPTURE(pair);
        CHECK_FALSE(reaches(tg, fwd(a), fwd(b)));
        CHECK_FALSE(reaches(tg, fwd(b), fwd(a)));
    }
    // InceptionB's max pool writes channels 480..767 of Mixed_6a.cat in place.
    const auto value = [&](const char* layer) { return g.buffer(tg.tensors[net.layer(net.layer_id(layer)).output].value); };
    const braid::Buffer& pooled = value("Mixed_6a.max_pool");
    CHECK(pooled.parent == value("Mixed_6a.cat").id);
    CHECK(pooled.root_offset_bytes == (384 + 96) * 17 * 17 * 4);
    CHECK(pooled.stride_bytes == 768 * 17 * 17 * 4);
    // InceptionE's torch.cat of 2a and 2b is flattened into the module's: 2b follows 2a.
    CHECK(value("Mixed_7b.branch3x3_2b.relu").root_offset_bytes ==
          value("Mixed_7b.branch3x3_2a.relu").root_offset_bytes + 384 * 8 * 8 * 4);
    std::map<std::string, std::vector<std::string>> sums;
    for (const GradientSum& sum : tg.gradient_sums)
        for (braid::BufferId p : sum.partials) sums[net.tensor(sum.tensor).name].push_back(g.buffer(p).name);
    CHECK(sums.at("Mixed_7b.branch3x3_1.relu") ==
          std::vector<std::string>{"Mixed_7b.branch3x3_1.relu.grad.Mixed_7b.branch3x3_2a.conv",
                                   "Mixed_7b.branch3x3_1.relu.grad.Mixed_7b.branch3x3_2b.conv"});
    // Mixed_6e feeds AuxLogits first (program order), then Mixed_7a's three branches.
    CHECK(sums.at("Mixed_6e.cat") == std::vector<std::string>{"Mixed_6e.cat.grad.AuxLogits.avg_pool",
                                                              "Mixed_6e.cat.grad.Mixed_7a.branch3x3_1.conv",
                                                              "Mixed_6e.cat.grad.Mixed_7a.branch7x7x3_1.conv",
                                                              "Mixed_6e.cat.grad.Mixed_7a.max_pool"});
    CHECK(sums.at("maxpool2").size() == 4);
    CHECK(tg.gradient_sums.size() == 15);  // 11 module inputs and InceptionE's 4 split branches
}

TEST_CASE("the executor runs braid's plan of a small inception_v3 to the serial runner's bits") {
    // torchvision's smallest Inception-v3 (75x75, no AuxLogits, which needs
    // 299x299), at 1/8 width: every module type and every kernel shape.
    TrainConfig c;
    c.model.net = "inception_v3";
    c.model.image = 75;
    c.model.aux_classifiers = false;
    c.model.width_scale = 0.125;
    c.model.batch = 2;
    c.model.classes = 5;
    const TrainingGraph tg = build_training_graph(c);
    const braid::DeviceSpec& device = braid::find_device("h200");
    braid::PlanOptions options;
    options.strategy = "braid";
    options.max_streams = 4;
    const braid::Plan plan =
        braid::make_plan(tg.graph, device, braid::estimate_costs(device, op_estimates(tg)), options);
    CHECK(plan.stream_count() > 1);
    const ExecutorRun run = run_against_serial(tg, plan);
    CHECK_MESSAGE(run.weights.identical, run.weights.describe());
    CHECK(run.weights.tensors_compared > 500);
    CHECK(run.loss == run.serial_loss);
    CHECK(std::isfinite(run.loss));
}

TEST_CASE("update buckets: multi-tensor update ops over consecutive layers give the per-layer updates' bits") {
    TrainConfig c = small_resnet18(2);
    const TrainingGraph per_layer = build_training_graph(c);
    std::size_t layers_with_updates = 0;
    for (const OpInfo& info : per_layer.ops)
        if (info.role == OpRole::update) {
            CHECK(info.update_layers == std::vector<LayerId>{*info.layer});
            ++layers_with_updates;
        }
    HostModel reference(per_layer);
    for (int it = 0; it < 2; ++it) reference.run_serial_iteration();
    for (const std::uint64_t bucket : {std::uint64_t{20000}, std::uint64_t{1} << 40}) {
        CAPTURE(bucket);
        c.model.update_bucket_bytes = bucket;
        const TrainingGraph tg = build_training_graph(c);
        std::size_t updates = 0, covered = 0;
        for (OpId id = 0; id < tg.ops.size(); ++id) {
            const OpInfo& info = tg.ops[id];
            if (info.role != OpRole::update) continue;
            ++updates;
            covered += info.update_layers.size();
            std::uint64_t bytes = 0;
            for (LayerId l : info.update_layers) {
                CHECK(tg.op(l, OpRole::update) == id);
                // After every weight gradient it applies, and after the backward_data that reads its weights.
                CHECK((tg.graph.edge_hazards(tg.op(l, OpRole::backward_weight), id) & braid::hazard_raw) != 0);
                for (braid::BufferId p : tg.layers[l].params) bytes += tg.graph.buffer(p).bytes;
            }
            if (id != tg.ops.size() - 2) CHECK(bytes >= bucket);  // all but the last bucket (before step.advance) are full
        }
        CHECK(covered == layers_with_updates);
        CHECK(updates < layers_with_updates);
        if (bucket > (std::uint64_t{1} << 30)) {
            CHECK(updates == 1);
            CHECK(tg.graph.op(static_cast<OpId>(tg.ops.size() - 2)).name == "fc..conv1.update");
            CHECK(op_estimates(tg)[tg.op("fc", OpRole::update)].kernels.size() == 1);  // 62 tensors: one launch
        }
        CHECK(tg.graph.fingerprint() != per_layer.graph.fingerprint());
        // Serial and braid's plan: the per-layer run's bits, parameter for parameter.
        const ExecutorRun run = run_against_serial(tg, h200_plan(tg, "braid"));
        CHECK_MESSAGE(run.weights.identical, run.weights.describe());
        HostModel bucketed(tg);
        for (int it = 0; it < 2; ++it) bucketed.run_serial_iteration();
        CHECK(bucketed.loss() == reference.loss());
        std::size_t compared = 0;
        for (LayerId l = 0; l < tg.layers.size(); ++l)
            for (std::size_t i = 0; i < tg.layers[l].params.size(); ++i, ++compared) {
                CHECK(same_bits(bucketed.values(tg.layers[l].params[i]), reference.values(per_layer.layers[l].params[i])));
                CHECK(same_bits(bucketed.values(tg.layers[l].momentum[i]),
                                reference.values(per_layer.layers[l].momentum[i])));
            }
        CHECK(compared > 50);
    }
    // ResNet-50's 161 tensors in one update: three launches of up to 64.
    TrainConfig r;
    r.model.net = "resnet50";
    r.model.batch = 2;
    r.model.update_bucket_bytes = std::uint64_t{1} << 40;
    const TrainingGraph big = build_training_graph(r);
    CHECK(op_estimates(big)[big.op("fc", OpRole::update)].kernels.size() == 3);
}

TEST_CASE("a residual add with its ReLU fused: one masked gradient that both inputs read") {
    TrainConfig c = small_resnet18(2);
    const TrainingGraph plain = build_training_graph(c);
    c.model.fuse_relu = true;
    const TrainingGraph tg = build_training_graph(c);
    // ResNet-18 block layer1.0: relu(layer1.0.add(bn2(...), x)), the ReLU named layer1.0.relu unfused.
    const LayerId add = tg.network.layer_id("layer1.0.add");
    const auto& spec = std::get<Add>(tg.network.layer(add).spec);
    REQUIRE(spec.relu);
    CHECK_FALSE(std::get<Add>(plain.network.layer(plain.network.layer_id("layer1.0.add")).spec).relu);
    const LayerBuffers& b = tg.layers[add];
    REQUIRE(b.input_gradients.size() == 2);
    REQUIRE(b.input_gradients[0]);
    CHECK(b.input_gradients[0] == b.input_gradients[1]);
    const braid::BufferId masked = *b.input_gradients[0];
    CHECK(tg.graph.buffer(masked).name == "layer1.0.add.pre_relu.grad");
    const OpId bwd = tg.op("layer1.0.add", OpRole::backward_data);
    const braid::Op& op = tg.graph.op(bwd);
    CHECK(op.writes == std::vector<braid::BufferId>{masked});
    CHECK(std::find(op.reads.begin(), op.reads.end(), b.output) != op.reads.end());
    CHECK(std::find(op.reads.begin(), op.reads.end(), *b.output_gradient) != op.reads.end());
    CHECK(op.split_batch == c.model.batch);
    // Both inputs' producers take their gradient from it: bn2's backward and the block input's sum.
    CHECK((tg.graph.edge_hazards(bwd, tg.op("layer1.0.bn2", OpRole::backward_data)) & braid::hazard_raw) != 0);
    CHECK(plain.graph.op_count() > tg.graph.op_count());  // the ReLUs' two ops per pair go, one op per add comes
    const ExecutorRun run = run_against_serial(tg, h200_plan(tg, "braid"));
    CHECK_MESSAGE(run.weights.identical, run.weights.describe());
    CHECK(run.loss == run.serial_loss);
}

TEST_CASE("shared batch-norm sums: one backward op per batch norm writes its weight gradient, and plans keep the serial bits") {
    TrainConfig c = small_resnet18(4);
    const TrainingGraph plain = build_training_graph(c);
    c.model.share_batch_norm_sums = true;
    for (bool fused : {false, true}) {
        CAPTURE(fused);
        c.model.fuse_relu = fused;
        const TrainingGraph tg = build_training_graph(c);
        const OpId data = tg.op("layer2.0.bn1", OpRole::backward_data);
        CHECK_THROWS_WITH_AS(tg.op("layer2.0.bn1", OpRole::backward_weight), doctest::Contains("no backward_weight op"),
                             braid::GraphError);
        const LayerBuffers& b = tg.layers[tg.network.layer_id("layer2.0.bn1")];
        for (braid::BufferId g : b.param_gradients) {
            const auto& writes = tg.graph.op(data).writes;
            CHECK(std::find(writes.begin(), writes.end(), g) != writes.end());
        }
        // The update reads the gradient after it, and overwrites gamma after it has read it.
        CHECK((tg.graph.edge_hazards(data, tg.op("layer2.0.bn1", OpRole::update)) & braid::hazard_raw) != 0);
        CHECK((tg.graph.edge_hazards(data, tg.op("layer2.0.bn1", OpRole::update)) & braid::hazard_war) != 0);
        std::size_t bns = 0;
        for (const LayerNode& l : tg.network.layers()) bns += std::holds_alternative<BatchNorm2d>(l.spec) ? 1 : 0;
        TrainConfig unshared = c;
        unshared.model.share_batch_norm_sums = false;
        CHECK(tg.graph.op_count() + bns == build_training_graph(unshared).graph.op_count());  // one op fewer each
        CHECK(tg.graph.fingerprint() != plain.graph.fingerprint());
        for (const std::string strategy : {"nimble", "braid"}) {
            CAPTURE(strategy);
            const braid::Plan plan = h200_plan(tg, strategy);
            CHECK(plan.stream_count() > 1);
            const ExecutorRun run = run_against_serial(tg, plan);
            CHECK_MESSAGE(run.weights.identical, run.weights.describe());
            CHECK(run.loss == run.serial_loss);
            CHECK(std::isfinite(run.loss));
        }
    }
}

TEST_CASE("planning_model: convolutions the backend names take the calibration's engine fits, other ops keep their costs") {
    TrainConfig c;
    c.model.net = "resnet18";
    c.model.batch = 8;
    const TrainingGraph tg = build_training_graph(c);
    const braid::DeviceSpec device = braid::find_device("h200");
    const std::optional<braid::Calibration> calibration = braid::builtin_calibration(device);
    REQUIRE(calibration);
    std::vector<braid::ConvEngineFamily> engines(tg.graph.op_count(), braid::ConvEngineFamily::other);
    std::size_t passes = 0;
    for (std::size_t i = 0; i < tg.ops.size(); ++i) {
        if (runs_conv_pass(tg, i)) {
            engines[i] = braid::ConvEngineFamily::tensor_core;
            ++passes;
        }
    }
    REQUIRE(passes == 3 * 20 - 1);  // 20 convolutions, the first without a data gradient
    CHECK(describe_conv_engines(tg, engines) == fmt::format("{0} of {0} convolution passes named: tensor_core {0}", passes));
    CHECK(describe_conv_engines(tg, {}) == fmt::format("0 of {} convolution passes named", passes));

    const auto durations = [&](std::span<const braid::ConvEngineFamily> e) {
        return braid::op_durations_ns(planning_model(tg, device, calibration, braid::LaunchMode::graph, e).costs);
    };
    const std::vector<double> blind = durations({}), named = durations(engines);
    CHECK(durations(std::vector(engines.size(), braid::ConvEngineFamily::other)) == blind);
    std::size_t changed = 0;
    for (std::size_t i = 0; i < engines.size(); ++i) {
        CAPTURE(tg.graph.op(static_cast<OpId>(i)).name);
        if (engines[i] == braid::ConvEngineFamily::other) CHECK(named[i] == blind[i]);
        else changed += named[i] != blind[i] ? 1 : 0;
    }
    CHECK(changed == passes);  // every pass has a tensor-core fit in the H200's calibration
    // Without a calibration the names change nothing: roofline estimates have no engine fits.
    CHECK(braid::op_durations_ns(planning_model(tg, device, std::nullopt, braid::LaunchMode::graph, engines).costs) ==
          braid::op_durations_ns(planning_model(tg, device, std::nullopt, braid::LaunchMode::graph).costs));
    engines.pop_back();
    CHECK_THROWS_AS(planning_model(tg, device, calibration, braid::LaunchMode::graph, engines), braid::ModelError);
}

TEST_CASE("kernel estimates cost every op of GoogLeNet, ResNet-50 and Inception-v3 on every device in the table") {
    for (const char* name : {"googlenet", "resnet50", "inception_v3"}) {
        CAPTURE(name);
        TrainConfig c;
        c.model.net = name;
        c.model.image = default_image(name);
        const TrainingGraph tg = build_training_graph(c);
        const std::vector<braid::OpEstimate> estimates = op_estimates(tg);
        REQUIRE(estimates.size() == tg.graph.op_count());
        std::vector<std::string> names;
        for (const braid::Op& op : tg.graph.ops()) names.push_back(op.name);
        for (const braid::DeviceSpec& device : braid::builtin_devices()) {
            CAPTURE(device.key);
            const braid::OpCosts costs = braid::estimate_costs(device, estimates);
            CHECK_NOTHROW(braid::validate_costs(device, costs, names));
            const std::vector<double> ns = braid::op_durations_ns(costs);
            double serial = 0;
            for (double t : ns) serial += t;
            const braid::CriticalPath cp = tg.graph.critical_path(ns);
            CHECK(cp.length_ns < serial);  // there is work to overlap
            CHECK(serial > 1e6);           // a batch of 32 at 224x224 takes milliseconds
        }
    }
    // Forward convolution grids grow with the batch (grid.x = tiles of N*OH*OW).
    TrainConfig small, big;
    small.model.net = big.model.net = "resnet18";
    small.model.batch = 16;
    big.model.batch = 64;
    const TrainingGraph a = build_training_graph(small), b = build_training_graph(big);
    const OpId fa = a.op("layer3.0.conv2", OpRole::forward), fb = b.op("layer3.0.conv2", OpRole::forward);
    const auto ka = op_estimates(a)[fa].kernels.at(0), kb = op_estimates(b)[fb].kernels.at(0);
    CHECK(ka.shape.grid.x == (16 * 14 * 14 + 127) / 128);  // 128-pixel tiles
    CHECK(kb.shape.grid.x == 64 * 14 * 14 / 128);
    CHECK(kb.flops == doctest::Approx(4 * ka.flops));
    CHECK(ka.shape.block.x == 128);
    // A weight gradient with a long reduction and few output tiles splits K.
    const auto wgrad = op_estimates(b)[b.op("layer1.0.conv1", OpRole::backward_weight)].kernels;
    REQUIRE(wgrad.size() == 2);
    CHECK(wgrad[0].shape.grid.z > 1);
    CHECK(wgrad[1].shape.name.find("splitk_reduce") != std::string::npos);
}

TEST_CASE("the graph is the same for the same configuration") {
    TrainConfig c;
    c.model.net = "googlenet";
    c.model.image = 64;
    c.model.width_scale = 0.25;
    const TrainingGraph a = build_training_graph(c), b = build_training_graph(c);
    CHECK(a.graph.fingerprint() == b.graph.fingerprint());
    c.model.batch = 16;
    CHECK(build_training_graph(c).graph.fingerprint() != a.graph.fingerprint());
}

}  // TEST_SUITE

TEST_CASE("conv census: ResNet-50's 53 convolutions are 23 distinct problems; the stem conv has no backward_data") {
    TrainConfig c;
    c.model.net = "resnet50";
    c.model.batch = 2;
    c.model.image = 224;
    const TrainingGraph tg = build_training_graph(c);
    const std::vector<ConvCensusEntry> census = conv_census(tg);
    // conv1; layer1: conv1 of block 0 and of blocks 1-2, conv2, conv3 (= the
    // downsample's 1x1 64 -> 256 at 56x56); layers 2-4: six each (block 0's
    // three and downsample, the later blocks' conv1 and conv2; conv3 repeats).
    CHECK(census.size() == 23);
    std::uint32_t layers = 0, backward_data = 0;
    std::map<std::string, const ConvCensusEntry*> by_first;
    for (const ConvCensusEntry& e : census) {
        layers += e.layers;
        backward_data += e.backward_data;
        by_first[e.first] = &e;
        const LayerId first = tg.network.layer_id(e.first);
        const auto* conv = std::get_if<Conv2d>(&tg.network.layer(first).spec);
        REQUIRE(conv != nullptr);
        CHECK(conv->in == e.layer.in);
        CHECK(conv->out == e.layer.out);
    }
    CHECK(layers == 53);
    CHECK(backward_data == 52);
    REQUIRE(by_first.count("conv1") == 1);
    CHECK(by_first["conv1"]->backward_data == 0);
    CHECK(by_first["conv1"]->layers == 1);
    REQUIRE(by_first.count("layer1.0.conv3") == 1);
    CHECK(by_first["layer1.0.conv3"]->layers == 4);  // every block's conv3 of layer1, and layer1.0.downsample.0
    CHECK(by_first.count("layer1.0.downsample.0") == 0);
    REQUIRE(by_first.count("layer1.0.conv2") == 1);
    CHECK(by_first["layer1.0.conv2"]->layers == 3);
    CHECK(by_first["layer1.0.conv2"]->layer.in.n == 2);
    // Program order of first appearance.
    CHECK(census.front().first == "conv1");
    CHECK(census[1].first == "layer1.0.conv1");
    // No concat: every view is a whole tensor.
    for (const ConvCensusEntry& e : census) {
        CAPTURE(e.first);
        CHECK_FALSE(e.sliced());
        CHECK(e.x_stride == e.layer.in.image_elements());
        CHECK(e.y_stride == e.layer.out.image_elements());
        CHECK(e.dy_stride == e.layer.out.image_elements());
        CHECK(e.dx_stride == (e.backward_data > 0 ? e.layer.in.image_elements() : 0));
    }
}

TEST_CASE("conv census: a convolution that feeds a concat writes a channel slice, a problem of its own") {
    NetworkBuilder b("sliced", Shape4{2, 3, 8, 8});
    const TensorId a = b.conv("a", b.images(), ConvConfig{4, 1, 1, 0, 1, false});
    const TensorId same = b.conv("same", b.images(), ConvConfig{4, 1, 1, 0, 1, false});
    const TensorId r = b.relu("same_relu", same);
    const TensorId mix = b.concat("mix", {a, r});
    const TensorId gap = b.pool("gap", mix, PoolConfig{PoolMode::average, 0, 1, 0, false, true});
    b.softmax_loss("loss", b.fully_connected("fc", gap, FullyConnectedConfig{3, true}));
    const TrainingGraph tg = build_training_graph(b.finish(), SgdConfig{}, 1);
    const std::vector<ConvCensusEntry> census = conv_census(tg);
    // Equal geometry, but "a" writes its slice of mix (8 channels of 8x8 per
    // image) where "same" writes a tensor of its own for its ReLU.
    REQUIRE(census.size() == 2);
    CHECK(census[0].first == "a");
    CHECK(census[0].sliced());
    CHECK(census[0].y_stride == 8u * 8 * 8);
    CHECK(census[0].dy_stride == 8u * 8 * 8);
    CHECK(census[0].x_stride == 3u * 8 * 8);
    CHECK(census[0].dx_stride == 0);  // a convolution on the images: no backward data
    CHECK(census[1].first == "same");
    CHECK_FALSE(census[1].sliced());
    CHECK(census[1].y_stride == 4u * 8 * 8);
    // bench-gpu-conv's buffers hold both problems on their views: "a"'s
    // output slice takes 2 images of 8x8x8 floats though the tensor holds 4
    // channels; the inputs are the images (2 of 3x8x8), the filters 4x3.
    const ConvCensusBuffers floats = conv_census_buffers(census);
    CHECK(floats.y == 2u * 8 * 8 * 8);
    CHECK(floats.dy == 2u * 8 * 8 * 8);
    CHECK(floats.x == 2u * 3 * 8 * 8);
    CHECK(floats.dx == 2u * 3 * 8 * 8);  // no backward data: the whole tensor still
    CHECK(floats.w == 4u * 3);
    CHECK(conv_census_buffers({}).y == 1);
    // The bundled nets put a ReLU (or a batch norm) between a branch's
    // convolution and its concat: none of their convolutions takes a slice.
    for (const char* net : {"googlenet", "inception_v3"}) {
        TrainConfig c;
        c.model.net = net;
        c.model.batch = 2;  // at batch 1 a slice's view has no image stride of its own to tell
        c.model.image = default_image(net);
        for (const ConvCensusEntry& e : conv_census(build_training_graph(c))) {
            CAPTURE(e.first);
            CHECK_FALSE(e.sliced());
        }
    }
}
