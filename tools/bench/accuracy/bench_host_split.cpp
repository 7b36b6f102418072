// Which host model the measured eager rows support: the simulator predicts
// every eager row of a data set with the host's time per launch set two
// ways,
//   - one cost for every launch (what calibrations fit today), and
//   - one cost for a launch of the trainer's own kernels and another for a
//     kernel a library call launches,
// each on a grid (0 to 35 us, 2.5 us apart), fitted for the least worst
// error on every row, on GoogLeNet's rows alone and on ResNet-50's alone.
// A model whose fit on one network predicts the other is one that holds.
// First from the profiles (kernel times scaled as the built-in calibration
// scales them, its simulator constants; own kernels: names in `braid::`),
// then the one cost that fits each profiled net's eager rows alone, then
// the same fits from estimates (the built-in calibration's estimate fits;
// own kernels: those no library launches), where a kernel count that
// differs from the profiled code's shows.
//
//   bench-host-split [FILE]
//
// FILE: a braid.measurements file; by default the H200 data set braid
// ships (tests/data/h200). Prints the fitted costs and every row's error
// under each fit, then `key: value` lines. A grid point simulates every
// eager row once: about 2 x 225 x rows simulations, minutes on two cores.
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

// The eager rows, from the profiles or from the estimates (nets without
// estimates are left out).
std::vector<EagerRow> eager_rows(const braid::CalibrationInputs& in, const braid::Calibration& c, bool from_estimates) {
    std::vector<EagerRow> out;
    for (const braid::CalibrationRow& row : in.rows) {
        if (row.mode != braid::LaunchMode::eager) continue;
        const braid::ProfiledNet& net = in.nets.at(row.net);
        if (from_estimates && !net.estimates) continue;
        const braid::OpCosts costs =
            from_estimates ? braid::calibrated_costs(net.device, *net.estimates, c, braid::LaunchMode::eager)
                           : braid::calibrated_costs(net.profiled, c, braid::LaunchMode::eager);
        EagerRow r{net.name + " " + row.label, net.name, net.group, net.device,
                   braid::to_sim_program(braid::compile(row.plan, *net.graph), *net.graph, net.device, costs,
                                         braid::LaunchMode::eager),
                   {}, row.measured_median_ms()};
        // A program launches each op's kernels in order (a batch part again from its first).
        std::vector<std::size_t> seen(costs.size(), 0);
        for (const braid::sim::Kernel& k : r.program.kernels) {
            const std::size_t i = seen[k.op]++;
            if (from_estimates) {
                const std::vector<braid::KernelEstimate>& ks = (*net.estimates)[k.op].kernels;
                const braid::KernelEstimate& e = ks.at(i % ks.size());
                r.own.push_back(!braid::library_launched(e.kind) && !e.library_helper);
            } else {
                const std::vector<braid::KernelCost>& ks = costs.at(k.op).kernels;
                r.own.push_back(ks.at(i % ks.size()).shape.name.find("braid::") != std::string::npos);
            }
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

// Every row's error (%) with own launches at grid[a] and library launches at grid[b].
struct HostGrid {
    std::vector<double> ns;
    std::vector<std::vector<std::vector<double>>> error;  // [a][b][row]
};

HostGrid simulate_grid(const std::vector<EagerRow>& rows, const braid::sim::Params& params) {
    HostGrid g;
    for (double ns = 0.0; ns <= 35000.0; ns += 2500.0) g.ns.push_back(ns);
    g.error.assign(g.ns.size(), std::vector<std::vector<double>>(g.ns.size()));
    for (std::size_t a = 0; a < g.ns.size(); ++a)
        for (std::size_t b = 0; b < g.ns.size(); ++b)
            for (const EagerRow& r : rows)
                g.error[a][b].push_back(100.0 * (predicted_ms(r, params, g.ns[a], g.ns[b]) / r.measured_ms - 1.0));
    return g;
}

struct HeldOut {
    double one_cost = 0.0, two_costs = 0.0;  // worst |error| over held-out rows, %
};

// The best one-cost and two-cost fits on every row and on each network's
// rows alone, every row's error under each, and the worst held-out errors.
HeldOut print_fits(const std::vector<EagerRow>& rows, const HostGrid& g, const std::string& source) {
    std::vector<std::string> groups;
    for (const EagerRow& r : rows)
        if (std::find(groups.begin(), groups.end(), r.group) == groups.end()) groups.push_back(r.group);
    std::vector<std::string> fits{""};  // "": every row
    fits.insert(fits.end(), groups.begin(), groups.end());
    HeldOut out;
    for (const std::string& on : fits) {
        const auto worst = [&](std::size_t a, std::size_t b, bool fitted) {
            double w = 0.0;
            for (std::size_t i = 0; i < rows.size(); ++i)
                if (on.empty() || (rows[i].group == on) == fitted) w = std::max(w, std::fabs(g.error[a][b][i]));
            return w;
        };
        std::size_t one = 0, own = 0, lib = 0;
        for (std::size_t a = 0; a < g.ns.size(); ++a) {
            if (worst(a, a, true) < worst(one, one, true)) one = a;
            for (std::size_t b = 0; b < g.ns.size(); ++b)
                if (worst(a, b, true) < worst(own, lib, true)) own = a, lib = b;
        }
        fmt::print("from {}, fitted on {}: one cost {:.1f} us per launch (worst {:.1f} %); own launches {:.1f} us, "
                   "library launches {:.1f} us (worst {:.1f} %)\n",
                   source, on.empty() ? "every row" : on, g.ns[one] / 1e3, worst(one, one, true), g.ns[own] / 1e3,
                   g.ns[lib] / 1e3, worst(own, lib, true));
        for (std::size_t i = 0; i < rows.size(); ++i)
            fmt::print("  {:<40} measured {:6.2f} ms   one cost {:+6.1f} %   two costs {:+6.1f} %{}\n", rows[i].label,
                       rows[i].measured_ms, g.error[one][one][i], g.error[own][lib][i],
                       on.empty() || rows[i].group == on ? "" : "   (held out)");
        if (!on.empty()) {
            out.one_cost = std::max(out.one_cost, worst(one, one, false));
            out.two_costs = std::max(out.two_costs, worst(own, lib, false));
        }
    }
    return out;
}

// Own launches per step of each row's network (the first row of each).
void print_own_launches(const std::vector<EagerRow>& rows, const std::string& source) {
    std::vector<std::string> nets;
    for (const EagerRow& r : rows)
        if (std::find(nets.begin(), nets.end(), r.net) == nets.end()) {
            nets.push_back(r.net);
            fmt::print("from {}: {} launches {} kernels a step, {} of them its own\n", source, r.net, r.own.size(),
                       std::count(r.own.begin(), r.own.end(), true));
        }
}

}  // namespace

int main(int argc, char** argv) try {
    const std::string file =
        argc > 1 ? argv[1] : std::string(BRAID_SOURCE_DIR) + "/tests/data/h200/measurements.json";
    const braid::CalibrationInputs in = braid::samples::read_calibration_inputs({file});
    if (in.nets.empty()) throw braid::Error(file + ": no profiled nets");
    const std::optional<braid::Calibration> c = braid::builtin_calibration(in.nets.front().device);
    if (!c) throw braid::Error(file + ": braid ships no calibration for " + in.nets.front().device.key);
    const std::vector<EagerRow> rows = eager_rows(in, *c, false);
    if (rows.empty()) throw braid::Error(file + ": no eager rows");

    print_own_launches(rows, "profiles");
    const HostGrid g = simulate_grid(rows, c->sim);
    const HeldOut profiles = print_fits(rows, g, "profiles");
    // Each profiled net's eager rows alone: the one cost per launch that fits them best.
    std::vector<std::string> nets;
    for (const EagerRow& r : rows)
        if (std::find(nets.begin(), nets.end(), r.net) == nets.end()) nets.push_back(r.net);
    for (const std::string& net : nets) {
        const auto worst = [&](std::size_t a) {
            double w = 0.0;
            for (std::size_t i = 0; i < rows.size(); ++i)
                if (rows[i].net == net) w = std::max(w, std::fabs(g.error[a][a][i]));
            return w;
        };
        std::size_t best = 0;
        for (std::size_t a = 0; a < g.ns.size(); ++a)
            if (worst(a) < worst(best)) best = a;
        fmt::print("{} alone: one cost {:.1f} us per launch (worst {:.1f} %)\n", net, g.ns[best] / 1e3, worst(best));
    }
    // The same from estimates: what a plan without a profile would be charged.
    const std::vector<EagerRow> est_rows = eager_rows(in, *c, true);
    print_own_launches(est_rows, "estimates");
    const HeldOut estimates = print_fits(est_rows, simulate_grid(est_rows, c->sim), "estimates");

    fmt::print("host_split_eager_rows: {}\n", rows.size());
    fmt::print("host_split_error_pct_max_held_out_one_cost: {:.1f}\n", profiles.one_cost);
    fmt::print("host_split_error_pct_max_held_out_two_costs: {:.1f}\n", profiles.two_costs);
    fmt::print("host_split_eager_rows_estimates: {}\n", est_rows.size());
    fmt::print("host_split_error_pct_max_held_out_one_cost_estimates: {:.1f}\n", estimates.one_cost);
    fmt::print("host_split_error_pct_max_held_out_two_costs_estimates: {:.1f}\n", estimates.two_costs);
    return 0;
} catch (const std::exception& e) {
    std::fprintf(stderr, "bench-host-split: %s\n", e.what());
    return 1;
}
