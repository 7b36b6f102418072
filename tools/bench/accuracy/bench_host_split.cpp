// Which host model the measured eager rows support: the simulator predicts
// every eager row of a data set from its profile (kernel times scaled as
// the built-in calibration scales them, its simulator constants) with the
// host's time per launch set two ways,
//   - one cost for every launch (what calibrations fit today), and
//   - one cost for a launch of the trainer's own kernels (names in
//     `braid::`) and another for a kernel a library call launches,
// each on a grid (0 to 35 us, 2.5 us apart), fitted for the least worst
// error on every row, on GoogLeNet's rows alone and on ResNet-50's alone.
// A model whose fit on one network predicts the other is one that holds.
// Last, the one cost that fits each profiled net's eager rows alone.
//
//   bench-host-split [FILE]
//
// FILE: a braid.measurements file; by default the H200 data set braid
// ships (tests/data/h200). Prints the fitted costs and every row's error
// under each fit, then `key: value` lines. A grid point simulates every
// eager row once: about 225 x rows simulations, minutes on two cores.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "braid/plan/compiled_plan.hpp"
#include "braid/plan/sim_program.hpp"
#include "braid/planner/calibrate.hpp"
#include "braid/planner/calibration_table.hpp"
#include "train/calibration_run.hpp"

namespace {

// One eager row ready to simulate, and which of its kernels are the trainer's own.
struct EagerRow {
    std::string label;
    std::string net;
    std::string group;
    braid::DeviceSpec device;
    braid::sim::Program program;
    std::vector<bool> own;
    double measured_ms = 0.0;
};

std::vector<EagerRow> eager_rows(const braid::CalibrationInputs& in, const braid::Calibration& c) {
    std::vector<EagerRow> out;
    for (const braid::CalibrationRow& row : in.rows) {
        if (row.mode != braid::LaunchMode::eager) continue;
        const braid::ProfiledNet& net = in.nets.at(row.net);
        const braid::OpCosts costs = braid::calibrated_costs(net.profiled, c, braid::LaunchMode::eager);
        EagerRow r{net.name + " " + row.label, net.name, net.group, net.device,
                   braid::to_sim_program(braid::compile(row.plan, *net.graph), *net.graph, net.device, costs,
                                         braid::LaunchMode::eager),
                   {}, row.measured_median_ms()};
        // A program launches each op's kernels in order (a batch part again from its first).
        std::vector<std::size_t> seen(costs.size(), 0);
        for (const braid::sim::Kernel& k : r.program.kernels) {
            const std::vector<braid::KernelCost>& ks = costs.at(k.op).kernels;
            const std::string& name = ks.at(seen[k.op]++ % ks.size()).shape.name;
            r.own.push_back(name.find("braid::") != std::string::npos);
        }
        out.push_back(std::move(r));
    }
    return out;
}

double predicted_ms(const EagerRow& r, braid::sim::Params params, double own_ns, double library_ns) {
    braid::sim::Program p = r.program;
    for (std::size_t i = 0; i < p.kernels.size(); ++i) p.kernels[i].host_ns = r.own[i] ? own_ns : library_ns;
    params.host_time_scale = 1.0;
    return braid::sim::simulate(r.device, p, params).makespan_ns / 1e6;
}

}  // namespace

