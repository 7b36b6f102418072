// Backend-neutral pieces the CUDA part builds on, tested on the host: the
// shared initial values, weight snapshots compared bit for bit and within a
// tolerance, and the split granule of a plan.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "braid/model/device_table.hpp"
#include "braid/model/estimate.hpp"
#include "braid/planner/make_plan.hpp"
#include "braid/planner/strategies/assemble.hpp"
#include "braid/planner/strategies/serial.hpp"
#include "samples_test_util.hpp"
#include "train/host_model.hpp"
#include "train/initial_values.hpp"
#include "train/split_granule.hpp"
#include "train/weights.hpp"

using namespace samples_test;

namespace {

TrainConfig tiny_config(const std::string& net) {
    TrainConfig c;
    c.model.net = net;
    c.model.batch = 4;
    c.model.image = 32;
    c.model.classes = 4;
    c.model.width_scale = 0.125;
    c.model.aux_classifiers = false;
    return c;
}

void set_float(WeightSnapshot& s, braid::BufferId id, std::size_t index, float v) {
    std::memcpy(s.buffers.at(id).data() + index * sizeof(float), &v, sizeof(float));
}

}  // namespace

TEST_SUITE("cpu") {

TEST_CASE("initial values: each rule, and HostModel uses them") {
    std::vector<float> v(6, -7.0f);
    fill_initial_parameter({"b", vector_shape(6), 0, InitRule::zeros, false}, 1, 0, v.data());
    CHECK(v == std::vector<float>(6, 0.0f));
    fill_initial_parameter({"g", vector_shape(6), 0, InitRule::ones, false}, 1, 0, v.data());
    CHECK(v == std::vector<float>(6, 1.0f));
    fill_initial_parameter({"c", vector_shape(6), 0, InitRule::constant, false, 0.2f}, 1, 0, v.data());
    CHECK(v == std::vector<float>(6, 0.2f));
    fill_initial_parameter({"w", vector_shape(6), 24, InitRule::he_uniform, true}, 1, 3, v.data());
    const float bound = static_cast<float>(std::sqrt(6.0 / 24));
    for (float x : v) CHECK(std::abs(x) <= bound);
    CHECK(v[0] != v[1]);
    fill_initial_aux({"running_var", vector_shape(6), BufferRole::state, InitRule::ones}, v.data());
    CHECK(v == std::vector<float>(6, 1.0f));

    // The first parameter of resnet18 (conv1.weight, ordinal 0) as HostModel holds it.
    const TrainingGraph tg = build_training_graph(tiny_config("resnet18"));
    const HostModel model(tg);
    const LayerBuffers& conv1 = tg.layers[tg.network.layer_id("conv1")];
    const ParamSpec spec = parameters_of(tg.network.layer(tg.network.layer_id("conv1")).spec)[0];
    std::vector<float> expected(spec.elements());
    fill_initial_parameter(spec, tg.seed, 0, expected.data());
    CHECK(same_bits(model.values(conv1.params[0]), expected));
}

TEST_CASE("weight snapshots: bitwise and tolerance comparisons name the tensor") {
    const TrainingGraph tg = build_training_graph(tiny_config("resnet18"));
    HostModel a(tg), b(tg);
    WeightSnapshot sa = snapshot_weights(a), sb = snapshot_weights(b);
    WeightComparison same = compare_weights(sa, sb);
    CHECK(same.identical);
    CHECK(same.tensors_compared == compare_weights(a, b).tensors_compared);
    CHECK(compare_weights_within(sa, sb, 0.0, 0.0).within);

    const braid::BufferId w = tg.layers[tg.network.layer_id("fc")].params[0];
    float original = 0.0f;
    std::memcpy(&original, sb.buffers[w].data() + 5 * sizeof(float), sizeof(float));
    set_float(sb, w, 5, original * (1.0f + 1e-3f));
    const WeightComparison diff = compare_weights(sa, sb);
    CHECK_FALSE(diff.identical);
    CHECK(diff.tensor == "fc.weight");
    CHECK(diff.index == 5);
    CHECK(diff.describe().find("first difference: tensor 'fc.weight' index 5") != std::string::npos);
    const ToleranceComparison tight = compare_weights_within(sa, sb, 1e-4, 0.0);
    CHECK_FALSE(tight.within);
    CHECK(tight.tensor == "fc.weight");
    CHECK(tight.describe().find("outside tolerance: tensor 'fc.weight' index 5") != std::string::npos);
    const ToleranceComparison loose = compare_weights_within(sa, sb, 1e-2, 0.0);
    CHECK(loose.within);
    CHECK(loose.max_tensor == "fc.weight");
    CHECK(loose.describe().find("within tolerance") != std::string::npos);

    // The step is an integer: equal or not, whatever the tolerance.
    a.run_serial_iteration();
    const WeightSnapshot trained = snapshot_weights(a);
    CHECK_FALSE(compare_weights_within(trained, snapshot_weights(b), 1.0, 1.0).within);

    const TrainingGraph other = build_training_graph(tiny_config("resnet34"));
    const HostModel c(other);
    CHECK_THROWS_AS(compare_weights(sa, snapshot_weights(c)), braid::Error);
}

TEST_CASE("the split granule of a plan divides every part boundary") {
    const TrainingGraph tg = build_training_graph(tiny_config("googlenet"));
    CHECK(split_granule(braid::strategy::serial(tg.graph), tg.graph) == 0);
    const auto split_all = [&](std::uint32_t parts) {
        std::vector<braid::strategy::Placement> order;
        for (braid::OpId op : tg.graph.topological_order())
            order.push_back({op, std::vector<std::uint32_t>(tg.graph.op(op).splittable() ? parts : 1, 0)});
        return braid::strategy::assemble(tg.graph, "split", {}, "", {0}, order);
    };
    CHECK(split_granule(split_all(2), tg.graph) == 2);  // 4 images: [0, 2), [2, 4)
    CHECK(split_granule(split_all(3), tg.graph) == 1);  // [0, 2), [2, 3), [3, 4)
    CHECK(split_granule(split_all(4), tg.graph) == 1);

    const braid::DeviceSpec& dev = braid::find_device("h200");
    braid::PlanOptions po;
    po.strategy = "glp4nn";
    po.max_streams = 3;
    const braid::Plan plan = braid::make_plan(tg.graph, dev, braid::estimate_costs(dev, op_estimates(tg)), po);
    const std::uint32_t g = split_granule(plan, tg.graph);
    for (const braid::PlanStep& s : plan.steps) {
        if (s.parts <= 1) continue;
        CHECK(g > 0);
        const braid::BatchRange r = braid::split_range(tg.batch(), s.parts, s.part);
        CHECK(r.begin % g == 0);
        CHECK(r.end % g == 0);
    }
}

}  // TEST_SUITE
