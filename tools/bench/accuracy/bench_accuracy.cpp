// How well the simulator predicts a real GPU: every measured (net, plan,
// mode) row of a data set predicted from its profile and from estimates,
//   - with a calibration fitted on every row,
//   - with calibrations fitted without one network and judged on it, for
//     each network in turn (with GoogLeNet and ResNet-50: GoogLeNet ->
//     ResNet-50 and back): the held-out test,
//   - with the calibration braid ships for the device, when it has one,
//   - with no calibration (the model before any was fitted),
// and per kernel class how the estimate fits' isolated op times compare with
// the profiles' (where a fit that holds for one network fails the other),
// then `key: value` lines. sim_error_pct_max_profile and _estimate are the
// worst |predicted / measured - 1| over the fitted rows and the held-out
// rows together. Estimates name the engine family each convolution and
// GEMM ran on (its profile's, as the backend that chose the algorithms
// knows it before planning), so a calibration's per-engine fits apply;
// sim_error_pct_max_estimate_blind is the same worst with the class fits
// alone (a planner that does not know the engines).
//
//   bench-accuracy [--ops CSV] [FILE...]
//
// --ops CSV also writes, for every op of every net with estimates, what each
// fit (on every row, and each held-out one) estimates beside what the
// profile measured (one line per fit and op): where an estimate errs, op by
// op, fitted or held out, for whoever studies a new model.
//
// FILEs: braid.measurements files (and braid.profile files, which inform the
// estimate fit), as braid-calibrate takes them; by default the H200 data set
// braid ships (tests/data/h200), whose fit must reproduce the built-in
// calibration exactly (fit_reproduces_builtin). A fresh data set from
// braid-measure --profiles is judged the same way.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "braid/error.hpp"
#include "braid/model/conv_engine.hpp"
#include "braid/planner/calibration_table.hpp"
#include "train/calibration_run.hpp"

namespace {

struct Worst {
    double profile = 0.0, estimate = 0.0, profile_mean = 0.0, estimate_mean = 0.0;
    std::size_t rows = 0;

    void add(const std::vector<braid::samples::AccuracyRow>& rows_in) {
        for (const auto& r : rows_in) {
            const double p = std::abs(r.profile_error_pct());
            const double e = r.estimate_error_pct() ? std::abs(*r.estimate_error_pct()) : 0.0;
            profile = std::max(profile, p);
            estimate = std::max(estimate, e);
            profile_mean = (profile_mean * static_cast<double>(rows) + p) / static_cast<double>(rows + 1);
            estimate_mean = (estimate_mean * static_cast<double>(rows) + e) / static_cast<double>(rows + 1);
            ++rows;
        }
    }
};

// One line per op of every net with estimates: the fit (`all`, or
// `without NET`), the op, the class it is filed under (its first estimated
// kernel's), the estimated kernels' launch count, summed FLOPs (tile
// padding included), DRAM bytes and roofline time, the first kernel's
// blocks, the estimate under `c`, and the profile's kernel count, time,
// longest kernel and engine family (model/conv_engine.hpp).
void write_op_table(const braid::CalibrationInputs& in, const braid::Calibration& c, const std::string& fit,
                    std::ofstream& out, const std::string& path) {
    for (const braid::ProfiledNet& net : in.nets) {
        if (!net.estimates) continue;
        const braid::OpCosts est = braid::estimate_costs(net.device, *net.estimates, c.estimate);
        for (std::size_t i = 0; i < net.profiled.size() && i < est.size(); ++i) {
            const std::vector<braid::KernelEstimate>& ks = (*net.estimates)[i].kernels;
            if (ks.empty()) continue;
            double flops = 0.0, tile = 0.0, bytes = 0.0, roof = 0.0;
            for (const braid::KernelEstimate& k : ks) {
                flops += k.flops;
                tile += std::max(k.flops, k.tile_flops);
                bytes += k.dram_bytes;
                roof += braid::roofline_ns(net.device, k);
            }
            std::string longest;
            double longest_ns = -1.0;
            for (const braid::KernelCost& k : net.profiled[i].kernels)
                if (k.duration_ns > longest_ns) {
                    longest_ns = k.duration_ns;
                    longest = k.shape.name.substr(0, k.shape.name.find('('));
                }
            std::replace(longest.begin(), longest.end(), ',', ';');
            out << fmt::format("{},{},{},{},{},{:.0f},{:.0f},{:.0f},{:.1f},{},{:.1f},{},{:.1f},{},{}\n", fit, net.name,
                               net.graph->op(static_cast<braid::OpId>(i)).name, braid::to_string(ks.front().kind),
                               ks.size(), flops, tile, bytes, roof, ks.front().shape.blocks(), est[i].duration_ns(),
                               net.profiled[i].kernels.size(), net.profiled[i].duration_ns(), longest,
                               braid::to_string(braid::op_engine_family(net.profiled[i])));
        }
    }
    out.flush();
    if (!out) throw braid::Error("writing --ops file '" + path + "' failed");
}

// The calibration without its per-engine fits: every kernel takes its
// class's fit, as when estimates name no engine.
braid::Calibration blind(braid::Calibration c) {
    c.estimate.engines = {};
    return c;
}

}  // namespace

