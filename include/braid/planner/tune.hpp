// Tuning: the GPU, not the model, picks among the planner's best plans.
// Each candidate is timed by a TimingSource (captured CUDA graphs on a GPU;
// the simulator with noise, or host threads, in tests), interleaved in
// rounds (A B C, B C A, ...) so that drift hits every candidate alike. The
// model's favourite is kept unless another candidate is faster beyond the
// noise: the median of its per-round time ratios to the favourite, with a
// distribution-free interval (95 % jointly over the timed candidates; 99.9 % for a
// decision taken during the rounds), must lie wholly below 1 - equivalence. Candidates that
// are surely slower than the leader, or surely as fast, stop being timed,
// which spends the budget on the ones still in doubt.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <limits>
#include <numbers>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "braid/error.hpp"
#include "braid/graph/op_graph.hpp"
#include "braid/plan/plan.hpp"
#include "braid/plan/validate.hpp"

namespace braid {

struct TuneCandidate {
    std::string name;       // for people: "braid #1 (4 main + 1 side streams, ...)", "nimble baseline"
    Plan plan;
    double model_ns = 0.0;  // what the model predicted (0: no prediction)
};

// Where candidate times come from. prepare() is called once with every
// candidate before any is timed (capture graphs, build executors) and says,
// per candidate, why it cannot be timed ("" when it can; an empty vector
// when all can): a GPU with no room for one more candidate's trainer
// declines it rather than failing the whole tuning. Sources prepare in
// the candidates' order, so the first (the model's choice, as
// tune_candidates orders them) has the most room. measure_ns(i) runs
// candidate i once and returns its iteration time; now_ns() is the clock
// the time budget is counted on (a real clock on a device, a virtual one
// in a simulation, so that tests are deterministic).
class TimingSource {
public:
    virtual ~TimingSource() = default;
    virtual std::vector<std::string> prepare(std::span<const TuneCandidate> candidates) = 0;
    virtual double measure_ns(std::size_t candidate) = 0;
    virtual double now_ns() = 0;
};

struct TuneOptions {
    std::size_t favourite = 0;     // the model's choice: kept unless beaten beyond the noise
    std::uint32_t warmup = 1;      // untimed runs of each candidate before the rounds
    // Rounds before any candidate is dropped or the tuning stops early; the
    // 99.9 % intervals those decisions use need 15 rounds in any case.
    std::uint32_t min_rounds = 7;
    std::uint32_t max_rounds = 1000;  // the budget usually ends it first
    // On the source's clock, prepare() and warm-up included; no round starts
    // that would overrun it if it took as long as the slowest round so far
    // (or the models' times before any).
    double budget_s = 60.0;
    // Candidates whose time is surely within this fraction of the leader's
    // stop being timed: telling them apart would gain less than this.
    double equivalence = 0.0025;
};

// One candidate as measured.
struct CandidateTiming {
    std::string name;
    double model_ns = 0.0;
    std::vector<double> samples_ns;     // in the order measured, warm-up excluded
    double median_ns = 0.0;
    double spread_pct = 0.0;            // interquartile range over the median
    // Median of the per-round ratios of its time to the favourite's, and the
    // interval of that median, 95 % jointly over the timed candidates (1, 1, 1 for
    // the favourite itself).
    double ratio = 1.0, ratio_low = 1.0, ratio_high = 1.0;
    // Rounds after which it stopped being timed: surely slower than the
    // leader, or surely within TuneOptions::equivalence of it.
    std::optional<std::uint32_t> dropped_after;
    // Why the source could not prepare it ("" when it did); a declined
    // candidate has no samples and cannot win.
    std::string declined;
};

struct TuneResult {
    std::vector<CandidateTiming> timings;  // in the candidates' order
    std::size_t favourite = 0;
    std::size_t winner = 0;     // the favourite, or the candidate faster than it beyond the noise with the lowest ratio
    std::size_t fastest = 0;    // lowest median, significant or not
    std::uint32_t rounds = 0;
    double elapsed_s = 0.0;     // on the source's clock, prepare() included
    double prepare_s = 0.0;     // of which prepare() and the warm-up runs, before the first round
    std::string stopped_because;

