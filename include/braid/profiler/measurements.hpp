// Measured iteration times of plans, tied to the profiles of the networks
// they ran (`braid.measurements`, version 1; docs/formats.md): what
// braid-calibrate fits the simulator to and what the accuracy benchmark
// judges it on. Profile and plan files are named relative to the
// measurements file; every repeat of a measurement is kept.
#pragma once

#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "braid/detail/json_reader.hpp"
#include "braid/error.hpp"
#include "braid/model/device_table.hpp"
#include "braid/plan/plan_json.hpp"
#include "braid/planner/calibrate.hpp"
#include "braid/planner/strategies/nimble.hpp"
#include "braid/planner/strategies/serial.hpp"
#include "braid/profiler/costs.hpp"
#include "braid/profiler/profile.hpp"
#include "braid/profiler/profile_json.hpp"

namespace braid {

struct MeasuredRow {
    std::string label;    // what the plan is, for tables ("nimble", "braid-roofline")
    std::string profile;  // the profile file, as written (relative to the measurements file)
    std::string plan;     // "serial" or "nimble" (made from the profile's graph), or a plan file
    LaunchMode mode = LaunchMode::graph;
    std::vector<double> ms;    // every repeat, milliseconds per iteration
    ProfileSettings network;   // the bundled network it ran, for estimates (net, batch, image, ...); may be empty
};

struct MeasurementSet {
    std::string device_name, device_key, driver, cudnn, cublas;
    std::string source;
    std::vector<MeasuredRow> rows;
    std::filesystem::path folder;  // files are relative to it
};

inline MeasurementSet measurements_from_json(const detail::JsonReader& r, std::filesystem::path folder) {
    r.expect_format("braid.measurements");
    r.allow_only({"format", "version", "device", "source", "rows"});
    if (const int v = r.get<int>("version"); v != 1)
        r.at("version").fail("version " + std::to_string(v) + " is not supported (this braid reads version 1)");
    MeasurementSet m;
    m.folder = std::move(folder);
    {
        const detail::JsonReader d = r.at("device");
        d.allow_only({"name", "key", "driver", "cudnn", "cublas"});
        m.device_name = d.get_or<std::string>("name", "");
        m.device_key = d.get_or<std::string>("key", "");
        if (m.device_name.empty() && m.device_key.empty()) d.fail("needs a name or a key");
        m.driver = d.get_or<std::string>("driver", "");
        m.cudnn = d.get_or<std::string>("cudnn", "");
        m.cublas = d.get_or<std::string>("cublas", "");
    }
    m.source = r.get_or<std::string>("source", "");
    const detail::JsonReader rows = r.at("rows");
    if (rows.size() == 0) rows.fail("no rows: nothing was measured");
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const detail::JsonReader row = rows[i];
        row.allow_only({"label", "profile", "plan", "mode", "ms", "network"});
        MeasuredRow out;
        out.profile = row.get<std::string>("profile");
        out.plan = row.get<std::string>("plan");
        out.label = row.get_or<std::string>("label", out.plan);
        if (out.profile.empty()) row.at("profile").fail("must name a profile file");
        if (out.plan.empty()) row.at("plan").fail("must be \"serial\", \"nimble\" or a plan file");
        const std::string mode = row.get<std::string>("mode");
        if (mode != "graph" && mode != "eager") row.at("mode").fail("expected \"graph\" or \"eager\", got \"" + mode + "\"");
        out.mode = mode == "graph" ? LaunchMode::graph : LaunchMode::eager;
        const detail::JsonReader ms = row.at("ms");
        if (ms.size() == 0) ms.fail("no measurements");
        for (std::size_t k = 0; k < ms.size(); ++k) {
            const double v = ms[k].get<double>();
            if (!(v > 0.0) || !std::isfinite(v) || v > 1e7) ms[k].fail("must be a time in ms, > 0 and at most 1e7");
            out.ms.push_back(v);
        }
        if (auto n = row.find("network")) {
            out.network = detail::settings_from_json(*n);
            const auto net = out.network.find("net");
            if (!out.network.empty() && (net == out.network.end() || !std::holds_alternative<std::string>(net->second)))
                n->fail("needs \"net\", the bundled network's name, beside its other settings");
        }
        m.rows.push_back(std::move(out));
    }
    return m;
}

inline MeasurementSet load_measurements(const std::string& path) {
    if (std::filesystem::is_directory(path)) throw Error("'" + path + "' is a folder, not a measurements file");
    return measurements_from_json(detail::JsonReader(detail::load_json_file(path), path + ": $"),
                                  std::filesystem::path(path).parent_path());
}

