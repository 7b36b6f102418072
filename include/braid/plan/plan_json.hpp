// Plan <-> JSON ("braid.plan", version 1; schema in docs/formats.md). Ops are
// named, not numbered, so a plan file can be read and edited by people;
// loading resolves the names against the graph and checks the fingerprint
// first, so a plan for another graph is rejected with a message that says so.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "braid/detail/json_reader.hpp"
#include "braid/detail/write_files.hpp"
#include "braid/error.hpp"
#include "braid/graph/op_graph.hpp"
#include "braid/plan/plan.hpp"
#include "braid/plan/validate.hpp"

namespace braid {

namespace detail {

inline LaunchMode mode_from_json(const JsonReader& r) {
    const std::string mode = r.get<std::string>();
    if (mode != "graph" && mode != "eager") r.fail("expected \"graph\" or \"eager\", got \"" + mode + "\"");
    return mode == "graph" ? LaunchMode::graph : LaunchMode::eager;
}

// "options": the v1 spelling, which keeps the chosen candidate's settings
// under "chosen" and its description beside them as "chosen_description".
inline nlohmann::json options_to_json(const StrategyOptions& o) {
    nlohmann::json j = nlohmann::json::object();
    if (o.max_streams) j["max_streams"] = *o.max_streams;
    if (o.mode) j["mode"] = to_string(*o.mode);
    if (o.chains) j["chains"] = *o.chains;
    if (o.chosen) {
        const PlanChoice& c = *o.chosen;
        if (!c.base.empty()) {
            j["chosen"] = {{"base", c.base}};
            if (c.critical_path_priorities) j["chosen"]["priorities"] = "critical_path";
        } else {
            const ListSchedule& v = c.schedule;
            j["chosen"] = {{"main_streams", v.main_streams},   {"side_streams", v.side_streams},
                           {"pin_footprint", v.pin_footprint}, {"issue_order", v.rank_order ? "rank" : "modelled_start"},
                           {"batch_splits", v.batch_splits},   {"critical_stream", v.critical_stream},
                           {"equal_priorities", v.equal_priorities}};
        }
        j["chosen_description"] = c.describe();
    }
    if (o.candidates) j["candidates"] = *o.candidates;
    if (o.simulated) j["simulated"] = *o.simulated;
    if (o.predicted_ms) j["predicted_ms"] = *o.predicted_ms;
    return j;
}

inline PlanChoice choice_from_json(const JsonReader& r) {
    PlanChoice c;
    if (r.has("base")) {
        r.allow_only({"base", "priorities"});
        c.base = r.get<std::string>("base");
        const std::vector<std::string>& known = baseline_strategies();
        if (std::find(known.begin(), known.end(), c.base) == known.end()) {
            std::string list;
            for (std::size_t i = 0; i < known.size(); ++i)
                list += (i == 0 ? "\"" : i + 1 == known.size() ? " or \"" : ", \"") + known[i] + "\"";
            r.at("base").fail("expected " + list + ", got \"" + c.base + "\"");
        }
        if (auto p = r.find("priorities")) {
            if (p->get<std::string>() != "critical_path")
                p->fail("expected \"critical_path\", got \"" + p->get<std::string>() + "\"");
            c.critical_path_priorities = true;
        }
        return c;
    }
    r.allow_only({"main_streams", "side_streams", "pin_footprint", "issue_order", "batch_splits", "critical_stream",
                  "equal_priorities"});
    ListSchedule& v = c.schedule;
    v.main_streams = r.at("main_streams").at_least<std::uint32_t>(1);
    v.side_streams = r.get<std::uint32_t>("side_streams");
    v.pin_footprint = r.get<double>("pin_footprint");
    if (!std::isfinite(v.pin_footprint) || v.pin_footprint < 0.0)
        r.at("pin_footprint").fail("must be a finite number >= 0 (a share of the GPU), got " +
                                   nlohmann::json(v.pin_footprint).dump());
    const std::string order = r.get<std::string>("issue_order");
    if (order != "rank" && order != "modelled_start")
        r.at("issue_order").fail("expected \"rank\" or \"modelled_start\", got \"" + order + "\"");
    v.rank_order = order == "rank";
    v.batch_splits = r.get<bool>("batch_splits");
    v.critical_stream = r.get<bool>("critical_stream");
    v.equal_priorities = r.get<bool>("equal_priorities");
    return c;
}

// A time or spread a plan records: finite, from 0 (`positive`: above 0) to
// `most`; beyond it the record is broken, not a measurement.
inline double recorded_number(const JsonReader& r, bool positive, double most) {
    const double v = r.get<double>();
    if (!std::isfinite(v) || v < 0.0 || (positive && v == 0.0) || v > most)
        r.fail(std::string("must be a finite number ") + (positive ? "> 0" : ">= 0") + " and at most " +
               nlohmann::json(most).dump() + ", got " + nlohmann::json(v).dump());
    return v;
}
inline constexpr double most_ms = 1e7;           // as a measurements file's times
inline constexpr double most_spread_pct = 1e6;

inline StrategyOptions options_from_json(const JsonReader& r) {
    r.allow_only({"max_streams", "mode", "chains", "chosen", "chosen_description", "candidates", "simulated",
                  "predicted_ms"});
    StrategyOptions o;
    if (auto f = r.find("max_streams")) o.max_streams = f->at_least<std::uint32_t>(1);
    if (auto f = r.find("mode")) o.mode = mode_from_json(*f);
    if (auto f = r.find("chains")) o.chains = f->at_least<std::uint32_t>(1);
    if (auto f = r.find("chosen")) o.chosen = choice_from_json(*f);
    // The description is derived from "chosen"; it is written for people.
    if (auto f = r.find("chosen_description")) {
        f->get<std::string>();
        if (!o.chosen) f->fail("a description without \"chosen\"");
    }
    if (auto f = r.find("candidates")) o.candidates = f->get<std::uint32_t>();
    if (auto f = r.find("simulated")) o.simulated = f->get<std::uint32_t>();
    if (o.candidates && o.simulated && *o.simulated > *o.candidates)
        r.at("simulated").fail("judged " + std::to_string(*o.simulated) + " of " + std::to_string(*o.candidates) +
                               " candidates");
    if (auto f = r.find("predicted_ms")) o.predicted_ms = recorded_number(*f, true, most_ms);
    return o;
}

inline nlohmann::json measured_to_json(const PlanMeasurement& m) {
    nlohmann::json candidates = nlohmann::json::array();
    for (const MeasuredCandidate& c : m.candidates) {
        nlohmann::json j{
            {"name", c.name}, {"median_ms", c.median_ms}, {"spread_pct", c.spread_pct}, {"samples", c.samples}};
        if (!c.declined.empty()) j["declined"] = c.declined;
        candidates.push_back(std::move(j));
    }
    return {{"device", m.on.device},   {"driver", m.on.driver},
            {"cudnn", m.on.cudnn},     {"cublas", m.on.cublas},
            {"backend", m.on.backend}, {"mode", to_string(m.on.mode)},
            {"batch", m.on.batch},     {"settings", m.on.settings},
            {"median_ms", m.median_ms},
            {"spread_pct", m.spread_pct}, {"rounds", m.rounds},
            {"switched", m.switched},  {"candidates", std::move(candidates)}};
}

inline PlanMeasurement measured_from_json(const JsonReader& r) {
    r.allow_only({"device", "driver", "cudnn", "cublas", "backend", "mode", "batch", "settings", "median_ms", "spread_pct",
                  "rounds", "switched", "candidates"});
    PlanMeasurement m;
    m.on.device = r.get<std::string>("device");
    m.on.driver = r.get<std::string>("driver");
    m.on.cudnn = r.get<std::string>("cudnn");
    m.on.cublas = r.get<std::string>("cublas");
    m.on.backend = r.get<std::string>("backend");
    m.on.mode = mode_from_json(r.at("mode"));
    m.on.batch = r.at("batch").at_least<std::uint32_t>(1);
    m.on.settings = r.get<std::string>("settings");
    m.median_ms = recorded_number(r.at("median_ms"), true, most_ms);
    m.spread_pct = recorded_number(r.at("spread_pct"), false, most_spread_pct);
    if (m.on.backend != "cuda" && m.on.backend != "host")
        r.at("backend").fail("expected \"cuda\" or \"host\", got \"" + m.on.backend + "\"");
    m.rounds = r.at("rounds").at_least<std::uint32_t>(1);
    m.switched = r.get<bool>("switched");
    auto cs = r.at("candidates");
    for (std::size_t i = 0; i < cs.size(); ++i) {
        cs[i].allow_only({"name", "median_ms", "spread_pct", "samples", "declined"});
        MeasuredCandidate c{cs[i].get<std::string>("name"), recorded_number(cs[i].at("median_ms"), false, most_ms),
                            recorded_number(cs[i].at("spread_pct"), false, most_spread_pct),
                            cs[i].get<std::uint32_t>("samples")};
        if (auto d = cs[i].find("declined")) {
            c.declined = d->get<std::string>();
            if (c.declined.empty()) d->fail("an empty reason (leave \"declined\" out for a measured candidate)");
        }
        if (!c.declined.empty() && c.samples != 0)
            cs[i].fail("a declined candidate with " + std::to_string(c.samples) + " samples");
        // One sample a round at most, and at least one for a timed candidate.
        if (c.declined.empty() && (c.samples == 0 || c.samples > m.rounds))
            cs[i].at("samples").fail("must be from 1 to the " + std::to_string(m.rounds) + " rounds, got " +
                                     std::to_string(c.samples));
        m.candidates.push_back(std::move(c));
    }
    return m;
}

// The record must describe the plan it comes with: a stream cap the plan
// keeps, as many chains or chosen streams as the plan has streams. (A braid
// plan that chose a baseline is exempt from the cap: braid let a baseline
// win over the cap before commit 9629e45, and the H200 data set holds such
// plans, nimble's 109 streams under a cap of 16.)
inline void check_record(const JsonReader& r, const Plan& plan) {
    const std::uint32_t n = plan.stream_count();
    const StrategyOptions& o = plan.options;
    const auto streams = [](std::uint32_t k) { return std::to_string(k) + (k == 1 ? " stream" : " streams"); };
    const bool chose_baseline = o.chosen && !o.chosen->base.empty();
    if (o.max_streams && *o.max_streams < n && !chose_baseline)
        r.at("options").at("max_streams").fail("says at most " + streams(*o.max_streams) + ", but the plan has " +
                                               std::to_string(n));
    if (o.chains && *o.chains != n)
        r.at("options").at("chains").fail("says " + std::to_string(*o.chains) + " chains (one stream each), but the plan has " +
                                          streams(n));
    if (o.chosen && o.chosen->base.empty() &&
        std::uint64_t{o.chosen->schedule.main_streams} + o.chosen->schedule.side_streams != n)
        r.at("options").at("chosen").fail("says " + std::to_string(o.chosen->schedule.main_streams) + " main + " +
                                          std::to_string(o.chosen->schedule.side_streams) + " side streams, but the plan has " +
                                          streams(n));
}

}  // namespace detail

inline nlohmann::json to_json(const Plan& plan, const OpGraph& graph) {
    for (std::size_t i = 0; i < plan.steps.size(); ++i)
        if (plan.steps[i].op >= graph.op_count())
            throw PlanError("cannot write the plan: step " + std::to_string(i) + " names op id " +
                            std::to_string(plan.steps[i].op) + " but the graph has " +
                            std::to_string(graph.op_count()) + " ops");
    nlohmann::json streams = nlohmann::json::array();
    for (int p : plan.stream_priorities) streams.push_back({{"priority", p}});
    nlohmann::json steps = nlohmann::json::array();
    for (const PlanStep& s : plan.steps) {
        nlohmann::json j{{"op", graph.op(s.op).name}, {"stream", s.stream}};
        if (s.parts > 1) {
            j["part"] = s.part;
            j["parts"] = s.parts;
        }
        steps.push_back(std::move(j));
    }
    nlohmann::json waits = nlohmann::json::array();
    for (const PlanWait& w : plan.waits) waits.push_back({{"step", w.step}, {"after", w.after}});
    nlohmann::json out{
        {"format", "braid.plan"},
        {"version", Plan::format_version},
        {"strategy", plan.strategy},
        {"options", detail::options_to_json(plan.options)},
        {"device", plan.device},
        {"graph_fingerprint", plan.graph_fingerprint},
        {"op_count", graph.op_count()},
        {"streams", std::move(streams)},
        {"steps", std::move(steps)},
        {"waits", std::move(waits)},
    };
    if (plan.measured) out["measured"] = detail::measured_to_json(*plan.measured);
    return out;
}

// Reads a plan for `graph`. Errors carry the JSON path, after the name of
// the document when given ("plan.json: $.steps[4].op"). The result still
// needs validate() for ordering and minimality.
inline Plan plan_from_json(const nlohmann::json& json, const OpGraph& graph, const std::string& source = "") {
    detail::JsonReader r(json, source.empty() ? "$" : source + ": $");
    r.expect_format("braid.plan");
    r.allow_only({"format", "version", "strategy", "options", "device", "graph_fingerprint", "op_count", "streams",
                  "steps", "waits", "measured"});
    const int version = r.get<int>("version");
    if (version != Plan::format_version)
        r.at("version").fail("this braid reads plan version " + std::to_string(Plan::format_version) + ", not " +
                              std::to_string(version));
    Plan plan;
    plan.graph_fingerprint = r.get<std::string>("graph_fingerprint");
    const std::optional<std::uint64_t> op_count =
        r.has("op_count") ? std::optional(r.get<std::uint64_t>("op_count")) : std::nullopt;
    if (plan.graph_fingerprint != graph.fingerprint()) {
        std::string ops = op_count ? std::to_string(*op_count) + " ops" : "another graph";
        r.at("graph_fingerprint")
            .fail("this plan was made for graph " + plan.graph_fingerprint + " (" + ops + "), not for this graph " +
                  graph.fingerprint() + " (" + std::to_string(graph.op_count()) + " ops): make a new plan for it");
    }
    if (op_count && *op_count != graph.op_count())
        r.at("op_count").fail("says " + std::to_string(*op_count) + " ops, but graph " + graph.fingerprint() + " has " +
                              std::to_string(graph.op_count()));
    plan.strategy = r.get<std::string>("strategy");
    if (auto o = r.find("options")) plan.options = detail::options_from_json(*o);
    plan.device = r.get_or<std::string>("device", "");
    if (auto m = r.find("measured")) plan.measured = detail::measured_from_json(*m);

    auto streams = r.at("streams");
    if (streams.size() == 0) streams.fail("a plan needs at least one stream");
    if (streams.size() > Plan::max_stream_count)
        streams.fail(std::to_string(streams.size()) + " streams; braid runs at most " +
                     std::to_string(Plan::max_stream_count) + " (each is a CUDA stream or a host thread)");
    for (std::size_t i = 0; i < streams.size(); ++i) {
        streams[i].allow_only({"priority"});
        plan.stream_priorities.push_back(streams[i].get<int>("priority"));
    }

    detail::check_record(r, plan);

    auto steps = r.at("steps");
    for (std::size_t i = 0; i < steps.size(); ++i) {
        auto st = steps[i];
        st.allow_only({"op", "stream", "part", "parts"});
        PlanStep s;
        auto op = st.at("op");
        const std::string name = op.get<std::string>();
        if (!graph.has_op(name)) op.fail("no op named '" + name + "' in the graph");
        s.op = graph.op_id(name);
        s.stream = st.get<std::uint32_t>("stream");
        if (s.stream >= plan.stream_count())
            st.at("stream").fail("stream " + std::to_string(s.stream) + " does not exist (the plan has " +
                                 std::to_string(plan.stream_count()) + ")");
        s.parts = st.find("parts") ? st.at("parts").at_least<std::uint32_t>(1) : 1;
        s.part = st.get_or<std::uint32_t>("part", 0);
        if (s.part >= s.parts) st.at("part").fail("must be < parts (" + std::to_string(s.parts) + ")");
        plan.steps.push_back(s);
    }
    auto waits = r.at("waits");
    for (std::size_t i = 0; i < waits.size(); ++i) {
        auto w = waits[i];
        w.allow_only({"step", "after"});
        PlanWait pw{w.get<std::uint32_t>("step"), w.get<std::uint32_t>("after")};
        if (pw.step >= plan.steps.size()) w.at("step").fail("no step " + std::to_string(pw.step));
        if (pw.after >= plan.steps.size()) w.at("after").fail("no step " + std::to_string(pw.after));
        plan.waits.push_back(pw);
    }
    return plan;
}

// Reads and validates a plan file: format errors name the field ("path:
// $.steps[4].op"), a plan that breaks an invariant names the file ("path:
// invalid plan (strategy 'braid'): ...").
inline Plan load_plan(const std::string& path, const OpGraph& graph) {
    Plan plan = plan_from_json(detail::load_json_file(path), graph, path);
    if (std::string problem = first_violation(plan, graph); !problem.empty())
        throw PlanError(path + ": invalid plan (strategy '" + plan.strategy + "'): " + problem);
    return plan;
}

// A plan file's text, as braid's tools write it.
inline std::string plan_file_text(const Plan& plan, const OpGraph& graph) { return to_json(plan, graph).dump(2) + "\n"; }

// Writes a plan file, whole or not at all; `label` ("--plan-out") starts
// the error when it cannot be written.
inline void save_plan(const Plan& plan, const OpGraph& graph, const std::string& path, const std::string& label = "plan") {
    detail::write_file(label, path, plan_file_text(plan, graph));
}

}  // namespace braid
