// How well the simulator predicts the real H200 (tests/data/h200): every
// measured (net, plan, mode) row predicted from its profile and from
// estimates,
//   - with the built-in calibration (fitted on every row),
//   - with calibrations fitted on one network and judged on the other
//     (GoogLeNet -> ResNet-50 and back): the held-out test,
//   - with no calibration (the model before any was fitted),
// and per kernel class how the estimate fits' isolated op times compare with
// the profiles' (where a fit that holds for one network fails the other),
// then `key: value` lines. sim_error_pct_max_profile and _estimate are the
// worst |predicted / measured - 1| over the built-in rows and the held-out
// rows together. It also refits the data set and says whether the fit
// reproduces the built-in calibration exactly.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/core.h>

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

}  // namespace

int main() {
    const auto start = std::chrono::steady_clock::now();
    const std::string data = BRAID_SOURCE_DIR "/tests/data/h200/measurements.json";
    const braid::CalibrationInputs in = braid::samples::read_calibration_inputs({data});
    const braid::DeviceSpec& dev = in.nets.front().device;
    const std::optional<braid::Calibration> builtin = braid::builtin_calibration(dev);
    if (!builtin) {
        std::fprintf(stderr, "bench-accuracy: no built-in calibration for %s\n", dev.name.c_str());
        return 1;
    }
    fmt::print("bench-accuracy: {} measured rows of {} profiled nets on the {} ({})\n\n", in.rows.size(), in.nets.size(),
               dev.name, data);

    const auto shipped = braid::samples::accuracy_rows(in, *builtin);
    fmt::print("built-in calibration ({}):\n{}\n", builtin->source, braid::samples::format_accuracy(shipped));
    fmt::print("built-in calibration, isolated op times per kernel class:\n{}\n",
               braid::samples::format_class_totals(in, *builtin));

    Worst fitted, held, none;
    fitted.add(shipped);
    for (const auto& [train, test] : {std::pair{"googlenet", "resnet50"}, std::pair{"resnet50", "googlenet"}}) {
        const braid::Calibration c = braid::samples::fit_calibration(in, {train});
        const auto rows = braid::samples::accuracy_rows(in, c, {test});
        held.add(rows);
        fmt::print("fitted on {} only, predicting {}:\n{}\n", train, test, braid::samples::format_accuracy(rows));
        fmt::print("fitted on {} only, isolated op times per kernel class, every net:\n{}\n", train,
                   braid::samples::format_class_totals(in, c));
    }
    const auto raw = braid::samples::accuracy_rows(in, braid::Calibration{});
    none.add(raw);
    fmt::print("no calibration (roofline estimates, default constants):\n{}\n", braid::samples::format_accuracy(raw));

    const bool reproduces = braid::samples::fit_calibration(in) == *builtin;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    fmt::print("accuracy_rows: {}\n", in.rows.size());
    fmt::print("sim_error_pct_max_profile: {:.1f}\n", std::max(fitted.profile, held.profile));
    fmt::print("sim_error_pct_max_estimate: {:.1f}\n", std::max(fitted.estimate, held.estimate));
    fmt::print("sim_error_pct_max_profile_builtin: {:.1f}\n", fitted.profile);
    fmt::print("sim_error_pct_max_estimate_builtin: {:.1f}\n", fitted.estimate);
    fmt::print("sim_error_pct_max_profile_held_out: {:.1f}\n", held.profile);
    fmt::print("sim_error_pct_max_estimate_held_out: {:.1f}\n", held.estimate);
    fmt::print("sim_error_pct_mean_profile_builtin: {:.1f}\n", fitted.profile_mean);
    fmt::print("sim_error_pct_mean_estimate_builtin: {:.1f}\n", fitted.estimate_mean);
    fmt::print("sim_error_pct_max_profile_uncalibrated: {:.1f}\n", none.profile);
    fmt::print("sim_error_pct_max_estimate_uncalibrated: {:.1f}\n", none.estimate);
    fmt::print("fit_reproduces_builtin: {}\n", reproduces ? 1 : 0);
    fmt::print("bench_seconds: {:.0f}\n", seconds);
    return 0;
}