// The file of a measurement set (version 1), every repeat kept: what
// measurements_from_json reads back. Throws what that would refuse: no
// device name or key, no rows, a row without times (naming it).
inline nlohmann::json measurements_to_json(const MeasurementSet& m) {
    if (m.device_name.empty() && m.device_key.empty())
        throw Error("measurements: the device needs a name or a key");
    if (m.rows.empty()) throw Error("measurements: no rows: nothing was measured");
    for (std::size_t i = 0; i < m.rows.size(); ++i)
        if (m.rows[i].ms.empty())
            throw Error("measurements row " + std::to_string(i) + " ('" + m.rows[i].label + "'): no times yet");
    nlohmann::json device = nlohmann::json::object();
    for (const auto& [key, value] : {std::pair{"name", &m.device_name}, std::pair{"key", &m.device_key},
                                     std::pair{"driver", &m.driver}, std::pair{"cudnn", &m.cudnn},
                                     std::pair{"cublas", &m.cublas}})
        if (!value->empty()) device[key] = *value;
    nlohmann::json rows = nlohmann::json::array();
    for (const MeasuredRow& r : m.rows) {
        nlohmann::json row = {{"label", r.label},
                              {"profile", r.profile},
                              {"plan", r.plan},
                              {"mode", r.mode == LaunchMode::graph ? "graph" : "eager"},
                              {"ms", r.ms}};
        if (!r.network.empty()) row["network"] = detail::settings_json(r.network);
        rows.push_back(std::move(row));
    }
    nlohmann::json doc = {{"format", "braid.measurements"}, {"version", 1}, {"device", std::move(device)}};
    if (!m.source.empty()) doc["source"] = m.source;
    doc["rows"] = std::move(rows);
    return doc;
}

// The rows a fresh data set measures for a profile of a bundled network
// (`profile_file` and `plan_file` as the measurements file will name them,
// relative to it): the serial and nimble plans, made from the profile's
// graph, and `plan_file` when given (say the plan braid-profile wrote beside
// the profile), each in graph and eager mode, with no times yet. Throws
// naming the profile when its run settings name no bundled network ("net"):
// the rows must say what to build to run them.
inline std::vector<MeasuredRow> rows_to_measure(const std::string& profile_file, const Profile& profile,
                                                const std::optional<std::string>& plan_file,
                                                const std::string& plan_label = "braid-profile") {
    const auto net = profile.run.settings.find("net");
    if (net == profile.run.settings.end() || !std::holds_alternative<std::string>(net->second))
        throw Error("profile '" + profile_file + "' (run '" + profile.run.network +
                    "') names no bundled network in its run settings (\"net\"): profile it again with braid-profile "
                    "--net, whose profiles say what they ran");
    std::vector<std::pair<std::string, std::string>> plans{{"serial", "serial"}, {"nimble", "nimble"}};
    if (plan_file) plans.emplace_back(plan_label, *plan_file);
    std::vector<MeasuredRow> rows;
    for (const LaunchMode mode : {LaunchMode::graph, LaunchMode::eager})
        for (const auto& [label, plan] : plans) rows.push_back({label, profile_file, plan, mode, {}, profile.run.settings});
    return rows;
}

// The measurements as calibration inputs: one ProfiledNet per distinct
// profile (its embedded graph and costs on the profile's device), one
// CalibrationRow per row (serial and nimble plans made from the graph, plan
// files loaded against it). `estimates`, when given, returns the estimates
// of a row's network (nullopt: unknown); `nets` then carry them, each
// library kernel naming the engine family its profile ran
// (engine_families_from_profile). Errors name the row and the file.
struct CalibrationInputs {
    std::vector<std::unique_ptr<OpGraph>> graphs;  // owned; nets point into them
    std::vector<ProfiledNet> nets;
    std::vector<CalibrationRow> rows;
};

using EstimatesOf = std::function<std::optional<std::vector<OpEstimate>>(const MeasuredRow&, const OpGraph&)>;

// "googlenet": the network without its size, for held-out splits.
inline std::string network_group(const MeasuredRow& row, const Profile& profile) {
    if (auto it = row.network.find("net"); it != row.network.end())
        if (const auto* s = std::get_if<std::string>(&it->second)) return *s;
    const std::string& n = profile.run.network;
    return n.substr(0, n.find_first_of(" ,"));
}

// Two settings agree: equal values, numbers compared as numbers (a width
// scale of 1 and of 1.0 are one setting).
inline bool same_setting(const ProfileSetting& a, const ProfileSetting& b) {
    const auto number = [](const ProfileSetting& s) -> std::optional<double> {
        if (const auto* i = std::get_if<std::int64_t>(&s)) return static_cast<double>(*i);
        if (const auto* d = std::get_if<double>(&s)) return *d;
        return std::nullopt;
    };
    if (const auto x = number(a), y = number(b); x && y) return *x == *y;
    return a == b;
}

