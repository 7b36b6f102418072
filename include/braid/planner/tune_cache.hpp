// The tuning cache: a tuned plan per graph, backend and launch mode in a
// folder, so that the next run of the same trainer on the same machine
// starts tuned. An entry counts only where it was measured: another device,
// driver, cuDNN or cuBLAS, or a file that no longer reads, is ignored with a
// message saying why, and tuning runs again and replaces it.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>

#include "braid/error.hpp"
#include "braid/graph/op_graph.hpp"
#include "braid/plan/plan.hpp"
#include "braid/plan/plan_json.hpp"

namespace braid {

// $BRAID_CACHE_DIR, else $XDG_CACHE_HOME/braid, else $HOME/.cache/braid;
// empty when none of them is set.
inline std::filesystem::path default_tune_cache_dir() {
    const auto env = [](const char* name) -> std::string {
        const char* v = std::getenv(name);
        return v == nullptr ? std::string() : std::string(v);
    };
    if (std::string d = env("BRAID_CACHE_DIR"); !d.empty()) return d;
    if (std::string d = env("XDG_CACHE_HOME"); !d.empty()) return std::filesystem::path(d) / "braid";
    if (std::string d = env("HOME"); !d.empty()) return std::filesystem::path(d) / ".cache" / "braid";
    return {};
}

inline std::filesystem::path tune_cache_file(const std::filesystem::path& dir, const std::string& graph_fingerprint,
                                             const MeasuredOn& on) {
    std::string name = graph_fingerprint + "-" + on.backend + "-" + std::string(to_string(on.mode)) + ".plan.json";
    std::replace(name.begin(), name.end(), ':', '-');  // "fnv1a64:..." names no file on every system
    return dir / name;
}

struct CachedPlan {
    std::optional<Plan> plan;  // set when the entry holds for this run
    std::string message;       // why it was used or ignored; empty when there is no entry
    std::filesystem::path path;
};

inline CachedPlan find_tuned_plan(const std::filesystem::path& dir, const OpGraph& graph, const MeasuredOn& on) {
    CachedPlan out;
    out.path = tune_cache_file(dir, graph.fingerprint(), on);
    std::error_code ec;
    if (!std::filesystem::exists(out.path, ec)) return out;
    const std::string where = "the tuned plan in " + out.path.string();
    Plan plan;
    try {
        plan = load_plan(out.path.string(), graph);
    } catch (const Error& e) {
        out.message = "ignoring " + where + ": " + e.what();
        return out;
    }
    if (!plan.measured) {
        out.message = "ignoring " + where + ": it records no measurement";
        return out;
    }
    if (!(plan.measured->on == on)) {
        out.message = "ignoring " + where + ": it was measured on " + plan.measured->on.describe() + "; this run is " +
                      on.describe();
        return out;
    }
    out.message = "using " + where + " (measured on " + on.describe() + ")";
    out.plan = std::move(plan);
    return out;
}

// Writes the plan (which must carry its measurement) where find_tuned_plan
// looks for it, through a temporary file so that a reader never sees half
// of it. Returns the path; Error naming it when it cannot be written.
inline std::filesystem::path store_tuned_plan(const std::filesystem::path& dir, const OpGraph& graph, const Plan& plan) {
    if (!plan.measured) throw PlanError("store_tuned_plan: the plan records no measurement");
    const std::filesystem::path path = tune_cache_file(dir, plan.graph_fingerprint, plan.measured->on);
    save_plan(plan, graph, path.string(), "tuning cache");
    return path;
}

}  // namespace braid