    // Enough rounds that the final intervals could exclude a tie, and some
    // candidate besides the favourite timed; when false the favourite was
    // kept for want of measurements, not on them.
    bool conclusive = false;

    bool switched() const noexcept { return winner != favourite; }
    const CandidateTiming& chosen() const { return timings.at(winner); }
};

namespace detail_tune {

inline std::string number(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
}

inline double quantile(std::vector<double> v, double q) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    const double pos = q * static_cast<double>(v.size() - 1);
    const std::size_t lo = static_cast<std::size_t>(std::floor(pos));
    const std::size_t hi = std::min(v.size() - 1, lo + 1);
    return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

struct MedianInterval {
    double median = 1.0, low = 1.0, high = 1.0;
};

// z of the two-sided 95 % interval the final choice uses, and of the 99.9 %
// one that decisions during the rounds use: they are taken after every
// round, and looking often at a 95 % interval would find differences that
// are not there.
inline constexpr double z_final = 1.96;
inline constexpr double z_during = 3.29;

// The two-sided z for 95 % over `comparisons` intervals at once
// (Bonferroni): the final choice compares every candidate with the
// favourite, and with many candidates one of them would beat a tie by luck.
inline double z_for_comparisons(std::size_t comparisons) {
    const double alpha = 0.05 / static_cast<double>(std::max<std::size_t>(1, comparisons));
    double lo = 0.0, hi = 10.0;  // erfc(z / sqrt 2) falls from 1 to ~0 on [0, 10]
    for (int i = 0; i < 60; ++i) {
        const double mid = 0.5 * (lo + hi);
        (std::erfc(mid / std::numbers::sqrt2) > alpha ? lo : hi) = mid;
    }
    return hi;
}

// The median and its distribution-free confidence interval: order
// statistics j = n/2 - z sqrt(n)/2 and n - j + 1 (the normal approximation
// to the binomial). No conclusion (0, inf) while j < 1, that is from fewer
// than 8 samples at 95 % and 15 at 99.9 %.
inline MedianInterval median_interval(std::vector<double> v, double z = z_final) {
    MedianInterval m;
    if (v.empty()) return m;
    std::sort(v.begin(), v.end());
    const double n = static_cast<double>(v.size());
    const double j = std::floor(n / 2.0 - z / 2.0 * std::sqrt(n));
    m.median = quantile(v, 0.5);
    if (j < 1.0) {
        m.low = 0.0;
        m.high = std::numeric_limits<double>::infinity();
        return m;
    }
    m.low = v[static_cast<std::size_t>(j) - 1];
    m.high = v[static_cast<std::size_t>(n - j)];
    return m;
}

// Per-round ratios of a's times to b's, over the rounds both were timed in.
inline std::vector<double> paired_ratios(const CandidateTiming& a, const CandidateTiming& b) {
    const std::size_t n = std::min(a.samples_ns.size(), b.samples_ns.size());
    std::vector<double> r;
    r.reserve(n);
    for (std::size_t i = 0; i < n; ++i)
        if (b.samples_ns[i] > 0.0) r.push_back(a.samples_ns[i] / b.samples_ns[i]);
    return r;
}

}  // namespace detail_tune

// Times every candidate on `source` and picks one. Every candidate must be a
// valid plan for `graph` (PlanError names the first that is not), so the
// result is always a plan that runs. A failing measurement is rethrown as an
// Error naming the candidate; so is a declined favourite (there is nothing
// to compare the others with). Other declined candidates are reported and
// not timed.
inline TuneResult tune(const OpGraph& graph, std::span<const TuneCandidate> candidates, TimingSource& source,
                       const TuneOptions& options = {}) {
    using detail_tune::median_interval;
    using detail_tune::paired_ratios;
    if (candidates.empty()) throw PlanError("tune: no candidate plans");
    if (options.favourite >= candidates.size())
        throw PlanError("tune: favourite " + std::to_string(options.favourite) + " is not one of the " +
                        std::to_string(candidates.size()) + " candidates");
    if (options.max_rounds == 0) throw PlanError("tune: max_rounds must be at least 1");
    for (const TuneCandidate& c : candidates)
        if (std::string problem = first_violation(c.plan, graph); !problem.empty())
            throw PlanError("tune: candidate '" + c.name + "' is not a valid plan: " + problem);

    const std::size_t n = candidates.size();
    TuneResult out;
    out.favourite = options.favourite;
    out.winner = options.favourite;
    out.timings.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
        out.timings[i].name = candidates[i].name;
        out.timings[i].model_ns = candidates[i].model_ns;
    }
    const double budget_ns = options.budget_s * 1e9;
    const double t0 = source.now_ns();
    const auto elapsed_ns = [&] { return source.now_ns() - t0; };
    const auto measure = [&](std::size_t i) {
        try {
            return source.measure_ns(i);
        } catch (const std::exception& e) {
            std::throw_with_nested(Error("tuning: candidate '" + candidates[i].name + "' failed: " + e.what()));
        }
    };

