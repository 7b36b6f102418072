// What braid-calibrate and the accuracy benchmark share: reading
// measurements and profiles into calibration inputs (with the bundled
// networks' estimates beside their profiles), fitting a calibration on some
// of the rows, and predicting every row from the profile and from estimates.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "braid/planner/calibrate.hpp"
#include "braid/planner/calibration.hpp"
#include "braid/profiler/measurements.hpp"

namespace braid::samples {

// Measurements files (rows) and profile files (nets without rows; they
// still inform the estimate fit), told apart by their "format". Every net
// carries estimates when its row or its profile names a bundled network.
braid::CalibrationInputs read_calibration_inputs(const std::vector<std::string>& files,
                                                 std::vector<std::string>* notes = nullptr);

// The network groups of `in` (ProfiledNet::group: "googlenet"), in the
// order they first appear.
std::vector<std::string> net_groups(const braid::CalibrationInputs& in);
// The groups a fit that holds `held_out` out fits on: every other group.
// Throws braid::Error naming `held_out` when no net of `in` is of it, or
// when it is the only group.
std::vector<std::string> groups_without(const braid::CalibrationInputs& in, const std::string& held_out);

// Fits estimates on the nets of `groups` (all when empty) and the simulator
// on their rows, starting from defaults; the device is the first net's.
braid::Calibration fit_calibration(const braid::CalibrationInputs& in, const std::vector<std::string>& groups = {},
                                   const braid::SimFitOptions& options = {});

struct AccuracyRow {
    std::size_t row = 0;
    std::string net, label, mode;
    std::uint32_t streams = 0;
    double measured_ms = 0.0;
    double profile_ms = 0.0;                // predicted from the profile
    std::optional<double> estimate_ms;      // predicted from estimates, when the net has them
    double profile_error_pct() const { return 100.0 * (profile_ms / measured_ms - 1.0); }
    std::optional<double> estimate_error_pct() const {
        if (!estimate_ms) return std::nullopt;
        return 100.0 * (*estimate_ms / measured_ms - 1.0);
    }
};

// Every row (of `groups`, all when empty) predicted with `c`.
std::vector<AccuracyRow> accuracy_rows(const braid::CalibrationInputs& in, const braid::Calibration& c,
                                       const std::vector<std::string>& groups = {});

// A table for people: one line per row, then the worst errors.
std::string format_accuracy(const std::vector<AccuracyRow>& rows);

// The estimate fit of `c` per kernel class, on the nets of `groups` (all
// when empty): braid::class_totals as a table for people, a line per class
// and a column per net (estimated over profiled, and the profiled ms); then
// the kernel launches of a step, estimated of profiled, in all and for each
// class where the two differ.
std::string format_class_totals(const braid::CalibrationInputs& in, const braid::Calibration& c,
                                const std::vector<std::string>& groups = {});

}  // namespace braid::samples
