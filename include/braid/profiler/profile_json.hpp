// Profile <-> JSON ("braid.profile", version 1; schema in
// docs/profile-format.md). Loading validates every field; errors carry the
// JSON path ("$.ops[2].kernels[0].block[1]").
#pragma once

#include <cmath>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "braid/config.hpp"
#include "braid/detail/json_reader.hpp"
#include "braid/detail/write_files.hpp"
#include "braid/error.hpp"
#include "braid/graph/graph_json.hpp"
#include "braid/model/device_json.hpp"
#if BRAID_HAS_OCCUPANCY_HEADER
#include "braid/model/occupancy.hpp"
#endif
#include "braid/profiler/profile.hpp"

namespace braid {

namespace detail {

inline nlohmann::json stats_json(const DurationStats& s) {
    return {{"median", s.median_ns}, {"min", s.min_ns}, {"max", s.max_ns}, {"count", s.count}};
}

inline nlohmann::json dim3_json(const Dim3& d) { return nlohmann::json::array({d.x, d.y, d.z}); }

inline DurationStats stats_from_json(const JsonReader& r) {
    r.allow_only({"median", "min", "max", "count"});
    DurationStats s;
    s.count = r.at("count").at_least<std::uint32_t>(1);  // a duration needs at least one sample
    auto number = [&](const char* key) {
        const double v = r.get<double>(key);
        if (!std::isfinite(v) || v < 0.0) r.at(key).fail("must be a finite number >= 0, got " + std::to_string(v));
        // 1000 s: far above any kernel or iteration; a larger time is a unit mistake or a broken file.
        if (v > 1e12) r.at(key).fail("must be at most 1e12 ns (1000 s), got " + nlohmann::json(v).dump());
        return v;
    };
    s.median_ns = number("median");
    s.min_ns = number("min");
    s.max_ns = number("max");
    if (s.min_ns > s.median_ns || s.median_ns > s.max_ns)
        r.fail("expected min <= median <= max, got " + std::to_string(s.min_ns) + ", " + std::to_string(s.median_ns) +
               ", " + std::to_string(s.max_ns));
    return s;
}

// A grid or block: three dimensions within CUDA's launch limits.
inline Dim3 dim3_from_json(const JsonReader& r, bool grid) {
    if (r.size() != 3) r.fail("expected [x, y, z], got " + std::to_string(r.size()) + " values");
    Dim3 d;
    std::uint32_t* parts[] = {&d.x, &d.y, &d.z};
    for (std::size_t i = 0; i < 3; ++i) {
        *parts[i] = r[i].at_least<std::uint32_t>(1);
        const std::uint32_t most = grid ? (i == 0 ? LaunchLimits::max_grid_x : LaunchLimits::max_grid_yz)
                                        : (i == 2 ? LaunchLimits::max_block_z : LaunchLimits::max_block_xy);
        if (*parts[i] > most)
            r[i].fail("must be <= " + std::to_string(most) + " (CUDA's " + (grid ? "grid" : "block") + " limit), got " +
                      std::to_string(*parts[i]));
    }
    if (!grid)
        if (std::string problem = block_problem(d); !problem.empty()) r.fail(problem);
    return d;
}

inline nlohmann::json settings_json(const ProfileSettings& settings) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [name, value] : settings)
        out[name] = std::visit([](const auto& v) { return nlohmann::json(v); }, value);
    return out;
}

// Scalars only: a nested value is refused here, before anything copies it
// (copying a deeply nested document recurses until the stack runs out).
inline ProfileSettings settings_from_json(const JsonReader& r) {
    r.expect_object();
    ProfileSettings out;
    for (auto it = r.json().begin(); it != r.json().end(); ++it) {
        const JsonReader s = r.at(it.key());
        const nlohmann::json& j = s.json();
        if (j.is_boolean())
            out.emplace(it.key(), j.get<bool>());
        else if (j.is_string())
            out.emplace(it.key(), j.get<std::string>());
        else if (j.is_number_float())
            out.emplace(it.key(), j.get<double>());
        else if (j.is_number_integer())
            out.emplace(it.key(), s.get<std::int64_t>());  // refuses integers beyond int64
        else
            s.fail(std::string("expected a number, string or bool, got ") + json_type_name(j));
    }
    return out;
}

}  // namespace detail