// Where a row and the profile it names disagree on what ran: a setting both
// give with two values ("its 'image' is 112, the profile's run settings say
// 224"), or a GPU the measurements name that is not the profile's. Empty when
// they agree. Settings only one of them gives are not compared: a missing
// one means its default, which only the network's builder knows.
inline std::string row_profile_mismatch(const MeasurementSet& m, const MeasuredRow& row, const Profile& p) {
    for (const auto& [name, value] : row.network)
        if (const auto it = p.run.settings.find(name); it != p.run.settings.end() && !same_setting(value, it->second))
            return "its network's '" + name + "' is " + detail::settings_json({{name, value}})[name].dump() +
                   ", but the profile's run settings say " + detail::settings_json({{name, it->second}})[name].dump() +
                   ": a row's network must be the one its profile ran";
    // Keys when both have one (a table's name and the driver's may spell one GPU two ways), else names;
    // spelled as the device table compares them ("H200" is "h200").
    const auto differ = [](const std::string& a, const std::string& b) {
        return !a.empty() && !b.empty() && detail::lowercase_alnum(a) != detail::lowercase_alnum(b);
    };
    const bool keys = !m.device_key.empty() && !p.device.key.empty();
    if (keys ? differ(m.device_key, p.device.key) : differ(m.device_name, p.device.name))
        return "the measurements are of " + (m.device_name.empty() ? m.device_key : m.device_name) +
               ", but the profile ran on " + (p.device.name.empty() ? p.device.key : p.device.name) +
               ": measurements and profiles must come from one GPU";
    return {};
}

inline CalibrationInputs calibration_inputs(const MeasurementSet& m, const EstimatesOf& estimates = {}) {
    CalibrationInputs in;
    std::map<std::string, std::size_t> net_of;
    std::map<std::string, std::size_t> network_of;  // profile path -> the first row that names it
    for (std::size_t i = 0; i < m.rows.size(); ++i) {
        const MeasuredRow& row = m.rows[i];
        const std::string who = "measurements row " + std::to_string(i) + " ('" + row.label + "')";
        const std::string profile_path = (m.folder / row.profile).string();
        auto [it, fresh] = net_of.emplace(profile_path, in.nets.size());
        if (fresh) {
            if (!std::filesystem::is_regular_file(profile_path))
                throw Error(who + ": no profile file '" + profile_path + "'");
            network_of[profile_path] = i;
            // Errors of the profile and of the row's estimates name the row.
            const auto named = [&](auto&& what) {
                try {
                    return what();
                } catch (const Error& e) {
                    throw Error(who + ": " + e.what());
                }
            };
            const Profile p = named([&] { return load_profile(profile_path); });
            if (!p.graph) throw ProfileError(who + ": profile '" + profile_path + "' has no embedded graph");
            if (std::string problem = row_profile_mismatch(m, row, p); !problem.empty())
                throw Error(who + " (profile '" + profile_path + "'): " + problem);
            in.graphs.push_back(std::make_unique<OpGraph>(*p.graph));
            ProfiledNet net;
            net.name = std::filesystem::path(row.profile).stem().stem().string();
            net.group = network_group(row, p);
            net.graph = in.graphs.back().get();
            net.device = p.device;
            net.profiled = named([&] { return costs_from_profile(p, *net.graph, p.device); });
            net.profiled_iteration_ns = profiled_iteration_ns(p);
            net.launch_shapes = !p.durations_only;
            if (estimates) net.estimates = named([&] { return estimates(row, *net.graph); });
            if (net.estimates) named([&] { engine_families_from_profile(*net.estimates, net.profiled); });
            in.nets.push_back(std::move(net));
        } else if (const MeasuredRow& first = m.rows[network_of[profile_path]]; first.network != row.network) {
            // One profile, one network: rows that disagree on it cannot both be right.
            throw Error(who + ": its network settings differ from those of row " +
                        std::to_string(network_of[profile_path]) + " ('" + first.label + "'), which names the same profile '" +
                        row.profile + "'");
        }
        const ProfiledNet& net = in.nets[it->second];
        CalibrationRow r;
        r.label = row.label;
        r.net = it->second;
        r.mode = row.mode;
        r.measured_ms = row.ms;
        if (row.plan == "serial") {
            r.plan = strategy::serial(*net.graph, net.device.key);
        } else if (row.plan == "nimble") {
            r.plan = strategy::nimble(*net.graph, net.device.key);
        } else {
            const std::string plan_path = (m.folder / row.plan).string();
            if (!std::filesystem::is_regular_file(plan_path))
                throw Error(who + ": plan '" + row.plan + "' is not serial, nimble or a plan file ('" + plan_path +
                            "' does not exist)");
            try {
                r.plan = load_plan(plan_path, *net.graph);
            } catch (const Error& e) {
                throw Error(who + ": " + e.what());
            }
        }
        in.rows.push_back(std::move(r));
    }
    return in;
}

}  // namespace braid
