// The strategy comparison: GoogLeNet and ResNet-50 training at batch 8, 32
// and 128 on an H200 and an A100, every strategy's plan (the published
// systems' and braid's) judged on the same simulator (roofline costs), in
// graph mode and eager mode. Prints a table and key: value lines; speedups
// are ratios of times predicted in this run.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "braid/braid.hpp"
#include "train/training_graph.hpp"

int main() try {
    using clock = std::chrono::steady_clock;
    const std::vector<std::string>& names = braid::strategy_names();
    fmt::print("{:<10} {:>5} {:<6} {:<5}", "net", "batch", "device", "mode");
    for (const std::string& n : names) fmt::print(" {:>8}", n);
    fmt::print(" {:>8} {:>8} {:>8} {:>7} {:>8}\n", "bound", "vs ser", "vs best", "lb", "plan s");
    std::vector<std::string> keys;
    for (const char* net : {"googlenet", "resnet50"})
        for (std::uint32_t batch : {8u, 32u, 128u}) {
            braid::samples::TrainConfig tc;
            tc.model.net = net;
            tc.model.batch = batch;
            const braid::samples::TrainingGraph tg = braid::samples::build_training_graph(tc);
            for (const char* dev_key : {"h200", "a100"}) {
                const braid::DeviceSpec& dev = braid::find_device(dev_key);
                const braid::OpCosts costs = braid::estimate_costs(dev, braid::samples::op_estimates(tg));
                for (braid::sim::LaunchMode mode : {braid::sim::LaunchMode::graph, braid::sim::LaunchMode::eager}) {
                    braid::ComparisonOptions co;
                    co.mode = mode;
                    const auto t0 = clock::now();
                    const braid::Comparison c = braid::compare_strategies(tg.graph, dev, costs, co);
                    const double secs = std::chrono::duration<double>(clock::now() - t0).count();
                    const char* m = mode == braid::sim::LaunchMode::graph ? "graph" : "eager";
                    const double serial = c.row("serial").predicted_ns, braid_ns = c.row("braid").predicted_ns;
                    // The best of the other systems' plans (serial is what frameworks do, not a system).
                    std::string best = "nimble";
                    for (const std::string& b : braid::baseline_strategies())
                        if (b != "serial" && c.row(b).predicted_ns < c.row(best).predicted_ns) best = b;
                    const double best_ns = c.row(best).predicted_ns;
                    fmt::print("{:<10} {:>5} {:<6} {:<5}", net, batch, dev_key, m);
                    for (const std::string& n : names) fmt::print(" {:>8.3f}", c.row(n).predicted_ns / 1e6);
                    fmt::print(" {:>8.3f} {:>7.2f}x {:>7.2f}x {:>7.2f} {:>8.2f}  (best other: {})\n", c.bound.bound_ns / 1e6,
                               serial / braid_ns, best_ns / braid_ns, c.row("braid").lb_ratio, secs, best);
                    const std::string k = fmt::format("{}_b{}_{}_{}", net, batch, dev_key, m);
                    keys.push_back(fmt::format("predicted_speedup_braid_vs_serial_{}: {:.3f}", k, serial / braid_ns));
                    keys.push_back(fmt::format("predicted_speedup_braid_vs_nimble_{}: {:.3f}", k,
                                               c.row("nimble").predicted_ns / braid_ns));
                    keys.push_back(fmt::format("predicted_speedup_braid_vs_best_baseline_{}: {:.3f}", k, best_ns / braid_ns));
                    if (mode == braid::sim::LaunchMode::graph)
                        keys.push_back(fmt::format("predicted_speedup_braid_graph_vs_serial_eager_{}_b{}_{}: {:.3f}", net,
                                                   batch, dev_key, c.serial_eager_ns / braid_ns));
                }
            }
        }
    fmt::print("\n(times in ms predicted by the simulator; 'vs ser': braid's speedup over serial in the same mode; "
               "'vs best': over the fastest plan of the other systems (glp4nn, nimble, ooo, opara, ios); 'lb': braid / "
               "lower bound; 'plan s': seconds to plan and judge every strategy)\n\n");
    for (const std::string& k : keys) fmt::print("{}\n", k);
    return 0;
} catch (const std::exception& e) {
    std::fprintf(stderr, "bench-strategies: %s\n", e.what());
    return 1;
}