    std::vector<std::string> declined = source.prepare(candidates);
    if (declined.empty()) declined.resize(n);
    if (declined.size() != n)
        throw Error("tuning: the timing source answered for " + std::to_string(declined.size()) + " of " +
                    std::to_string(n) + " candidates");
    std::vector<bool> alive(n, true);
    std::size_t timed = 0;  // candidates the source prepared
    for (std::size_t i = 0; i < n; ++i) {
        out.timings[i].declined = declined[i];
        alive[i] = declined[i].empty();
        timed += alive[i] ? 1 : 0;
    }
    if (!alive[options.favourite])
        throw Error("tuning: the model's choice '" + candidates[options.favourite].name +
                    "' could not be prepared: " + declined[options.favourite]);
    for (std::uint32_t w = 0; w < options.warmup; ++w)
        for (std::size_t i = 0; i < n; ++i)
            if (alive[i]) (void)measure(i);
    out.prepare_s = elapsed_ns() / 1e9;

    // What one round may cost: the slowest so far, or the models' guess before any.
    double round_ns = 0.0;
    for (std::size_t i = 0; i < n; ++i)
        if (alive[i]) round_ns += candidates[i].model_ns;
    const auto leader = [&] {
        std::size_t best = options.favourite;
        for (std::size_t i = 0; i < n; ++i)
            if (alive[i] && out.timings[i].samples_ns.size() == out.timings[best].samples_ns.size() &&
                detail_tune::quantile(out.timings[i].samples_ns, 0.5) <
                    detail_tune::quantile(out.timings[best].samples_ns, 0.5))
                best = i;
        return best;
    };

    out.stopped_because = "max_rounds (" + std::to_string(options.max_rounds) + ") reached";
    for (std::uint32_t round = 0; round < options.max_rounds; ++round) {
        if (elapsed_ns() + round_ns > budget_ns) {
            out.stopped_because = "the next round would overrun the " + detail_tune::number(options.budget_s) + " s budget";
            break;
        }
        const double round_start = source.now_ns();
        // Rotated order: no candidate always runs first, or right after the same one.
        for (std::size_t k = 0; k < n; ++k) {
            const std::size_t i = (k + round) % n;
            if (alive[i]) out.timings[i].samples_ns.push_back(measure(i));
        }
        round_ns = std::max(out.rounds == 0 ? 0.0 : round_ns, source.now_ns() - round_start);
        out.rounds = round + 1;
        if (out.rounds < options.min_rounds) continue;

        // Drop what is surely slower than the leader; stop once the choice is clear.
        const std::size_t lead = leader();
        std::size_t others = 0;
        for (std::size_t i = 0; i < n; ++i) {
            if (!alive[i] || i == lead || i == options.favourite) continue;
            const auto r = median_interval(paired_ratios(out.timings[i], out.timings[lead]), detail_tune::z_during);
            const bool equivalent = r.low >= 1.0 - options.equivalence && r.high <= 1.0 + options.equivalence;
            if (r.low > 1.0 || equivalent) {
                alive[i] = false;
                out.timings[i].dropped_after = out.rounds;
            } else {
                ++others;
            }
        }
        if (others == 0) {
            if (timed == 1) {
                out.stopped_because = "no other candidate could be prepared";
                break;
            }
            if (lead == options.favourite) {
                out.stopped_because = "every other candidate is slower than the favourite, or as fast within " +
                                      detail_tune::number(options.equivalence * 100.0) + " %, beyond the noise";
                break;
            }
            const auto r =
                median_interval(paired_ratios(out.timings[lead], out.timings[options.favourite]), detail_tune::z_during);
            // The final choice's own test, with the stricter z: a stop here is a switch there.
            if (r.high < 1.0 - options.equivalence) {
                out.stopped_because = "one candidate is left, faster than the favourite beyond the noise";
                break;
            }
            if (r.low >= 1.0 - options.equivalence) {
                out.stopped_because =
                    "the leader is surely within " + detail_tune::number(options.equivalence * 100.0) + " % of the favourite";
                break;
            }
        }
    }

