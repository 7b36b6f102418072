// The integration example of docs/integration.md, compiled and run as a
// test: a small model with two parallel branches, planned by braid (and
// tuned on the host) and run on the host backend, must give exactly the
// serial results.
#include <cmath>
#include <cstdio>
#include <vector>

#include <braid/braid.hpp>

namespace {

// The user's own layer code: y = relu(W x), on plain vectors.
void dense_relu(const std::vector<float>& w, const std::vector<float>& x, std::vector<float>& y) {
    const std::size_t n = y.size(), m = x.size();
    for (std::size_t i = 0; i < n; ++i) {
        float s = 0.0f;
        for (std::size_t j = 0; j < m; ++j) s += w[i * m + j] * x[j];
        y[i] = s > 0.0f ? s : 0.0f;
    }
}

struct Model {
    std::vector<float> x = std::vector<float>(256, 0.5f), wa, wb, a = std::vector<float>(256), b = std::vector<float>(256),
                       out = std::vector<float>(256);
    Model() : wa(256 * 256), wb(256 * 256) {
        for (std::size_t i = 0; i < wa.size(); ++i) wa[i] = std::sin(0.001f * static_cast<float>(i));
        for (std::size_t i = 0; i < wb.size(); ++i) wb[i] = std::cos(0.002f * static_cast<float>(i));
    }
};

enum class Planner { serial, braid, tuned };

std::vector<float> train(Model& m, Planner how) {
    // [integration]
    // 1. Describe one step: buffers and what each op reads and writes.
    braid::OpGraphBuilder g;
    const auto x = g.add_buffer("x", 1024), wa = g.add_buffer("wa", 262144), wb = g.add_buffer("wb", 262144);
    const auto a = g.add_buffer("a", 1024), b = g.add_buffer("b", 1024), out = g.add_buffer("out", 1024);
    const auto op_a = g.add_op({"branch_a", braid::OpKind::forward, "a", {x, wa}, {a}});
    const auto op_b = g.add_op({"branch_b", braid::OpKind::forward, "b", {x, wb}, {b}});
    const auto op_sum = g.add_op({"sum", braid::OpKind::forward, "sum", {a, b}, {out}});
    const auto op_feed = g.add_op({"feed_back", braid::OpKind::update, "x", {out}, {x}});
    const braid::OpGraph graph = g.finalize();

    // 2. Costs: FLOPs, bytes and a launch shape per kernel (or a profile).
    const braid::DeviceSpec& dev = braid::find_device("h200");
    const braid::KernelEstimate gemv{{"gemv", {2, 1, 1}, {128, 1, 1}, 32}, 2.0 * 256 * 256, 4.0 * 256 * 257};
    const braid::KernelEstimate add{{"add", {1, 1, 1}, {256, 1, 1}, 16}, 256, 3.0 * 1024};
    const braid::OpCosts costs = braid::estimate_costs(dev, std::vector<braid::OpEstimate>{{{gemv}}, {{gemv}}, {{add}}, {{add}}});

    // 3. Plan: which op goes on which stream, with which waits.
    braid::PlanOptions options;
    options.strategy = how == Planner::serial ? "serial" : "braid";
    braid::Plan plan = braid::make_plan(graph, dev, costs, options);

    // 4. Bodies, bound to a model (CudaBackend: bodies launch on lane.stream).
    using Exec = braid::Executor<braid::HostBackend>;
    const auto bind = [&](Model& model) {
        std::vector<Exec::Body> bodies(graph.op_count());
        bodies[op_a] = [&model](braid::HostLane&, const braid::OpContext&) { dense_relu(model.wa, model.x, model.a); };
        bodies[op_b] = [&model](braid::HostLane&, const braid::OpContext&) { dense_relu(model.wb, model.x, model.b); };
        bodies[op_sum] = [&model](braid::HostLane&, const braid::OpContext&) {
            for (std::size_t i = 0; i < model.out.size(); ++i) model.out[i] = model.a[i] + model.b[i];
        };
        bodies[op_feed] = [&model](braid::HostLane&, const braid::OpContext&) {
            for (std::size_t i = 0; i < model.x.size(); ++i) model.x[i] = model.out[i] / (1.0f + model.out[i]);
        };
        return bodies;
    };
    braid::HostBackend backend;

    // 5. Or tune: time braid's best plans and the baselines here, interleaved,
    //    and keep the fastest (on a model of their own: timing trains it).
    if (how == Planner::tuned) {
        braid::strategy::BraidOptions best;
        best.complete_top = 4;
        const auto candidates = braid::tune_candidates(braid::strategy::braid_plan(graph, dev, costs, best), 4);
        Model scratch;
        braid::ExecutorTiming<braid::HostBackend> timing(graph, backend, bind(scratch));
        braid::TuneOptions tuning;
        tuning.budget_s = 2.0;
        plan = candidates[braid::tune(graph, candidates, timing, tuning).winner].plan;
    }

    // 6. Run every iteration.
    Exec executor(graph, plan, backend, bind(m));
    for (int iteration = 0; iteration < 20; ++iteration) executor.run();
    // [integration end]
    std::printf("%-6s plan: %u streams, %zu waits\n", how == Planner::tuned ? "tuned" : options.strategy.c_str(),
                plan.stream_count(), plan.waits.size());
    return m.x;
}

}  // namespace

int main() {
    Model serial_model, braid_model, tuned_model;
    const std::vector<float> serial = train(serial_model, Planner::serial);
    const std::vector<float> planned = train(braid_model, Planner::braid);
    const std::vector<float> tuned = train(tuned_model, Planner::tuned);
    const bool same = serial == planned && serial == tuned;  // bit for bit
    std::printf("braid and tuned plans vs serial: %s\n", same ? "bitwise identical" : "DIFFERENT");
    return same ? 0 : 1;
}