int main(int argc, char** argv) {
    const auto start = std::chrono::steady_clock::now();
    const std::string shipped_data = BRAID_SOURCE_DIR "/tests/data/h200/measurements.json";
    std::vector<std::string> args(argv + 1, argv + argc);
    std::string ops_csv;
    if (!args.empty() && args[0] == "--ops") {
        if (args.size() < 2) {
            fmt::print(stderr, "bench-accuracy: --ops needs the CSV file to write\n");
            return 2;
        }
        ops_csv = args[1];
        args.erase(args.begin(), args.begin() + 2);
    }
    // Opened before the fits, so that a path it cannot write fails at once.
    std::ofstream ops_out;
    if (!ops_csv.empty()) {
        ops_out.open(ops_csv);
        if (!ops_out) {
            fmt::print(stderr, "bench-accuracy: cannot write --ops file '{}'\n", ops_csv);
            return 2;
        }
        ops_out << "fit,net,op,class,est_kernels,flops,tile_flops,dram_bytes,roofline_ns,first_blocks,est_ns,"
                   "prof_kernels,prof_ns,prof_longest,prof_engine\n";
    }
    const std::vector<std::string> files = args.empty() ? std::vector<std::string>{shipped_data} : args;
    const bool shipped = args.empty();
    for (const std::string& f : files)
        if (f.starts_with("-")) {
            fmt::print(stderr,
                       "usage: bench-accuracy [--ops CSV] [FILE...]: measurements (and profile) files; by default {}\n",
                       shipped_data);
            return f == "--help" || f == "-h" ? 0 : 2;
        }
    try {
        std::vector<std::string> notes;
        const braid::CalibrationInputs in = braid::samples::read_calibration_inputs(files, &notes);
        for (const std::string& n : notes) fmt::print(stderr, "note: {}\n", n);
        if (in.rows.empty()) throw braid::Error(fmt::format("no measured rows in {}", fmt::join(files, ", ")));
        const braid::DeviceSpec& dev = in.nets.front().device;
        const std::optional<braid::Calibration> builtin = braid::builtin_calibration(dev);
        if (shipped && !builtin) throw braid::Error("no built-in calibration for " + dev.name);
        fmt::print("bench-accuracy: {} measured rows of {} profiled nets on the {} ({})\n\n", in.rows.size(),
                   in.nets.size(), dev.name, fmt::join(files, ", "));

        const braid::Calibration all = braid::samples::fit_calibration(in);
        const auto fitted_rows = braid::samples::accuracy_rows(in, all);
        fmt::print("fitted on every row{}:\n{}\n", shipped ? " (the built-in calibration)" : "",
                   braid::samples::format_accuracy(fitted_rows));
        fmt::print("fitted on every row, isolated op times per kernel class:\n{}\n",
                   braid::samples::format_class_totals(in, all));
        if (!ops_csv.empty()) write_op_table(in, all, "all", ops_out, ops_csv);

        Worst fitted, held, none, shipped_fit, blind_rows;
        fitted.add(fitted_rows);
        blind_rows.add(braid::samples::accuracy_rows(in, blind(all)));
        // Each network with measured rows held out in turn (a profile alone has nothing to predict).
        const std::vector<std::string> groups = braid::samples::net_groups(in);
        for (const std::string& test : groups) {
            const bool measured = std::any_of(in.rows.begin(), in.rows.end(),
                                              [&](const braid::CalibrationRow& r) { return in.nets[r.net].group == test; });
            if (groups.size() < 2 || !measured) continue;
            const std::vector<std::string> train = braid::samples::groups_without(in, test);
            const braid::Calibration c = braid::samples::fit_calibration(in, train);
            const auto rows = braid::samples::accuracy_rows(in, c, {test});
            held.add(rows);
            blind_rows.add(braid::samples::accuracy_rows(in, blind(c), {test}));
            const std::string on = fmt::format("{}", fmt::join(train, ", "));
            fmt::print("fitted on {} only, predicting {}:\n{}\n", on, test, braid::samples::format_accuracy(rows));
            fmt::print("fitted on {} only, isolated op times per kernel class, every net:\n{}\n", on,
                       braid::samples::format_class_totals(in, c));
            if (!ops_csv.empty()) write_op_table(in, c, "without " + test, ops_out, ops_csv);
        }
        if (builtin && !shipped) {
            const auto rows = braid::samples::accuracy_rows(in, *builtin);
            shipped_fit.add(rows);
            fmt::print("the calibration braid ships for the {} ({}):\n{}\n", dev.name, builtin->source,
                       braid::samples::format_accuracy(rows));
        }
        const auto raw = braid::samples::accuracy_rows(in, braid::Calibration{});
        none.add(raw);
        fmt::print("no calibration (roofline estimates, default constants):\n{}\n",
                   braid::samples::format_accuracy(raw));

        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        fmt::print("accuracy_rows: {}\n", in.rows.size());
        fmt::print("accuracy_nets: {}\n", groups.size());
        fmt::print("sim_error_pct_max_profile: {:.1f}\n", std::max(fitted.profile, held.profile));
        fmt::print("sim_error_pct_max_estimate: {:.1f}\n", std::max(fitted.estimate, held.estimate));
        fmt::print("sim_error_pct_max_estimate_blind: {:.1f}\n", blind_rows.estimate);
        fmt::print("sim_error_pct_max_profile_fitted: {:.1f}\n", fitted.profile);
        fmt::print("sim_error_pct_max_estimate_fitted: {:.1f}\n", fitted.estimate);
        if (held.rows > 0) {
            fmt::print("sim_error_pct_max_profile_held_out: {:.1f}\n", held.profile);
            fmt::print("sim_error_pct_max_estimate_held_out: {:.1f}\n", held.estimate);
        }
        fmt::print("sim_error_pct_mean_profile_fitted: {:.1f}\n", fitted.profile_mean);
        fmt::print("sim_error_pct_mean_estimate_fitted: {:.1f}\n", fitted.estimate_mean);
        if (shipped_fit.rows > 0) {
            fmt::print("sim_error_pct_max_profile_shipped_calibration: {:.1f}\n", shipped_fit.profile);
            fmt::print("sim_error_pct_max_estimate_shipped_calibration: {:.1f}\n", shipped_fit.estimate);
        }
        fmt::print("sim_error_pct_max_profile_uncalibrated: {:.1f}\n", none.profile);
        fmt::print("sim_error_pct_max_estimate_uncalibrated: {:.1f}\n", none.estimate);
        if (shipped) fmt::print("fit_reproduces_builtin: {}\n", all == *builtin ? 1 : 0);
        fmt::print("bench_seconds: {:.0f}\n", seconds);
        return 0;
    } catch (const std::exception& e) {
        fmt::print(stderr, "bench-accuracy: {}\n", e.what());
        return 1;
    }
}