inline nlohmann::json to_json(const Profile& p) {
    nlohmann::json ops = nlohmann::json::array();
    for (const ProfiledOp& op : p.ops) {
        nlohmann::json kernels = nlohmann::json::array();
        for (const ProfiledKernel& k : op.kernels)
            kernels.push_back({
                {"name", k.shape.name},
                {"grid", detail::dim3_json(k.shape.grid)},
                {"block", detail::dim3_json(k.shape.block)},
                {"registers_per_thread", k.shape.regs_per_thread},
                {"static_smem_bytes", k.shape.static_smem_bytes},
                {"dynamic_smem_bytes", k.shape.dynamic_smem_bytes},
                {"duration_ns", detail::stats_json(k.duration)},
                {"order", k.order},
            });
        nlohmann::json transfers = nlohmann::json::array();
        for (const ProfiledTransfer& t : op.transfers)
            transfers.push_back({
                {"kind", to_string(t.kind)},
                {"bytes", t.bytes},
                {"duration_ns", detail::stats_json(t.duration)},
                {"order", t.order},
            });
        nlohmann::json o{
            {"name", op.name},
            {"layer", op.layer},
            {"kind", to_string(op.kind)},
            {"duration_ns", detail::stats_json(op.duration)},
            {"kernels", std::move(kernels)},
            {"transfers", std::move(transfers)},
        };
        if (op.host) o["host_ns"] = detail::stats_json(*op.host);
        ops.push_back(std::move(o));
    }
    nlohmann::json unattributed = nlohmann::json::array();
    for (const UnattributedWork& u : p.unattributed)
        unattributed.push_back({{"what", u.what}, {"name", u.name}, {"count", u.count}, {"total_ns", u.total_ns}});
    return nlohmann::json{
        {"format", "braid.profile"},
        {"version", Profile::format_version},
        {"device", to_json(p.device)},
        {"graph_fingerprint", p.graph_fingerprint},
        {"graph", p.graph ? to_json(*p.graph) : nlohmann::json()},
        {"run",
         {
             {"network", p.run.network},
             {"settings", detail::settings_json(p.run.settings)},
             {"plan", p.run.plan},
             {"warmup_iterations", p.run.warmup_iterations},
             {"measured_iterations", p.run.measured_iterations},
             {"tool", p.run.tool},
         }},
        {"timing", to_string(p.timing)},
        {"durations_only", p.durations_only},
        {"iteration_ns", p.iteration ? detail::stats_json(*p.iteration) : nlohmann::json()},
        {"launch_api_ns", p.launch_api ? detail::stats_json(*p.launch_api) : nlohmann::json()},
        {"dropped_records", p.dropped_records},
        {"ops", std::move(ops)},
        {"unattributed", std::move(unattributed)},
    };
}

