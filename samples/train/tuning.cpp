#include "train/tuning.hpp"

#include <fmt/format.h>

#include "braid/model/estimate.hpp"
#include "braid/planner/strategies/braid.hpp"
#include "braid/planner/tune_cache.hpp"
#include "braid/planner/tune_candidates.hpp"

namespace braid::samples {

TuningOutcome tune_training_plan(const TrainingGraph& tg, const braid::DeviceSpec& device, const braid::MeasuredOn& on,
                                 braid::TimingSource& source, const TuningRequest& request,
                                 const std::function<void(const std::string&)>& log) {
    TuningOutcome out;
    if (!request.cache_dir.empty()) {
        braid::CachedPlan cached = braid::find_tuned_plan(request.cache_dir, tg.graph, on);
        if (!cached.message.empty()) log(cached.message);
        if (cached.plan) {
            out.plan = std::move(*cached.plan);
            out.from_cache = true;
            return out;
        }
    }
    const PlanningModel model = planning_model(tg, device, request.calibration, request.mode, request.engines,
                                               request.eager_hardware_queues);
    braid::strategy::BraidOptions bo;
    bo.max_streams = request.max_streams;
    bo.mode = request.mode;
    bo.sim = model.sim;
    bo.complete_top = request.top;
    bo.weigh_ios = true;  // a few seconds of search against a minute of measuring
    const braid::strategy::BraidResult planned = braid::strategy::braid_plan(tg.graph, device, model.costs, bo);
    out.candidates = braid::tune_candidates(planned, request.top);
    log(fmt::format("measuring {} candidate plans on {} (budget {:g} s)", out.candidates.size(), on.describe(),
                    request.budget_s));
    braid::TuneOptions to;
    to.budget_s = request.budget_s;
    out.result = braid::tune(tg.graph, out.candidates, source, to);
    const braid::TuneResult& r = *out.result;
    const braid::CandidateTiming& fav = r.timings[r.favourite];
    std::size_t declined = 0;
    for (const braid::CandidateTiming& t : r.timings)
        if (!t.declined.empty()) {
            ++declined;
            log(fmt::format("not measured: '{}': {}", t.name, t.declined));
        }
    if (declined > 0 && declined + 1 == r.timings.size())
        log(fmt::format("no other candidate could be prepared: keeping the model's choice '{}' ({:.3f} ms), "
                        "not caching it",
                        fav.name, fav.median_ns / 1e6));
    else if (!r.conclusive)
        log(fmt::format("only {} rounds fitted in the budget, too few to tell the candidates apart: keeping the "
                        "model's choice '{}', not caching it (give --tune-budget more)",
                        r.rounds, fav.name));
    else if (r.switched())
        log(fmt::format("picked '{}': {:.3f} ms, {:.1f} % faster than the model's choice ({:.3f} ms)", r.chosen().name,
                        r.chosen().median_ns / 1e6, 100.0 * (1.0 - r.chosen().ratio), fav.median_ns / 1e6));
    else
        log(fmt::format("kept the model's choice '{}': {:.3f} ms; nothing was faster beyond the noise", fav.name,
                        fav.median_ns / 1e6));
    log(fmt::format("{} rounds in {:.1f} s ({:.1f} s of it preparing the candidates); stopped: {}", r.rounds,
                    r.elapsed_s, r.prepare_s, r.stopped_because));
    out.plan = braid::measured_plan(out.candidates, r, on);
    // A cache that cannot be written costs the next run a tuning, not this run its training.
    if (!request.cache_dir.empty() && r.conclusive && declined > 0)
        log(fmt::format("not cached: {} candidates were declined, and what fits depends on the memory free now",
                        declined));
    else if (!request.cache_dir.empty() && r.conclusive) try {
            log("stored as " + braid::store_tuned_plan(request.cache_dir, tg.graph, out.plan).string());
        } catch (const braid::Error& e) {
            log(std::string("not cached: ") + e.what());
        }
    return out;
}

std::string format_tune_report(const braid::TuneResult& r) {
    std::string s = fmt::format("  {:<3} {:>10} {:>8} {:>8} {:>19} {:>7}  {}\n", "", "median ms", "spread", "vs model",
                                "95 % interval", "samples", "candidate");
    for (std::size_t i = 0; i < r.timings.size(); ++i) {
        const braid::CandidateTiming& t = r.timings[i];
        const char* mark = i == r.winner ? "=>" : i == r.favourite ? "m" : "";
        std::string note;
        if (t.dropped_after) note = fmt::format(" (dropped after round {})", *t.dropped_after);
        if (!t.declined.empty()) {
            s += fmt::format("  {:<3} {:>10} {:>8} {:>8} {:>19} {:>7}  {} (declined, not measured)\n", mark, "-", "-",
                             "-", "-", 0, t.name);
            continue;
        }
        const std::string interval =
            i == r.favourite ? std::string("-") : t.ratio_high > 1e9 ? std::string("too few")
                                                                     : fmt::format("[{:.4f}, {:.4f}]", t.ratio_low, t.ratio_high);
        s += fmt::format("  {:<3} {:>10.3f} {:>7.2f}% {:>8.4f} {:>19} {:>7}  {}{}\n", mark, t.median_ns / 1e6, t.spread_pct,
                         t.ratio, interval, t.samples_ns.size(), t.name, note);
    }
    return s;
}

}  // namespace braid::samples
