// Whole training steps on the GPU (suite 'gpu'): a CudaModel starts from
// HostModel's bits and trains like it (within near_host.hpp's tolerance, in
// FP32); braid, nimble and
// glp4nn plans give the serial plan's bits in eager and graph mode on
// reduced GoogLeNet (with its auxiliary heads) and ResNet-50; a plan that
// splits every op gives the whole-batch bits under the split granule; with
// cuDNN's batch norm, plans keep the serial bits and training stays near
// the host.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "braid/exec/executor.hpp"
#include "braid/model/device_table.hpp"
#include "braid/model/estimate.hpp"
#include "braid/planner/calibration_table.hpp"
#include "braid/planner/make_plan.hpp"
#include "braid/planner/strategies/assemble.hpp"
#include "braid/planner/strategies/serial.hpp"
#include "cuda/cuda_model.hpp"
#include "cuda/cuda_trainer.hpp"
#include "near_host.hpp"
#include "train/host_model.hpp"
#include "train/training_graph.hpp"
#include "train/weights.hpp"

using namespace braid::samples;

namespace {

TrainConfig small(const std::string& net) {
    TrainConfig c;
    c.model.net = net;
    c.model.batch = 4;
    c.model.classes = 5;
    c.model.width_scale = 0.125;
    c.model.image = net == "googlenet" ? 47 : 32;
    return c;
}

// Runs `iterations` iterations of `plan` (after a warm-up) and returns the weights.
WeightSnapshot train(const TrainingGraph& tg, const braid::Plan& plan, const CudaRunOptions& o, int iterations,
                     double* loss = nullptr) {
    CudaTrainer t(tg, plan, o);
    t.warm_up();
    for (int i = 0; i < iterations; ++i) (void)t.iterate();
    if (loss) *loss = t.loss();
    return t.weights();
}

// Every parameter/state element of `gpu` near the host's (near_host.hpp
// gives the bound and why it holds for these configurations).
void check_near_host(const WeightSnapshot& gpu, const WeightSnapshot& host) {
    const TrainingGraph& tg = *host.graph;
    for (braid::BufferId id = 0; id < tg.buffers.size(); ++id)
        if (is_weight(tg.buffers[id])) REQUIRE(gpu.buffers[id].size() == host.buffers[id].size());
    const samples_test::NearCount c = samples_test::count_near(gpu, host);
    CAPTURE(c.worst);
    CHECK(c.different_integers.empty());
    CHECK(c.beyond_loose == 0);
    CHECK_MESSAGE(c.beyond_tight * 1000 <= c.elements, c.beyond_tight << " of " << c.elements
                                                                      << " elements beyond the tight bound");
    MESSAGE(tg.network.name() << ": " << c.beyond_tight << " of " << c.elements
                              << " weight elements beyond the tight bound");
}

// braid's graph-mode plan for `tg` on up to 3 streams, from estimates.
braid::Plan braid_plan(const TrainingGraph& tg) {
    const braid::DeviceSpec& device = braid::find_device("h200");
    braid::PlanOptions po;
    po.strategy = "braid";
    po.max_streams = 3;
    po.mode = braid::LaunchMode::graph;
    return braid::make_plan(tg.graph, device, braid::estimate_costs(device, op_estimates(tg)), po);
}

// Two steps of `plan` and of the serial plan, eager and in graph mode: the same bits and losses.
void check_plan_bits(const TrainingGraph& tg, const braid::Plan& plan, CudaRunOptions o) {
    for (const bool graph : {false, true}) {
        CAPTURE(graph);
        o.graph_mode = graph;
        double plan_loss = 0.0, serial_loss = 0.0;
        const WeightComparison cmp = compare_weights(train(tg, plan, o, 2, &plan_loss),
                                                     train(tg, braid::strategy::serial(tg.graph), o, 2, &serial_loss));
        CAPTURE(cmp.describe());
        CHECK(cmp.identical);
        CHECK(plan_loss == serial_loss);
    }
}

// Two serial steps of `config` with `exact` (deterministic, FP32) against
// HostModel's: the loss, and every weight within near_host.hpp's bounds.
void check_steps_near_host(const TrainConfig& config, const CudaRunOptions& exact) {
    const TrainingGraph tg = build_training_graph(config);
    HostModel host(tg);
    for (int it = 0; it < 2; ++it) host.run_serial_iteration();
    double gpu_loss = 0.0;
    const WeightSnapshot gpu = train(tg, braid::strategy::serial(tg.graph), exact, 2, &gpu_loss);
    CHECK(gpu_loss == doctest::Approx(host.loss()).epsilon(1e-4));
    check_near_host(gpu, snapshot_weights(host));
}
void check_steps_near_host(const std::string& net, const CudaRunOptions& exact) {
    check_steps_near_host(samples_test::near_host_config(net), exact);
}
// The first step's loss of `config` with `exact` against HostModel's: for a
// net whose weights after a step are too ill-conditioned to compare
// (Inception-v3, near_host.hpp), its forward pass still is not.
void check_first_loss_near_host(const TrainConfig& config, const CudaRunOptions& exact) {
    const TrainingGraph tg = build_training_graph(config);
    HostModel host(tg);
    host.run_serial_iteration();
    double gpu_loss = 0.0;
    (void)train(tg, braid::strategy::serial(tg.graph), exact, 1, &gpu_loss);
    CHECK(gpu_loss == doctest::Approx(host.loss()).epsilon(1e-4));
}

// `check(tg, plan, options)` for `c` with separate and fused ReLUs (shared
// sums with fused ones), own and cuDNN batch norms (cuDNN's with fused
// ReLUs only unless `cudnn_unfused`): braid's plan, NHWC, deterministic.
template <class F>
void for_each_nhwc_setting(TrainConfig c, bool cudnn_unfused, F&& check) {
    for (const bool fused : {false, true}) {
        c.model.fuse_relu = fused;
        c.model.share_batch_norm_sums = fused;
        CAPTURE(fused);
        const TrainingGraph tg = build_training_graph(c);
        REQUIRE(channels_last_unfit(tg.network) == "");
        const braid::Plan plan = braid_plan(tg);
        for (const bool cudnn_bn : {false, true}) {
            if (cudnn_bn && !fused && !cudnn_unfused) continue;
            CAPTURE(cudnn_bn);
            CudaRunOptions o;
            o.deterministic = true;
            o.channels_last = true;
            o.cudnn_batch_norm = cudnn_bn;
            o.split_granule = split_granule(plan, tg.graph);
            check(tg, plan, o);
        }
    }
}

// Each splittable op in `parts` parts, all on one stream, in topological order.
braid::Plan split_everything(const braid::OpGraph& graph, std::uint32_t parts) {
    std::vector<braid::strategy::Placement> order;
    for (braid::OpId op : graph.topological_order())
        order.push_back({op, std::vector<std::uint32_t>(graph.op(op).splittable() ? parts : 1, 0)});
    return braid::strategy::assemble(graph, "split", {}, "", {0}, order);
}

// Two steps of `tg` (a graph option on) with braid's graph-mode plan and
// serially, deterministic algorithms and the plan's split granule, bit for
// bit; then the serial run against the same steps of `plain` (the graph
// without the option: the same buffers, other ops), parameter by parameter.
void check_against_plain(const TrainingGraph& tg, const TrainingGraph& plain) {
    CudaRunOptions o;
    o.deterministic = true;
    o.graph_mode = true;
    const braid::Plan plan = braid_plan(tg);
    o.split_granule = split_granule(plan, tg.graph);  // the same library calls in every run below
    double planned_loss = 0.0, serial_loss = 0.0, plain_loss = 0.0;
    const WeightSnapshot serial = train(tg, braid::strategy::serial(tg.graph), o, 2, &serial_loss);
    const WeightComparison cmp = compare_weights(train(tg, plan, o, 2, &planned_loss), serial);
    CAPTURE(cmp.describe());
    CHECK(cmp.identical);
    CHECK(planned_loss == serial_loss);
    const WeightSnapshot reference = train(plain, braid::strategy::serial(plain.graph), o, 2, &plain_loss);
    CHECK(serial_loss == plain_loss);
    REQUIRE(serial.buffers.size() == reference.buffers.size());
    std::size_t compared = 0;
    for (LayerId l = 0; l < tg.layers.size(); ++l)
        for (braid::BufferId p : tg.layers[l].params) {
            ++compared;
            CHECK(serial.buffers[p] == reference.buffers[p]);
        }
    CHECK(compared > 150);
}

}  // namespace