// Reads and validates a profile. `source` names the document in errors (a
// file name, or "$").
inline Profile profile_from_json(const nlohmann::json& json, const std::string& source = "$") {
    detail::JsonReader r(json, source);
    r.expect_format("braid.profile");
    r.allow_only({"format", "version", "device", "graph_fingerprint", "graph", "run", "timing", "durations_only",
                  "iteration_ns", "launch_api_ns", "dropped_records", "ops", "unattributed"});
    const int version = r.get<int>("version");
    if (version != Profile::format_version)
        r.at("version").fail("this braid reads profile version " + std::to_string(Profile::format_version) +
                              ", not " + std::to_string(version));
    Profile p;
    p.device = device_from_json(r.at("device"));
    p.graph_fingerprint = r.get<std::string>("graph_fingerprint");
    if (p.graph_fingerprint.empty()) r.at("graph_fingerprint").fail("must not be empty");
    if (auto g = r.find("graph")) {
        p.graph = graph_from_json(*g);
        if (p.graph->fingerprint() != p.graph_fingerprint)
            g->fail("the embedded graph is " + p.graph->fingerprint() + " but the profile is for " +
                    p.graph_fingerprint);
    }
    {
        const detail::JsonReader run = r.at("run");
        run.allow_only({"network", "settings", "plan", "warmup_iterations", "measured_iterations", "tool"});
        p.run.network = run.get<std::string>("network");
        if (auto s = run.find("settings")) p.run.settings = detail::settings_from_json(*s);
        p.run.plan = run.get_or<std::string>("plan", "serial");
        if (p.run.plan.empty()) run.at("plan").fail("must name the plan the iterations ran on (\"serial\")");
        p.run.warmup_iterations = run.get<std::uint32_t>("warmup_iterations");
        p.run.measured_iterations = run.at("measured_iterations").at_least<std::uint32_t>(1);
        p.run.tool = run.get_or<std::string>("tool", "");
    }
    {
        const std::string timing = r.get<std::string>("timing");
        if (timing == "cupti")
            p.timing = ProfileTiming::cupti;
        else if (timing == "cuda_events")
            p.timing = ProfileTiming::cuda_events;
        else
            r.at("timing").fail("expected \"cupti\" or \"cuda_events\", got \"" + timing + "\"");
    }
    p.durations_only = r.get<bool>("durations_only");
    if (p.timing == ProfileTiming::cuda_events && !p.durations_only)
        r.at("durations_only").fail("must be true when timing is \"cuda_events\" (events see no kernels)");
    if (auto it = r.find("iteration_ns")) p.iteration = detail::stats_from_json(*it);
    if (auto la = r.find("launch_api_ns")) p.launch_api = detail::stats_from_json(*la);
    p.dropped_records = r.get_or<std::uint64_t>("dropped_records", 0);

    const detail::JsonReader ops = r.at("ops");
    if (ops.size() == 0) ops.fail("a profile needs at least one op");
    std::map<std::string, std::size_t> seen;
    for (std::size_t i = 0; i < ops.size(); ++i) {
        const detail::JsonReader o = ops[i];
        o.allow_only({"name", "layer", "kind", "duration_ns", "host_ns", "kernels", "transfers"});
        ProfiledOp op;
        op.name = o.get<std::string>("name");
        if (op.name.empty()) o.at("name").fail("must not be empty");
        if (auto [it, fresh] = seen.emplace(op.name, i); !fresh)
            o.at("name").fail("duplicate op '" + op.name + "' (also at " + ops.path() + "[" +
                              std::to_string(it->second) + "])");
        op.layer = o.get_or<std::string>("layer", "");
        {
            const std::string kind = o.get_or<std::string>("kind", "other");
            auto k = op_kind_from_string(kind);
            if (!k) o.at("kind").fail("unknown op kind \"" + kind + "\"");
            op.kind = *k;
        }
        op.duration = detail::stats_from_json(o.at("duration_ns"));
        if (auto h = o.find("host_ns")) op.host = detail::stats_from_json(*h);

        const detail::JsonReader ks = o.at("kernels");
        const detail::JsonReader ts = o.at("transfers");
        const std::size_t work = ks.size() + ts.size();
        std::vector<int> order_seen(work, -1);
        auto take_order = [&](const detail::JsonReader& item) {
            const std::uint32_t order = item.get<std::uint32_t>("order");
            if (order >= work)
                item.at("order").fail("must be below " + std::to_string(work) +
                                      " (the op's kernels and transfers together)");
            if (order_seen[order] >= 0) item.at("order").fail("order " + std::to_string(order) + " is used twice");
            order_seen[order] = 1;
            return order;
        };
        if (p.durations_only && work != 0)
            o.fail("a durations-only profile lists no kernels or transfers (got " + std::to_string(work) + ")");
        for (std::size_t j = 0; j < ks.size(); ++j) {
            const detail::JsonReader k = ks[j];
            k.allow_only({"name", "grid", "block", "registers_per_thread", "static_smem_bytes", "dynamic_smem_bytes",
                          "duration_ns", "order"});
            ProfiledKernel pk;
            pk.shape.name = k.get<std::string>("name");
            if (pk.shape.name.empty()) k.at("name").fail("must not be empty");
            pk.shape.grid = detail::dim3_from_json(k.at("grid"), true);
            pk.shape.block = detail::dim3_from_json(k.at("block"), false);
            pk.shape.regs_per_thread = k.get<std::uint32_t>("registers_per_thread");
            pk.shape.static_smem_bytes = k.get<std::uint32_t>("static_smem_bytes");
            pk.shape.dynamic_smem_bytes = k.get<std::uint32_t>("dynamic_smem_bytes");
#if BRAID_HAS_OCCUPANCY_HEADER
            // It ran on the profile's device, so its blocks fit there; a shape that does not is a broken file.
            try {
                (void)occupancy(p.device, pk.shape);
            } catch (const ModelError& e) {
                k.fail(std::string("did not run on this profile's device as written: ") + e.what());
            }
#endif
            pk.duration = detail::stats_from_json(k.at("duration_ns"));
            pk.order = take_order(k);
            op.kernels.push_back(std::move(pk));
        }
        for (std::size_t j = 0; j < ts.size(); ++j) {
            const detail::JsonReader t = ts[j];
            t.allow_only({"kind", "bytes", "duration_ns", "order"});
            ProfiledTransfer pt;
            const std::string kind = t.get<std::string>("kind");
            auto tk = transfer_kind_from_string(kind);
            if (!tk) t.at("kind").fail("unknown transfer kind \"" + kind + "\"");
            pt.kind = *tk;
            pt.bytes = t.get<std::uint64_t>("bytes");
            pt.duration = detail::stats_from_json(t.at("duration_ns"));
            pt.order = take_order(t);
            op.transfers.push_back(pt);
        }
        p.ops.push_back(std::move(op));
    }
    // A profile that embeds its graph measured every op of it, and nothing else.
    if (p.graph) {
        std::vector<std::string> missing;
        for (const Op& op : p.graph->ops())
            if (!seen.count(op.name)) missing.push_back(op.name);
        if (!missing.empty()) ops.fail(unmeasured_ops_message(missing, "the embedded graph"));
        for (const auto& [name, i] : seen) {
            if (!p.graph->has_op(name)) ops[i].at("name").fail("'" + name + "' is not an op of the embedded graph");
            // The op as measured is the graph's op: its kind and layer, when
            // given, are the graph's; left out, they are taken from it.
            const Op& g = p.graph->op(p.graph->op_id(name));
            ProfiledOp& m = p.ops[i];
            if (!ops[i].has("kind")) m.kind = g.kind;
            if (!ops[i].has("layer")) m.layer = g.layer;
            if (m.kind != g.kind)
                ops[i].at("kind").fail("op '" + name + "' is \"" + std::string(to_string(m.kind)) + "\" here, \"" +
                                       std::string(to_string(g.kind)) + "\" in the embedded graph");
            if (m.layer != g.layer)
                ops[i].at("layer").fail("op '" + name + "' is of layer '" + m.layer + "' here, of layer '" + g.layer +
                                        "' in the embedded graph");
        }
    }
    if (auto un = r.find("unattributed")) {
        for (std::size_t i = 0; i < un->size(); ++i) {
            const detail::JsonReader u = (*un)[i];
            u.allow_only({"what", "name", "count", "total_ns"});
            UnattributedWork w;
            w.what = u.get<std::string>("what");
            w.name = u.get_or<std::string>("name", "");
            w.count = u.get<std::uint32_t>("count");
            w.total_ns = u.get_or<double>("total_ns", 0.0);
            if (!std::isfinite(w.total_ns) || w.total_ns < 0.0 || w.total_ns > 1e12)
                u.at("total_ns").fail("must be a finite number from 0 to 1e12 ns, got " + nlohmann::json(w.total_ns).dump());
            p.unattributed.push_back(std::move(w));
        }
    }
    return p;
}

// Errors name the file: "profile.json:3:14: malformed JSON ..." for syntax,
// "profile.json: $.ops[2].kernels[0].grid: ..." for fields.
inline Profile load_profile(const std::string& path) {
    return profile_from_json(detail::load_json_file(path), path + ": $");
}

// Writes `p` to `path`, whole or not at all (a reader never sees half a profile).
inline void save_profile(const Profile& p, const std::string& path) {
    detail::write_file("profile", path, to_json(p).dump(2) + "\n");
}

}  // namespace braid
