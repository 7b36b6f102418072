// The integration example of docs/integration.md, compiled and run as a
// test: a small model with two parallel branches, planned by braid and run
// on the host backend, must give exactly the serial results.
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

std::vector<float> train(Model& m, bool planned) {
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
    options.strategy = planned ? "braid" : "serial";
    const braid::Plan plan = braid::make_plan(graph, dev, costs, options);

    // 4. Bind bodies and run every iteration (CudaBackend: bodies launch on lane.stream).
    using Exec = braid::Executor<braid::HostBackend>;
    std::vector<Exec::Body> bodies(graph.op_count());
    bodies[op_a] = [&](braid::HostLane&, const braid::OpContext&) { dense_relu(m.wa, m.x, m.a); };
    bodies[op_b] = [&](braid::HostLane&, const braid::OpContext&) { dense_relu(m.wb, m.x, m.b); };
    bodies[op_sum] = [&](braid::HostLane&, const braid::OpContext&) {
        for (std::size_t i = 0; i < m.out.size(); ++i) m.out[i] = m.a[i] + m.b[i];
    };
    bodies[op_feed] = [&](braid::HostLane&, const braid::OpContext&) {
        for (std::size_t i = 0; i < m.x.size(); ++i) m.x[i] = m.out[i] / (1.0f + m.out[i]);
    };
    braid::HostBackend backend;
    Exec executor(graph, plan, backend, std::move(bodies));
    for (int iteration = 0; iteration < 20; ++iteration) executor.run();
    // [integration end]
    std::printf("%-6s plan: %u streams, %zu waits\n", options.strategy.c_str(), plan.stream_count(), plan.waits.size());
    return m.x;
}

}  // namespace

int main() {
    Model serial_model, braid_model;
    const std::vector<float> serial = train(serial_model, false);
    const std::vector<float> planned = train(braid_model, true);
    const bool same = serial == planned;  // bit for bit
    std::printf("braid plan vs serial: %s\n", same ? "bitwise identical" : "DIFFERENT");
    return same ? 0 : 1;
}
