// The calibrations braid ships, one per GPU it was measured on. Each is
// what braid-calibrate fits from the data set named in its `source`
// (tests/data/<device>/measurements.json); tests/samples/accuracy_test.cpp
// checks that the table and the data set's calibration file agree, and
// `tools/bench/run accuracy` that fitting the data set again reproduces it.
// docs/calibration.md says how to refit and add one.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "braid/model/device_spec.hpp"
#include "braid/model/kernel_class.hpp"
#include "braid/planner/calibration.hpp"
#include "braid/planner/calibration_json.hpp"

namespace braid {

namespace detail {

// braid-calibrate tests/data/h200/measurements.json --cpp-out FILE
inline Calibration h200_calibration() {
#include "braid/planner/calibrations/h200.inc"
}

}  // namespace detail

inline const std::vector<Calibration>& builtin_calibrations() {
    static const std::vector<Calibration> table{detail::h200_calibration()};
    return table;
}

// The built-in calibration fitted on `dev` (same key or name, SM count and
// compute capability), if braid ships one.
inline std::optional<Calibration> builtin_calibration(const DeviceSpec& dev) {
    for (const Calibration& c : builtin_calibrations())
        if ((c.device_key == dev.key || c.device_name == dev.name) && calibration_mismatch(c, dev).empty()) return c;
    return std::nullopt;
}

// What a tool's --calibration means: "" (the default) the built-in
// calibration for `dev` when braid ships one, "none" no calibration, else a
// calibration file. A file fitted on another GPU is used with a warning.
inline std::optional<Calibration> select_calibration(const std::string& option, const DeviceSpec& dev,
                                                     std::vector<std::string>& warnings) {
    if (option == "none") return std::nullopt;
    if (option.empty()) return builtin_calibration(dev);
    Calibration c = load_calibration(option);
    if (const std::string why = calibration_mismatch(c, dev); !why.empty())
        warnings.push_back("calibration '" + option + "': " + why + "; its constants may not fit this GPU");
    return c;
}

// "built-in calibration for h200 (...)", "calibration FILE", "no calibration".
inline std::string describe_calibration(const std::optional<Calibration>& c, const std::string& option) {
    if (!c) return "no calibration";
    if (option.empty()) return "built-in calibration for " + (c->device_key.empty() ? c->device_name : c->device_key);
    return "calibration " + option;
}

}  // namespace braid
