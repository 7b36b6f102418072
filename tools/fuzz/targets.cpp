#include "targets.hpp"

#include <algorithm>
#include <array>
#include <stdexcept>
#include <string>

#include "braid/braid.hpp"
#include "braid/planner/calibration_json.hpp"
#include "braid/planner/calibration_table.hpp"
#include "braid/profiler/measurements.hpp"
#include "test_graphs.hpp"

namespace braid::fuzz {

namespace {

// The graph every plan input is read against: a small training step with
// splittable ops, so splits, waits and side streams are all reachable.
const testing::TestGraph& plan_graph() {
    static const testing::TestGraph g = testing::training_dag(7, 4, 2, "fuzz", 8);
    return g;
}

void same_after_round_trip(bool same, std::string_view what) {
    if (!same) throw Finding(std::string(what) + " changed after writing it out and reading it back");
}

// A kernel every device runs: the simulator and the occupancy model both
// see the device.
void run_on_device(const DeviceSpec& dev) {
    KernelCost k;
    k.shape = KernelShape{"probe", {static_cast<std::uint32_t>(dev.sm_count) * 3, 1, 1}, {128, 1, 1}, 32, 0, 0};
    k.duration_ns = 1000.0;
    sim::Program p;
    p.stream_priorities = {0};
    p.kernels.push_back(sim::Kernel{k, sim::no_op, "probe"});
    p.actions.push_back(sim::Action{sim::ActionKind::launch, 0, 0});
    (void)sim::simulate(dev, p);
}

Outcome device(std::string_view bytes) {
    const nlohmann::json j = detail::parse_json(std::string(bytes), "fuzz");
    const DeviceSpec d = device_from_json(j);
    same_after_round_trip(device_from_json(to_json(d)) == d, "the device");
    run_on_device(d);
    return Outcome::accepted;
}

Outcome graph(std::string_view bytes) {
    const nlohmann::json j = detail::parse_json(std::string(bytes), "fuzz");
    const OpGraph g = graph_from_json(j);
    same_after_round_trip(graph_from_json(to_json(g)) == g, "the graph");
    validate(strategy::nimble(g), g);
    return Outcome::accepted;
}

Outcome plan(std::string_view bytes) {
    const testing::TestGraph& tg = plan_graph();
    const nlohmann::json j = detail::parse_json(std::string(bytes), "fuzz");
    const Plan p = plan_from_json(j, tg.graph);
    same_after_round_trip(plan_from_json(to_json(p, tg.graph), tg.graph) == p, "the plan");
    validate(p, tg.graph);
    (void)predict(tg.graph, p, find_device("h200"), tg.costs, p.options.mode.value_or(sim::LaunchMode::graph));
    return Outcome::accepted;
}

Outcome profile(std::string_view bytes) {
    const nlohmann::json j = detail::parse_json(std::string(bytes), "fuzz");
    const Profile p = profile_from_json(j);
    same_after_round_trip(profile_from_json(to_json(p)) == p, "the profile");
    if (p.graph) {
        const OpCosts costs = costs_from_profile(p, *p.graph, p.device);
        (void)predict(*p.graph, strategy::serial(*p.graph), p.device, costs, sim::LaunchMode::graph);
    }
    return Outcome::accepted;
}

// A calibration is applied to estimates and to the simulator: both must run.
Outcome calibration(std::string_view bytes) {
    const nlohmann::json j = detail::parse_json(std::string(bytes), "fuzz");
    const Calibration c = calibration_from_json(j);
    same_after_round_trip(calibration_from_json(to_json(c)) == c, "the calibration");
    const testing::TestGraph& tg = plan_graph();
    const DeviceSpec& dev = find_device("h200");
    std::vector<OpEstimate> estimates;
    for (const OpCost& op : tg.costs) {
        OpEstimate e;
        for (const KernelCost& k : op.kernels) {
            KernelEstimate ke;
            ke.shape = k.shape;
            ke.flops = k.duration_ns * 1e4;
            ke.dram_bytes = k.duration_ns * 100;
            ke.kind = static_cast<KernelClass>(estimates.size() % kernel_class_count);
            e.kernels.push_back(ke);
        }
        estimates.push_back(std::move(e));
    }
    const OpCosts costs = calibrated_costs(dev, estimates, c, LaunchMode::eager);
    (void)predict(tg.graph, strategy::nimble(tg.graph), dev, costs, LaunchMode::eager, c.sim);
    (void)predict(tg.graph, strategy::nimble(tg.graph), dev, calibrated_costs(tg.costs, c, LaunchMode::graph),
                  LaunchMode::graph, c.sim);
    return Outcome::accepted;
}

// The document alone: the files its rows name are not opened.
Outcome measurements(std::string_view bytes) {
    const nlohmann::json j = detail::parse_json(std::string(bytes), "fuzz");
    (void)measurements_from_json(detail::JsonReader(j, "$"), ".");
    return Outcome::accepted;
}

using Target = Outcome (*)(std::string_view);
struct Entry {
    std::string_view name;
    Target run;
};
constexpr std::array<Entry, 6> targets{{{"device", device},
                                        {"graph", graph},
                                        {"plan", plan},
                                        {"profile", profile},
                                        {"calibration", calibration},
                                        {"measurements", measurements}}};
constexpr std::array<std::string_view, 6> names{"device", "graph", "plan", "profile", "calibration", "measurements"};

std::string text(const nlohmann::json& j) { return j.dump(1) + "\n"; }

// A profile of the plan graph as braid-profile would write it, from its costs.
Profile synthetic_profile(bool durations_only) {
    const testing::TestGraph& tg = plan_graph();
    Profile p;
    p.device = find_device("h200");
    p.graph_fingerprint = tg.graph.fingerprint();
    p.graph = tg.graph;
    p.run.network = "fuzz";
    p.run.settings = {{"batch", std::int64_t{8}}, {"width_scale", 0.5}, {"aux", false}, {"note", std::string("seed")}};
    p.run.warmup_iterations = 1;
    p.run.measured_iterations = 3;
    p.run.tool = "braid-fuzz-seeds";
    p.timing = durations_only ? ProfileTiming::cuda_events : ProfileTiming::cupti;
    p.durations_only = durations_only;
    p.iteration = DurationStats{1e6, 9e5, 1.1e6, 3};
    for (const Op& op : tg.graph.ops()) {
        ProfiledOp po;
        po.name = op.name;
        po.layer = op.layer;
        po.kind = op.kind;
        double total = 0.0;
        std::uint32_t order = 0;
        for (const KernelCost& k : tg.costs[op.id].kernels) {
            total += k.duration_ns;
            if (!durations_only)
                po.kernels.push_back(ProfiledKernel{k.shape, DurationStats{k.duration_ns, k.duration_ns, k.duration_ns, 3}, order++});
        }
        if (!durations_only && op.id == 0)
            po.transfers.push_back(ProfiledTransfer{TransferKind::memcpy_htod, 4096, DurationStats{900, 800, 1000, 3}, order++});
        po.duration = DurationStats{total, total, total, 3};
        p.ops.push_back(std::move(po));
    }
    p.unattributed.push_back(UnattributedWork{"kernel", "stray", 2, 1500.0});
    return p;
}

}  // namespace

std::span<const std::string_view> target_names() { return names; }

Outcome run(std::string_view name, std::string_view bytes) {
    for (const Entry& e : targets) {
        if (e.name != name) continue;
        try {
            return e.run(bytes);
        } catch (const Error&) {
            return Outcome::refused;
        }
    }
    throw std::invalid_argument("no fuzz target named '" + std::string(name) + "'");
}

std::vector<Seed> seeds(std::string_view name) {
    std::vector<Seed> out;
    if (name == "device") {
        for (const DeviceSpec& d : builtin_devices()) out.push_back({d.key + ".json", text(to_json(d))});
    } else if (name == "graph") {
        out.push_back({"fuzz.json", text(to_json(plan_graph().graph))});
        for (const testing::TestGraph& g : {testing::diamond(), testing::inception_like(1), testing::residual_chain(2)})
            out.push_back({g.name + ".json", text(to_json(g.graph))});
    } else if (name == "plan") {
        const testing::TestGraph& tg = plan_graph();
        const DeviceSpec& dev = find_device("h200");
        for (const std::string& s : strategy_names()) {
            PlanOptions o;
            o.strategy = s;
            o.max_streams = 4;
            out.push_back({s + ".json", text(to_json(make_plan(tg.graph, dev, tg.costs, o), tg.graph))});
        }
        // A tuned plan, with the "measured" block tuning writes.
        Plan tuned = make_plan(tg.graph, dev, tg.costs, PlanOptions{});
        tuned.measured = PlanMeasurement{
            MeasuredOn{"NVIDIA H200 (sm_90, 132 SMs)", "13.0", "9.19.0", "13.0.0", "cuda", LaunchMode::graph, 8,
                       "googlenet: 224x224 images; at most 8 streams"},
            1.5, 0.8, 40, true,
            {{"model #1", 1.6, 0.9, 40},
             {"nimble baseline", 1.5, 0.8, 12},
             {"glp4nn baseline", 0.0, 0.0, 0, "out of device memory: cudaMalloc failed"}}};
        out.push_back({"tuned.json", text(to_json(tuned, tg.graph))});
    } else if (name == "profile") {
        out.push_back({"cupti.json", text(to_json(synthetic_profile(false)))});
        out.push_back({"events.json", text(to_json(synthetic_profile(true)))});
    } else if (name == "calibration") {
        for (const Calibration& c : builtin_calibrations()) out.push_back({c.device_key + ".json", text(to_json(c))});
        Calibration bare;
        bare.device_name = "a GPU";
        bare.sm_count = 8;
        bare.cc_major = 8;
        out.push_back({"defaults.json", text(to_json(bare))});
    } else if (name == "measurements") {
        const std::string row = R"({"label": "nimble", "profile": "p.profile.json", "plan": "nimble", "mode": "graph", )"
                                R"("network": {"net": "resnet50", "batch": 8, "no_aux": false, "width_scale": 1.0}, "ms": [9.4, 9.5]})";
        out.push_back({"one-row.json", R"({"format": "braid.measurements", "version": 1, "device": {"name": "NVIDIA H200", )"
                                       R"("driver": "580"}, "source": "seed", "rows": [)" + row + "]}\n"});
        out.push_back({"two-rows.json", R"({"format": "braid.measurements", "version": 1, "device": {"key": "h200"}, "rows": [)" +
                                            row + R"(, {"profile": "q.json", "plan": "plans/x.plan.json", "mode": "eager", "ms": [1]}]})" + "\n"});
    } else {
        throw std::invalid_argument("no fuzz target named '" + std::string(name) + "'");
    }
    return out;
}

}  // namespace braid::fuzz