    const CandidateTiming& fav = out.timings[options.favourite];
    const double z = detail_tune::z_for_comparisons(timed - 1);
    // With every other candidate declined nothing was compared: not conclusive.
    out.conclusive =
        out.rounds > 0 &&
        (n == 1 ||
         (timed > 1 && std::floor(out.rounds / 2.0 - z / 2.0 * std::sqrt(static_cast<double>(out.rounds))) >= 1.0));
    for (std::size_t i = 0; i < n; ++i) {
        CandidateTiming& t = out.timings[i];
        if (t.samples_ns.empty()) continue;
        t.median_ns = detail_tune::quantile(t.samples_ns, 0.5);
        t.spread_pct = t.median_ns > 0.0 ? 100.0 * (detail_tune::quantile(t.samples_ns, 0.75) -
                                                    detail_tune::quantile(t.samples_ns, 0.25)) / t.median_ns
                                         : 0.0;
        if (i != options.favourite) {
            const auto r = median_interval(paired_ratios(t, fav), z);
            t.ratio = r.median;
            t.ratio_low = r.low;
            t.ratio_high = r.high;
        }
    }
    for (std::size_t i = 0; i < n; ++i) {
        const CandidateTiming& t = out.timings[i];
        if (t.samples_ns.empty()) continue;
        if (out.timings[out.fastest].samples_ns.empty() || t.median_ns < out.timings[out.fastest].median_ns) out.fastest = i;
        // Faster than the favourite by more than `equivalence`, beyond the
        // noise, and the fastest such by the paired ratio, which drift
        // between rounds does not bend.
        if (i != options.favourite && t.ratio_high < 1.0 - options.equivalence &&
            (out.winner == options.favourite || t.ratio < out.timings[out.winner].ratio))
            out.winner = i;
    }
    out.elapsed_s = elapsed_ns() / 1e9;
    return out;
}

// The winner as a plan that records where and what tuning measured.
inline Plan measured_plan(std::span<const TuneCandidate> candidates, const TuneResult& result, const MeasuredOn& on) {
    if (result.timings.size() != candidates.size())
        throw PlanError("measured_plan: " + std::to_string(result.timings.size()) + " timings for " +
                        std::to_string(candidates.size()) + " candidates");
    Plan plan = candidates[result.winner].plan;
    // No round fitted the budget: nothing was measured, so nothing is recorded.
    if (result.rounds == 0) return plan;
    PlanMeasurement m;
    m.on = on;
    m.median_ms = result.chosen().median_ns / 1e6;
    m.spread_pct = result.chosen().spread_pct;
    m.rounds = result.rounds;
    m.switched = result.switched();
    for (const CandidateTiming& t : result.timings)
        m.candidates.push_back(MeasuredCandidate{t.name, t.median_ns / 1e6, t.spread_pct,
                                                 static_cast<std::uint32_t>(t.samples_ns.size()), t.declined});
    plan.measured = std::move(m);
    return plan;
}

}  // namespace braid