TEST_SUITE("gpu") {

TEST_CASE("a CudaModel starts from HostModel's bits and trains like it") {
    for (const std::string net : {"googlenet", "resnet18"}) {
        CAPTURE(net);
        const TrainingGraph tg = build_training_graph(samples_test::near_host_config(net));
        HostModel host(tg);
        {
            const CudaModel start(tg);
            const WeightComparison same = compare_weights(start, host);
            CAPTURE(same.describe());
            CHECK(same.identical);
            CHECK(same.tensors_compared > 10);
        }
        CudaRunOptions exact;
        exact.deterministic = true;
        exact.tf32 = false;
        const braid::Plan serial = braid::strategy::serial(tg.graph);
        for (int it = 0; it < 2; ++it) host.run_serial_iteration();
        double gpu_loss = 0.0;
        const WeightSnapshot gpu = train(tg, serial, exact, 2, &gpu_loss);
        CHECK(std::isfinite(gpu_loss));
        CHECK(gpu_loss == doctest::Approx(host.loss()).epsilon(1e-4));
        check_near_host(gpu, snapshot_weights(host));

        // TF32 and the fastest algorithms train too: the loss stays close.
        CudaRunOptions fast;
        double fast_loss = 0.0;
        (void)train(tg, serial, fast, 2, &fast_loss);
        CHECK(fast_loss == doctest::Approx(host.loss()).epsilon(2e-2));
    }
}

TEST_CASE("braid, nimble and glp4nn plans give the serial bits on the GPU, eager and graph mode") {
    const braid::DeviceSpec& device = braid::find_device("h200");
    for (const std::string net : {"googlenet", "resnet50"}) {
        const TrainingGraph tg = build_training_graph(small(net));
        const braid::OpCosts costs = braid::estimate_costs(device, op_estimates(tg));
        const braid::Plan serial = braid::strategy::serial(tg.graph, device.key);
        for (const bool graph : {false, true}) {
            std::map<std::uint32_t, WeightSnapshot> serial_by_granule;
            for (const std::string strategy : {"braid", "nimble", "glp4nn"}) {
                braid::PlanOptions po;
                po.strategy = strategy;
                po.max_streams = 3;
                po.mode = graph ? braid::LaunchMode::graph : braid::LaunchMode::eager;
                const braid::Plan plan = braid::make_plan(tg.graph, device, costs, po);
                CudaRunOptions o;
                o.graph_mode = graph;
                o.deterministic = true;
                o.split_granule = split_granule(plan, tg.graph);
                CAPTURE(net);
                CAPTURE(graph);
                CAPTURE(strategy);
                CAPTURE(o.split_granule);
                auto it = serial_by_granule.find(o.split_granule);
                if (it == serial_by_granule.end())
                    it = serial_by_granule.emplace(o.split_granule, train(tg, serial, o, 2)).first;
                const WeightComparison cmp = compare_weights(train(tg, plan, o, 2), it->second);
                CAPTURE(cmp.describe());
                CHECK(cmp.identical);
            }
        }
    }
}

TEST_CASE("cuDNN's engine choices: named for convolution passes only, the same for every trainer of the process") {
    const TrainingGraph tg = build_training_graph(small("resnet50"));
    CudaRunOptions o;
    o.deterministic = true;
    const std::vector<braid::ConvEngineFamily> probed = probe_conv_engines(tg, o);
    REQUIRE(probed.size() == tg.graph.op_count());
    for (std::size_t i = 0; i < probed.size(); ++i) {
        CAPTURE(tg.graph.op(static_cast<braid::OpId>(i)).name);
        if (!runs_conv_pass(tg, i)) CHECK(probed[i] == braid::ConvEngineFamily::other);
    }
    MESSAGE("resnet50 (reduced): " << describe_conv_engines(tg, probed));
    // A plan made with them, trained in graph mode: its trainer's choices are the probe's (one cache).
    const braid::DeviceSpec& device = braid::find_device("h200");
    const PlanningModel model =
        planning_model(tg, device, braid::builtin_calibration(device), braid::LaunchMode::graph, probed);
    braid::PlanOptions po;
    po.strategy = "braid";
    po.max_streams = 3;
    po.mode = braid::LaunchMode::graph;
    po.sim = model.sim;
    const braid::Plan plan = braid::make_plan(tg.graph, device, model.costs, po);
    o.graph_mode = true;
    o.split_granule = split_granule(plan, tg.graph);
    CudaTrainer trainer(tg, plan, o);
    trainer.warm_up();
    if (o.split_granule == 0) CHECK(trainer.conv_engines() == probed);
}

TEST_CASE("shared batch-norm sums give the bits of two backward passes on the GPU, serial and braid's plan") {
    TrainConfig c = small("resnet50");
    c.model.fuse_relu = true;
    const TrainingGraph plain = build_training_graph(c);
    c.model.share_batch_norm_sums = true;
    check_against_plain(build_training_graph(c), plain);
}

TEST_CASE("update buckets give the per-layer updates' bits on the GPU, serial and braid's plan in graph mode") {
    TrainConfig c = small("resnet50");
    const TrainingGraph per_layer = build_training_graph(c);
    c.model.update_bucket_bytes = std::uint64_t{1} << 40;  // one update op: 161 tensors in three launches
    check_against_plain(build_training_graph(c), per_layer);
}

TEST_CASE("ReLUs fused into batch norms and adds give the bits of the separate layers on the GPU") {
    TrainConfig v = small("inception_v3");  // its fused outputs are concat slices
    v.model.image = 75;
    v.model.aux_classifiers = false;
    for (TrainConfig c : {small("resnet18"), v}) {
        CAPTURE(c.model.net);
        CudaRunOptions o;
        o.deterministic = true;  // the process's algorithm cache gives both graphs the same convolutions
        const TrainingGraph plain = build_training_graph(c);
        c.model.fuse_relu = true;
        const TrainingGraph fused = build_training_graph(c);
        double plain_loss = 0.0, fused_loss = 0.0;
        const WeightSnapshot a = train(plain, braid::strategy::serial(plain.graph), o, 2, &plain_loss);
        const WeightSnapshot b = train(fused, braid::strategy::serial(fused.graph), o, 2, &fused_loss);
        CHECK(plain_loss == fused_loss);
        std::size_t compared = 0, different = 0;
        for (const LayerNode& l : fused.network.layers()) {
            const LayerBuffers& fb = fused.layers[fused.network.layer_id(l.name)];
            const LayerBuffers& pb = plain.layers[plain.network.layer_id(l.name)];
            REQUIRE(fb.params.size() == pb.params.size());
            REQUIRE(fb.aux.size() == pb.aux.size());
            std::vector<std::pair<braid::BufferId, braid::BufferId>> pairs;
            for (std::size_t i = 0; i < fb.params.size(); ++i) pairs.emplace_back(pb.params[i], fb.params[i]);
            for (std::size_t i = 0; i < fb.aux.size(); ++i) pairs.emplace_back(pb.aux[i], fb.aux[i]);
            for (const auto& [pa, fa] : pairs) {
                ++compared;
                const bool same = a.buffers[pa].size() == b.buffers[fa].size() &&
                                  std::memcmp(a.buffers[pa].data(), b.buffers[fa].data(), a.buffers[pa].size()) == 0;
                if (!same) {
                    ++different;
                    MESSAGE("differs: " << l.name);
                }
            }
        }
        CHECK(compared > 50);
        CHECK(different == 0);
    }
}

TEST_CASE("cuDNN's batch norm: braid's plan gives the serial bits, eager and graph mode; training stays near the host") {
    TrainConfig v = small("inception_v3");  // fused outputs into concat slices
    v.model.image = 75;
    v.model.aux_classifiers = false;
    TrainConfig r = small("resnet50");
    for (TrainConfig c : {r, v}) {
        for (const bool fused : {false, true}) {
            c.model.fuse_relu = fused;
            c.model.share_batch_norm_sums = fused;
            CAPTURE(c.model.net);
            CAPTURE(fused);
            const TrainingGraph tg = build_training_graph(c);
            const braid::Plan plan = braid_plan(tg);
            CudaRunOptions o;
            o.deterministic = true;
            o.cudnn_batch_norm = true;
            o.split_granule = split_granule(plan, tg.graph);
            {
                CudaTrainer t(tg, plan, o);
                t.warm_up();
                const CudaTrainer::BatchNormUse use = t.batch_norm_use();
                for (const std::string& d : use.declined) MESSAGE("declined: " << d);
                CHECK(use.cudnn_passes > 0);
                CHECK(use.cudnn_passes + use.own_passes > 40);
            }
            check_plan_bits(tg, plan, o);
        }
    }
    // Against the host reference, as the own kernels are (near_host.hpp's bounds).
    CudaRunOptions exact;
    exact.deterministic = true;
    exact.tf32 = false;
    exact.cudnn_batch_norm = true;
    check_steps_near_host("resnet18", exact);
}

TEST_CASE("NHWC activations: braid's plan gives the serial bits, eager and graph mode, own and cuDNN batch norm; training stays near the host") {
    // cuDNN's batch norm as it is used: with shared sums.
    for_each_nhwc_setting(small("resnet50"), false, check_plan_bits);
    // KRSC filters on the device, KCRS in snapshots: an NHWC model starts from HostModel's bits.
    {
        const TrainingGraph tg = build_training_graph(samples_test::near_host_config("resnet18"));
        CudaModelOptions nhwc;
        nhwc.layers.layout = cuda::TensorLayout::nhwc;
        const CudaModel start(tg, nhwc);
        const HostModel host(tg);
        const WeightComparison same = compare_weights(start, host);
        CAPTURE(same.describe());
        CHECK(same.identical);
    }
    // Against the host reference after two steps (near_host.hpp's bounds).
    CudaRunOptions exact;
    exact.deterministic = true;
    exact.tf32 = false;
    exact.channels_last = true;
    check_steps_near_host("resnet18", exact);
    // Inception-v3: its concats' inputs are NHWC channel slices (batch norm
    // + ReLU and max pools write them, pixels the concat's channels apart).
    TrainConfig v = small("inception_v3");
    v.model.image = 75;
    v.model.aux_classifiers = false;
    for_each_nhwc_setting(v, true, [](const TrainingGraph& tg, const braid::Plan& plan, const CudaRunOptions& o) {
        if (o.cudnn_batch_norm) {  // the slices' batch norms run on the own kernels, and say so
            // Only a fused ReLU makes a batch norm write a concat slice; unfused,
            // a ReLU layer writes it and every batch norm sees whole tensors.
            bool bn_writes_slice = false;
            for (const LayerNode& layer : tg.network.layers()) {
                if (!std::holds_alternative<Concat>(layer.spec)) continue;
                for (const TensorId in : layer.inputs) {
                    const std::optional<LayerId> producer = tg.network.tensor(in).producer;
                    bn_writes_slice = bn_writes_slice ||
                                      (producer && std::holds_alternative<BatchNorm2d>(tg.network.layer(*producer).spec));
                }
            }
            CAPTURE(bn_writes_slice);
            CudaTrainer t(tg, plan, o);
            t.warm_up();
            const CudaTrainer::BatchNormUse use = t.batch_norm_use();
            CHECK(use.cudnn_passes > 0);
            if (bn_writes_slice) CHECK(use.own_passes > 0);
            bool named = false;
            for (const std::string& d : use.declined) named = named || d.find("NHWC channel slice") != std::string::npos;
            CHECK(named == bn_writes_slice);
        }
        check_plan_bits(tg, plan, o);
    });
    check_first_loss_near_host(samples_test::near_host_config("inception_v3"), exact);

    // GoogLeNet with its auxiliary heads: biased convolutions (the NHWC bias
    // kernels), LRN (own NHWC kernels), concats of ReLU outputs, and, at
    // 96x96, the heads' fully connected layers over 2x2 pixels (through
    // NCHW copies in lane scratch, reserved before capture).
    TrainConfig g = small("googlenet");
    g.model.image = 96;
    {
        const TrainingGraph tg = build_training_graph(g);
        REQUIRE(channels_last_unfit(tg.network) == "");
        int wide_fcs = 0;
        for (const LayerNode& node : tg.network.layers())
            if (const auto* f = std::get_if<FullyConnected>(&node.spec)) wide_fcs += f->in.plane_elements() > 1 ? 1 : 0;
        REQUIRE(wide_fcs == 2);
        const braid::Plan plan = braid_plan(tg);
        CudaRunOptions o;
        o.deterministic = true;
        o.channels_last = true;
        o.split_granule = split_granule(plan, tg.graph);
        check_plan_bits(tg, plan, o);
    }
    check_steps_near_host(samples_test::near_host_config("googlenet", 96), exact);
}

TEST_CASE("programmatic launches give the plain launches' bits on the GPU, serial and braid's plan, eager and graph mode") {
    if (const std::string why = programmatic_launch_unavailable_reason(); !why.empty()) {
        MESSAGE(why);
        CudaRunOptions o;
        o.programmatic_launch = true;
        const TrainingGraph tg = build_training_graph(small("resnet50"));
        CHECK_THROWS_WITH_AS(CudaTrainer(tg, braid::strategy::serial(tg.graph), o),
                             doctest::Contains("compute capability 9.0 or newer"), braid::Error);
        return;
    }
    for (const std::string net : {"googlenet", "resnet50"})
        for (const bool nhwc : {false, true}) {
            TrainConfig c = small(net);
            c.model.fuse_relu = nhwc;
            CAPTURE(net);
            CAPTURE(nhwc);
            const TrainingGraph tg = build_training_graph(c);
            const braid::Plan plan = braid_plan(tg);
            const braid::Plan serial = braid::strategy::serial(tg.graph);
            CudaRunOptions plain;
            plain.deterministic = true;
            plain.channels_last = nhwc;
            plain.cudnn_batch_norm = nhwc;
            plain.split_granule = split_granule(plan, tg.graph);
            CudaRunOptions programmatic = plain;
            programmatic.programmatic_launch = true;
            for (const bool graph : {false, true}) {
                CAPTURE(graph);
                plain.graph_mode = programmatic.graph_mode = graph;
                double plain_loss = 0.0, serial_loss = 0.0, plan_loss = 0.0;
                const WeightSnapshot reference = train(tg, serial, plain, 2, &plain_loss);
                // Trains `run` programmatically; in graph mode the capture must show programmatic edges
                // (else the launches were plain and the bits prove nothing).
                const auto programmatic_run = [&](const braid::Plan& run, double* loss) {
                    CudaTrainer t(tg, run, programmatic);
                    t.warm_up();
                    for (int i = 0; i < 2; ++i) (void)t.iterate();
                    *loss = t.loss();
                    if (graph) CHECK(t.programmatic_edges() > 0);
                    return t.weights();
                };
                const WeightComparison s = compare_weights(programmatic_run(serial, &serial_loss), reference);
                const WeightComparison p = compare_weights(programmatic_run(plan, &plan_loss), reference);
                CAPTURE(s.describe());
                CAPTURE(p.describe());
                CHECK(s.identical);
                CHECK(p.identical);
                CHECK(serial_loss == plain_loss);
                CHECK(plan_loss == plain_loss);
            }
        }
}

TEST_CASE("compare_runs measures both runs in the launch mode they share, eager or graph") {
    const TrainingGraph tg = build_training_graph(small("resnet18"));
    const braid::Plan serial = braid::strategy::serial(tg.graph);
    for (const bool graph : {false, true}) {
        CAPTURE(graph);
        CudaRunOptions base, variant;
        base.graph_mode = variant.graph_mode = graph;
        variant.cudnn_batch_norm = true;
        const RunComparison c = compare_runs(tg, serial, base, variant, 3);
        CHECK(c.rounds == 3);
        CHECK(c.base_median_ms > 0.0);
        CHECK(c.variant_median_ms > 0.0);
        CHECK(c.speedup > 0.0);
        CAPTURE(c.base_launches);
        CAPTURE(c.variant_launches);
        // A warm-up, an untimed first run and three rounds each.
        const std::string want = graph ? "graph: 1 captures" : "eager: 5 iterations";
        CHECK(c.base_launches.rfind(want, 0) == 0);
        CHECK(c.variant_launches.rfind(want, 0) == 0);
    }
}

TEST_CASE("every op in 3 parts: the split granule gives the whole-batch bits, plain parts stay within tolerance") {
    for (const std::string net : {"googlenet", "resnet18"}) {
        CAPTURE(net);
        const TrainingGraph tg = build_training_graph(samples_test::near_host_config(net));
        const braid::Plan parts = split_everything(tg.graph, 3);
        const braid::Plan serial = braid::strategy::serial(tg.graph);
        const std::uint32_t granule = split_granule(parts, tg.graph);
        CHECK(granule == 1);  // a batch of 4 in parts of 2 + 1 + 1

        CudaRunOptions chunked;
        chunked.deterministic = true;
        chunked.split_granule = granule;
        const WeightComparison exact = compare_weights(train(tg, parts, chunked, 2), train(tg, serial, chunked, 2));
        CAPTURE(exact.describe());
        CHECK(exact.identical);

        // Without a granule a part's library calls may take other kernels: a rounding
        // difference, bounded like CudaModel's against the host, in FP32. With TF32 a
        // split may swap a tensor-core kernel (10-bit products) for an FMA one, and the
        // difference is TF32's own error: the H200 run saw conv1.weight 0.00155 apart.
        CudaRunOptions plain;
        plain.deterministic = true;
        plain.tf32 = false;
        // near_host.hpp's bounds: a ReLU or max-pool decision within rounding may flip and move a few elements.
        const WeightSnapshot split = train(tg, parts, plain, 2), whole = train(tg, serial, plain, 2);
        const samples_test::NearCount near = samples_test::count_near(split, whole);
        CAPTURE(near.worst);
        CHECK(near.near());
        MESSAGE(net << ": parts without a granule are " << (compare_weights(split, whole).identical ? "" : "NOT ")
                    << "bitwise equal to the whole batch (" << near.beyond_tight << " of " << near.elements
                    << " elements beyond the tight bound)");

        // A granule the parts do not fall on is an error naming the op.
        CudaRunOptions misaligned;
        misaligned.deterministic = true;
        misaligned.split_granule = 2;
        CudaTrainer t(tg, parts, misaligned);
        CHECK_THROWS_WITH_AS(t.warm_up(), doctest::Contains("split granule"), braid::ExecutionError);
    }
}

}  // TEST_SUITE