int main(int argc, char** argv) try {
    const std::string file =
        argc > 1 ? argv[1] : std::string(BRAID_SOURCE_DIR) + "/tests/data/h200/measurements.json";
    const braid::CalibrationInputs in = braid::samples::read_calibration_inputs({file});
    if (in.nets.empty()) throw braid::Error(file + ": no profiled nets");
    const std::optional<braid::Calibration> c = braid::builtin_calibration(in.nets.front().device);
    if (!c) throw braid::Error(file + ": braid ships no calibration for " + in.nets.front().device.key);
    const std::vector<EagerRow> rows = eager_rows(in, *c);
    if (rows.empty()) throw braid::Error(file + ": no eager rows");

    std::vector<double> grid;
    for (double ns = 0.0; ns <= 35000.0; ns += 2500.0) grid.push_back(ns);
    // error[a][b][row], %: own launches grid[a], library launches grid[b].
    std::vector<std::vector<std::vector<double>>> error(grid.size(), std::vector<std::vector<double>>(grid.size()));
    for (std::size_t a = 0; a < grid.size(); ++a)
        for (std::size_t b = 0; b < grid.size(); ++b)
            for (const EagerRow& r : rows)
                error[a][b].push_back(100.0 * (predicted_ms(r, c->sim, grid[a], grid[b]) / r.measured_ms - 1.0));

    std::vector<std::string> groups;
    for (const EagerRow& r : rows)
        if (std::find(groups.begin(), groups.end(), r.group) == groups.end()) groups.push_back(r.group);
    std::vector<std::string> fits{""};  // "": every row
    fits.insert(fits.end(), groups.begin(), groups.end());
    double held_out_one = 0.0, held_out_two = 0.0;
    for (const std::string& on : fits) {
        const auto worst = [&](std::size_t a, std::size_t b, bool fitted) {
            double w = 0.0;
            for (std::size_t i = 0; i < rows.size(); ++i)
                if (on.empty() || (rows[i].group == on) == fitted) w = std::max(w, std::fabs(error[a][b][i]));
            return w;
        };
        std::size_t one = 0, own = 0, lib = 0;
        for (std::size_t a = 0; a < grid.size(); ++a) {
            if (worst(a, a, true) < worst(one, one, true)) one = a;
            for (std::size_t b = 0; b < grid.size(); ++b)
                if (worst(a, b, true) < worst(own, lib, true)) own = a, lib = b;
        }
        fmt::print("fitted on {}: one cost {:.1f} us per launch (worst {:.1f} %); own launches {:.1f} us, library "
                   "launches {:.1f} us (worst {:.1f} %)\n",
                   on.empty() ? "every row" : on, grid[one] / 1e3, worst(one, one, true), grid[own] / 1e3,
                   grid[lib] / 1e3, worst(own, lib, true));
        for (std::size_t i = 0; i < rows.size(); ++i)
            fmt::print("  {:<40} measured {:6.2f} ms   one cost {:+6.1f} %   two costs {:+6.1f} %{}\n", rows[i].label,
                       rows[i].measured_ms, error[one][one][i], error[own][lib][i],
                       on.empty() || rows[i].group == on ? "" : "   (held out)");
        if (!on.empty()) {
            held_out_one = std::max(held_out_one, worst(one, one, false));
            held_out_two = std::max(held_out_two, worst(own, lib, false));
        }
    }
    // Each profiled net's eager rows alone: the one cost per launch that fits them best.
    std::vector<std::string> nets;
    for (const EagerRow& r : rows)
        if (std::find(nets.begin(), nets.end(), r.net) == nets.end()) nets.push_back(r.net);
    for (const std::string& net : nets) {
        const auto worst = [&](std::size_t a) {
            double w = 0.0;
            for (std::size_t i = 0; i < rows.size(); ++i)
                if (rows[i].net == net) w = std::max(w, std::fabs(error[a][a][i]));
            return w;
        };
        std::size_t best = 0;
        for (std::size_t a = 0; a < grid.size(); ++a)
            if (worst(a) < worst(best)) best = a;
        fmt::print("{} alone: one cost {:.1f} us per launch (worst {:.1f} %)\n", net, grid[best] / 1e3, worst(best));
    }
    fmt::print("host_split_eager_rows: {}\n", rows.size());
    fmt::print("host_split_error_pct_max_held_out_one_cost: {:.1f}\n", held_out_one);
    fmt::print("host_split_error_pct_max_held_out_two_costs: {:.1f}\n", held_out_two);
    return 0;
} catch (const std::exception& e) {
    std::fprintf(stderr, "bench-host-split: %s\n", e.what());
    return 1;
}
