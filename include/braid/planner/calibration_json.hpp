// Calibration <-> JSON (`braid.calibration`, version 1; docs/formats.md).
// Every field is checked on load with an error that names its JSON path.
#pragma once

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "braid/detail/json_reader.hpp"
#include "braid/detail/write_files.hpp"
#include "braid/error.hpp"
#include "braid/model/conv_engine.hpp"
#include "braid/model/kernel_class.hpp"
#include "braid/planner/calibration.hpp"
#include "braid/sim/program_check.hpp"

namespace braid {

namespace detail {

// 0.05, 2, 1e+06: short, for error messages.
inline std::string fmt_number(double v) {
    std::ostringstream s;
    s << v;
    return s.str();
}

// Every sim::Params field, by its JSON name, but host_time_scale: that is
// set where a calibration is used (Calibration::sim_for_profile), not stored.
template <class F>
void for_each_param(sim::Params& p, F&& f) {
    f("launch_latency_ns", p.launch_latency_ns);
    f("op_host_ns", p.op_host_ns);
    f("record_latency_ns", p.record_latency_ns);
    f("wait_latency_ns", p.wait_latency_ns);
    f("graph_launch_ns", p.graph_launch_ns);
    f("graph_node_ns", p.graph_node_ns);
    f("dispatch_latency_ns", p.dispatch_latency_ns);
    f("eager_dispatch_extra_ns", p.eager_dispatch_extra_ns);
    f("event_latency_ns", p.event_latency_ns);
    f("corun_slowdown", p.corun_slowdown);
    f("max_resident_kernels", p.max_resident_kernels);
    f("eager_hardware_queues", p.eager_hardware_queues);
    f("graph_hardware_queues", p.graph_hardware_queues);
    f("share_bandwidth", p.share_bandwidth);
}

}  // namespace detail

inline nlohmann::json to_json(const sim::Params& params) {
    nlohmann::json j = nlohmann::json::object();
    sim::Params p = params;
    detail::for_each_param(p, [&](const char* name, auto& value) { j[name] = value; });
    return j;
}

inline sim::Params sim_params_from_json(const detail::JsonReader& r) {
    r.expect_object();
    sim::Params p;
    std::vector<std::string> known;
    detail::for_each_param(p, [&](const char* name, auto&) { known.emplace_back(name); });
    for (auto it = r.json().begin(); it != r.json().end(); ++it)
        if (std::find(known.begin(), known.end(), it.key()) == known.end()) {
            std::string list;
            for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
            throw FormatError(r.path() + "." + it.key(), "unknown simulator parameter (expected one of: " + list + ")");
        }
    detail::for_each_param(p, [&](const char* name, auto& value) {
        using T = std::remove_reference_t<decltype(value)>;
        value = r.get_or<T>(name, value);
    });
    try {
        sim::check_params(p);
    } catch (const SimError& e) {
        throw FormatError(r.path(), e.what());
    }
    return p;
}

inline nlohmann::json to_json(const EstimateCalibration& c) {
    nlohmann::json classes = nlohmann::json::object();
    for (KernelClass k : all_kernel_classes) {
        const KernelClassFit& f = c[k];
        // Every field of a class that differs from the default: what was
        // read comes back the same (a fill width without a fill midpoint
        // does nothing, but it is kept).
        if (f == KernelClassFit{}) continue;
        nlohmann::json& j = classes[std::string(to_string(k))];
        j = {{"scale", f.scale},
             {"floor_ns", f.floor_ns},
             {"size_exponent", f.size_exponent},
             {"fill_mid_ns", f.fill_mid_ns},
             {"fill_width", f.fill_width}};
        if (f.host_ns >= 0.0) j["host_ns"] = f.host_ns;
    }
    // Engine fits: their time parameters and host time, the ones that apply.
    nlohmann::json engines = nlohmann::json::array();
    for (KernelClass k : all_kernel_classes)
        for (ConvEngineFamily e : all_engine_families) {
            const KernelClassFit& f = c.engine_fit(k, e);
            if (!f.fitted() && f.host_ns < 0.0) continue;
            nlohmann::json j{{"class", std::string(to_string(k))}, {"engine", std::string(to_string(e))}};
            if (f.fitted()) {
                j["scale"] = f.scale;
                j["floor_ns"] = f.floor_ns;
                j["size_exponent"] = f.size_exponent;
            }
            if (f.host_ns >= 0.0) j["host_ns"] = f.host_ns;
            engines.push_back(std::move(j));
        }
    nlohmann::json out{{"reference_ns", c.reference_ns}, {"classes", classes}};
    if (!engines.empty()) out["engines"] = engines;
    return out;
}

inline EstimateCalibration estimate_calibration_from_json(const detail::JsonReader& r) {
    r.allow_only({"reference_ns", "classes", "engines"});
    EstimateCalibration c;
    auto bounded = [](const detail::JsonReader& in, const char* field, double fallback, double lo, double hi) {
        const double v = in.get_or<double>(field, fallback);
        if (!(v >= lo && v <= hi))
            in.at(field).fail("must be between " + detail::fmt_number(lo) + " and " + detail::fmt_number(hi));
        return v;
    };
    c.reference_ns = bounded(r, "reference_ns", c.reference_ns, 1.0, 1e9);
    if (auto classes = r.find("classes")) {
        classes->expect_object();
        for (auto it = classes->json().begin(); it != classes->json().end(); ++it) {
            const detail::JsonReader v(*it, classes->path() + "." + it.key());
            const auto k = kernel_class_from_string(it.key());
            if (!k) {
                std::string list;
                for (KernelClass x : all_kernel_classes) list += (list.empty() ? "" : ", ") + std::string(to_string(x));
                throw FormatError(v.path(), "unknown kernel class (expected one of: " + list + ")");
            }
            v.allow_only({"scale", "floor_ns", "size_exponent", "fill_mid_ns", "fill_width", "host_ns"});
            KernelClassFit& f = c[*k];
            f.scale = bounded(v, "scale", 0.0, 0.0, 1e6);
            f.floor_ns = bounded(v, "floor_ns", 0.0, 0.0, 1e9);
            f.size_exponent = bounded(v, "size_exponent", 1.0, 0.05, 2.0);
            f.fill_mid_ns = bounded(v, "fill_mid_ns", 0.0, 0.0, 1e9);
            f.fill_width = bounded(v, "fill_width", 1.0, 0.05, 64.0);
            if (v.find("host_ns")) f.host_ns = bounded(v, "host_ns", -1.0, 0.0, 1e9);
        }
    }
    if (auto engines = r.find("engines")) {
        for (std::size_t i = 0; i < engines->size(); ++i) {
            const detail::JsonReader v = (*engines)[i];
            v.allow_only({"class", "engine", "scale", "floor_ns", "size_exponent", "host_ns"});
            const std::string class_name = v.get<std::string>("class");
            const auto k = kernel_class_from_string(class_name);
            if (!k) v.at("class").fail("unknown kernel class '" + class_name + "'");
            const std::string engine_name = v.get<std::string>("engine");
            const auto e = engine_family_from_string(engine_name);
            if (!e || *e == ConvEngineFamily::other || *e == ConvEngineFamily::helper) {
                std::string list;
                for (ConvEngineFamily x : all_engine_families)
                    if (x != ConvEngineFamily::other && x != ConvEngineFamily::helper)
                        list += (list.empty() ? "" : ", ") + std::string(to_string(x));
                v.at("engine").fail("'" + engine_name + "' is not an engine family a fit can be for (expected one of: " +
                                    list + ")");
            }
            KernelClassFit& f = c.engine_fit(*k, *e);
            if (f != KernelClassFit{}) v.fail("a second fit for " + class_name + " on " + engine_name);
            // A time fit is its three parameters together; the host time may stand alone.
            const bool time = v.find("scale") || v.find("floor_ns") || v.find("size_exponent");
            if (!time && !v.find("host_ns")) v.fail("an engine fit needs scale, floor_ns and size_exponent, or host_ns");
            if (time) {
                for (const char* field : {"scale", "floor_ns", "size_exponent"})
                    if (!v.find(field)) v.fail(std::string("an engine fit's time needs '") + field + "' too");
                f.scale = bounded(v, "scale", 0.0, 1e-9, 1e6);
                f.floor_ns = bounded(v, "floor_ns", 0.0, 0.0, 1e9);
                f.size_exponent = bounded(v, "size_exponent", 1.0, 0.05, 2.0);
            }
            if (v.find("host_ns")) f.host_ns = bounded(v, "host_ns", -1.0, 0.0, 1e9);
        }
    }
    return c;
}

inline nlohmann::json to_json(const Calibration& c) {
    return {{"format", "braid.calibration"},
            {"version", Calibration::format_version},
            {"device",
             {{"key", c.device_key},
              {"name", c.device_name},
              {"sm_count", c.sm_count},
              {"compute_capability", std::to_string(c.cc_major) + "." + std::to_string(c.cc_minor)}}},
            {"source", c.source},
            {"kernel_time_scale", {{"graph", c.graph_kernel_time_scale}, {"eager", c.eager_kernel_time_scale}}},
            {"cupti_host_scale", c.cupti_host_scale},
            {"sim", to_json(c.sim)},
            {"estimates", to_json(c.estimate)}};
}

// `report` (what the fit saw, for people) may be present and is not read.
inline Calibration calibration_from_json(const detail::JsonReader& r) {
    r.expect_format("braid.calibration");
    r.allow_only({"format", "version", "device", "source", "kernel_time_scale", "cupti_host_scale", "sim", "estimates",
                  "report"});
    if (const int v = r.get<int>("version"); v != Calibration::format_version)
        r.at("version").fail("version " + std::to_string(v) + " is not supported (this braid reads version " +
                             std::to_string(Calibration::format_version) + ")");
    Calibration c;
    {
        const detail::JsonReader d = r.at("device");
        d.allow_only({"key", "name", "sm_count", "compute_capability"});
        c.device_key = d.get_or<std::string>("key", "");
        c.device_name = d.get_or<std::string>("name", "");
        if (c.device_key.empty() && c.device_name.empty()) d.fail("needs a key or a name");
        c.sm_count = d.get<int>("sm_count");
        if (c.sm_count <= 0 || c.sm_count > 4096) d.at("sm_count").fail("must be between 1 and 4096");
        const std::string cc = d.get<std::string>("compute_capability");
        const auto dot = cc.find('.');
        if (dot == std::string::npos || dot == 0 || dot + 1 == cc.size() ||
            cc.find_first_not_of("0123456789.") != std::string::npos || cc.find('.', dot + 1) != std::string::npos ||
            cc.size() > 7)
            d.at("compute_capability").fail("expected \"major.minor\" such as \"9.0\", got \"" + cc + "\"");
        c.cc_major = std::stoi(cc.substr(0, dot));
        c.cc_minor = std::stoi(cc.substr(dot + 1));
    }
    c.source = r.get_or<std::string>("source", "");
    if (auto s = r.find("kernel_time_scale")) {
        s->allow_only({"graph", "eager"});
        for (auto [name, field] : {std::pair{"graph", &c.graph_kernel_time_scale}, std::pair{"eager", &c.eager_kernel_time_scale}}) {
            *field = s->get_or<double>(name, 1.0);
            if (!(*field >= 0.1 && *field <= 10.0)) s->at(name).fail("must be between 0.1 and 10");
        }
    }
    c.cupti_host_scale = r.get_or<double>("cupti_host_scale", 0.0);
    if (!(c.cupti_host_scale == 0.0 || (c.cupti_host_scale >= 0.05 && c.cupti_host_scale <= 10.0)))
        r.at("cupti_host_scale").fail("must be 0 (not used) or between 0.05 and 10");
    if (auto s = r.find("sim")) c.sim = sim_params_from_json(*s);
    if (auto e = r.find("estimates")) c.estimate = estimate_calibration_from_json(*e);
    return c;
}

inline Calibration calibration_from_json(const nlohmann::json& j) {
    return calibration_from_json(detail::JsonReader(j, "$"));
}

inline Calibration load_calibration(const std::string& path) {
    return calibration_from_json(detail::JsonReader(detail::load_json_file(path), path + ": $"));
}

// A calibration file's text: `c` and, when given, a report for people.
inline std::string calibration_file_text(const Calibration& c, const nlohmann::json& report = nullptr) {
    nlohmann::json j = to_json(c);
    if (!report.is_null()) j["report"] = report;
    return j.dump(2) + "\n";
}

// Writes `c` (and the report) to `path`, whole or not at all, making its folder.
inline void save_calibration(const Calibration& c, const std::string& path, const nlohmann::json& report = nullptr) {
    detail::write_file("calibration", path, calibration_file_text(c, report));
}

}  // namespace braid
