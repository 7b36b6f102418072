// Fitting a Calibration to what a GPU measured, and judging one.
//
// Two fits, each on data a user with a GPU can produce:
//   - estimates: per kernel class, how estimated kernel times map onto the
//     profiled ones (op by op, from profiles whose networks braid can also
//     estimate). Per class a floor, a size exponent and a scale, and how
//     much of the GPU the class's kernels hold.
//   - the simulator and the profile-to-iteration scale: from measured
//     iterations of plans (rows), by a staged search that simulates every row
//     for each candidate constant. Serial rows fix the kernel time scale and
//     dispatch gap, concurrent rows the co-run slowdown and event latency,
//     eager rows the extra dispatch gap of eager launches and how the host's
//     cost per launch in the profiled run (profiled_launch_ns) maps onto a
//     plain run.
// The objective is the mean of |log(predicted / measured)|: one odd row
// cannot drag every constant after it; the report names the worst.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "braid/error.hpp"
#include "braid/graph/op_graph.hpp"
#include "braid/model/conv_engine.hpp"
#include "braid/model/cost.hpp"
#include "braid/model/device_spec.hpp"
#include "braid/model/estimate.hpp"
#include "braid/plan/compiled_plan.hpp"
#include "braid/plan/plan.hpp"
#include "braid/plan/sim_program.hpp"
#include "braid/planner/calibration.hpp"
#include "braid/planner/strategies/serial.hpp"
#include "braid/sim/simulator.hpp"

namespace braid {

// One network as profiled: its graph, the profiled costs, and (when braid
// can estimate the network) the estimates of every op.
struct ProfiledNet {
    std::string name;  // "googlenet-noaux-b32"; rows name it
    std::string group;  // the network without its size ("googlenet"): held-out fits split on it
    const OpGraph* graph = nullptr;
    DeviceSpec device;
    OpCosts profiled;                                  // costs_from_profile
    std::optional<std::vector<OpEstimate>> estimates;  // per op, when the network is known
    // The profiled iteration itself (eager, serial, under CUPTI): first
    // activity to last, the median over the measured iterations; 0: unknown.
    double profiled_iteration_ns = 0.0;
    // False for a durations-only profile: its kernels' launch shapes are
    // stand-ins (one full wave per op), so they say nothing of GPU fill.
    bool launch_shapes = true;
};

// The host cost per launch that makes the profiled run take as long as it
// did: the profile's serial plan simulated eagerly, with the profiled kernel
// times and `params` (its dispatch gap; no eager extra, no per-body cost:
// the launch cost stands for all of the host's work), found by bisection
// (the makespan grows with it). Under CUPTI every launch costs the host
// more; a calibration's cupti_host_scale maps this onto a plain run. 0 when
// the profile has no iteration time, or the GPU alone already takes longer,
// or the profile timed every body on the host (OpCost::host_ns: measured
// per op, those stand in for it).
inline double profiled_launch_ns(const OpGraph& graph, const DeviceSpec& dev, const OpCosts& profiled,
                                 double profiled_iteration_ns, sim::Params params) {
    if (!(profiled_iteration_ns > 0.0)) return 0.0;
    if (std::all_of(profiled.begin(), profiled.end(),
                    [](const OpCost& op) { return op.kernels.empty() || op.host_ns >= 0.0; }))
        return 0.0;
    const Plan serial = strategy::serial(graph, dev.key);
    sim::Program program = to_sim_program(compile(serial, graph), graph, dev, profiled, LaunchMode::eager);
    const std::size_t launches = program.kernels.size();
    params.op_host_ns = 0.0;
    params.eager_dispatch_extra_ns = 0.0;
    auto makespan = [&](double launch_ns) {
        params.launch_latency_ns = launch_ns;
        return sim::simulate(dev, program, params).makespan_ns;
    };
    // No launch takes longer than the simulator accepts: an iteration longer
    // than even that explains gets the longest, not an error about sim::Params.
    double lo = 0.0, hi = std::min(2.0 * profiled_iteration_ns / static_cast<double>(std::max<std::size_t>(launches, 1)),
                                   sim::most_latency_ns);
    if (makespan(lo) >= profiled_iteration_ns) return 0.0;
    if (makespan(hi) < profiled_iteration_ns) return hi;
    for (int i = 0; i < 40; ++i) {
        const double mid = (lo + hi) / 2.0;
        (makespan(mid) < profiled_iteration_ns ? lo : hi) = mid;
    }
    return (lo + hi) / 2.0;
}

// One measured iteration time of a plan on a profiled network.
struct CalibrationRow {
    std::string label;  // "nimble"
    std::size_t net = 0;  // index into the nets
    Plan plan;
    LaunchMode mode = LaunchMode::graph;
    std::vector<double> measured_ms;  // every repeat

    double measured_median_ms() const {
        std::vector<double> v = measured_ms;
        std::sort(v.begin(), v.end());
        const std::size_t n = v.size();
        if (n == 0) return 0.0;
        return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
    }
};

enum class CostSource : std::uint8_t { profile, estimate };

struct RowPrediction {
    std::size_t row = 0;
    double predicted_ms = 0.0;
    double measured_ms = 0.0;  // median of the repeats
    double error_pct() const { return 100.0 * (predicted_ms / measured_ms - 1.0); }
};

namespace detail {

// A row ready to simulate: the program with its kernels' base durations, so
// a kernel time scale is a multiplication, not a rebuild.
struct PreparedRow {
    sim::Program program;
    std::vector<double> base_ns;
    DeviceSpec device;
    LaunchMode mode = LaunchMode::graph;
    double measured_ms = 0.0;
    double profiled_launch_ns = 0.0;  // the net's, when its profile says (eager rows from profiles)
    bool from_profile = false;        // profiled costs: measured host times scale onto a plain run
};

inline PreparedRow prepare_row(const CalibrationRow& row, const ProfiledNet& net, const OpCosts& costs) {
    PreparedRow p;
    p.program = to_sim_program(compile(row.plan, *net.graph), *net.graph, net.device, costs, row.mode);
    for (const sim::Kernel& k : p.program.kernels) p.base_ns.push_back(k.cost.duration_ns);
    p.device = net.device;
    p.mode = row.mode;
    p.measured_ms = row.measured_median_ms();
    return p;
}

inline double simulate_row(PreparedRow& row, const Calibration& c) {
    const double s = c.kernel_time_scale(row.mode);
    for (std::size_t k = 0; k < row.base_ns.size(); ++k) row.program.kernels[k].cost.duration_ns = row.base_ns[k] * s;
    if (row.from_profile)
        return sim::simulate(row.device, row.program, c.sim_for_profile(row.profiled_launch_ns)).makespan_ns / 1e6;
    return sim::simulate(row.device, row.program, c.sim).makespan_ns / 1e6;
}

// Predictions of `rows` (indices into `prepared`) under `c`, on up to four threads.
inline std::vector<double> simulate_rows(std::vector<PreparedRow>& prepared, std::span<const std::size_t> rows,
                                         const Calibration& c) {
    std::vector<double> out(rows.size());
    const std::size_t workers = std::min<std::size_t>(rows.size(), std::max(1u, std::min(4u, std::thread::hardware_concurrency())));
    std::vector<std::thread> threads;
    std::exception_ptr failure;
    std::mutex failure_mutex;
    for (std::size_t w = 1; w < workers; ++w)
        threads.emplace_back([&, w] {
            try {
                for (std::size_t i = w; i < rows.size(); i += workers) out[i] = simulate_row(prepared[rows[i]], c);
            } catch (...) {
                std::lock_guard<std::mutex> lock(failure_mutex);
                if (!failure) failure = std::current_exception();
            }
        });
    try {
        for (std::size_t i = 0; i < rows.size(); i += workers) out[i] = simulate_row(prepared[rows[i]], c);
    } catch (...) {
        std::lock_guard<std::mutex> lock(failure_mutex);
        if (!failure) failure = std::current_exception();
    }
    for (std::thread& t : threads) t.join();
    if (failure) std::rethrow_exception(failure);
    return out;
}

// The fit's objective: the mean of |log(predicted / measured)|. Absolute,
// not squared, so that one row the model cannot explain pulls no harder
// than any other (the constants settle where most rows agree).
inline double mean_abs_log_error(std::span<const double> predicted, std::span<const double> measured) {
    double sum = 0.0;
    for (std::size_t i = 0; i < predicted.size(); ++i) sum += std::abs(std::log(predicted[i] / measured[i]));
    return predicted.empty() ? 0.0 : sum / static_cast<double>(predicted.size());
}

// One constant the search may move, within [lo, hi].
struct Dimension {
    const char* name;
    std::function<double&(Calibration&)> field;
    double lo, hi;
};

// Per dimension in turn: `points` evenly spaced values across its bracket,
// keep the best, narrow the bracket around it; `rounds` times, `sweeps`
// passes over all dimensions. Deterministic: ties keep the earlier value.
inline void search(std::vector<PreparedRow>& prepared, std::span<const std::size_t> rows, Calibration& c,
                   std::span<const Dimension> dims, int sweeps, int rounds, int points) {
    if (rows.empty() || dims.empty()) return;
    if (points < 2) throw ModelError("calibration search: needs at least 2 points per dimension, got " + std::to_string(points));
    std::vector<double> measured;
    for (std::size_t r : rows) measured.push_back(prepared[r].measured_ms);
    auto objective = [&](const Calibration& x) { return mean_abs_log_error(simulate_rows(prepared, rows, x), measured); };
    double best = objective(c);
    for (int sweep = 0; sweep < sweeps; ++sweep)
        for (const Dimension& d : dims) {
            double lo = d.lo, hi = d.hi;
            for (int round = 0; round < rounds; ++round) {
                double best_x = d.field(c);
                for (int i = 0; i < points; ++i) {
                    Calibration t = c;
                    d.field(t) = lo + (hi - lo) * i / (points - 1);
                    const double o = objective(t);
                    if (o < best) {
                        best = o;
                        best_x = d.field(t);
                    }
                }
                d.field(c) = best_x;
                const double half = (hi - lo) / (points - 1);
                lo = std::max(d.lo, best_x - half);
                hi = std::min(d.hi, best_x + half);
            }
        }
}

}  // namespace detail

// ------------------------------------------------------------- estimates

namespace detail {

// Estimated kernels [first, last) of an op and the profiled time they share.
struct KernelGroup {
    std::size_t first = 0, last = 0;
    double measured_ns = 0.0;
};

// Which profiled time each estimated kernel of an op answers for. An op
// that calls a library (its estimates hold one run of convolution or GEMM
// kernels and the helpers estimated with them, a split-K reduction)
// launches the library's kernels, unlisted helpers included (layout
// transforms: more than estimated), between its own kernels, one launch
// each: the own kernels before that run take the first profiled kernels'
// times one to one, those after it the last ones', and the run shares what
// lies between (at least one kernel). Without such a run, with too few
// profiled kernels for that, or per-image launches, the op's kernels share
// its whole time. Sharing a convolution op's time by predicted times alone
// would hand the bias kernel beside a slow convolution part of the
// convolution's time; matching an estimated split-K reduction to a
// profiled kernel as if the trainer launched it would hand it the time of
// whatever the library launched last.
inline std::vector<KernelGroup> attribute_kernels(std::span<const KernelEstimate> estimated, const OpCost& profiled) {
    const std::size_t m = estimated.size(), n = profiled.kernels.size();
    const std::vector<KernelGroup> whole{{0, m, profiled.duration_ns()}};
    auto in_library = [](const KernelEstimate& e) { return library_launched(e.kind) || e.library_helper; };
    std::size_t first = m, last = 0;  // the library run [first, last)
    for (std::size_t k = 0; k < m; ++k)
        if (in_library(estimated[k])) {
            first = std::min(first, k);
            last = k + 1;
        }
    const std::size_t tail = m - last;  // own kernels after the run, matched to the last profiled ones
    if (first == m || n < first + tail + 1 || profiled.launches_per_image != 0) return whole;
    for (std::size_t k = first; k < last; ++k)
        if (!in_library(estimated[k])) return whole;
    std::vector<KernelGroup> out;
    for (std::size_t k = 0; k < first; ++k) out.push_back({k, k + 1, profiled.kernels[k].duration_ns});
    double run = 0.0;
    for (std::size_t k = first; k < n - tail; ++k) run += profiled.kernels[k].duration_ns;
    out.push_back({first, last, run});
    for (std::size_t k = last; k < m; ++k) out.push_back({k, k + 1, profiled.kernels[n - (m - k)].duration_ns});
    return out;
}

}  // namespace detail

// Names the engine family of each op's library-launched kernels (not
// their helpers) from `families`, indexed by op: the engine the backend
// chose for the op's convolution, `other` where it does not know. The
// trainer's own kernels stay `other`.
inline void engine_families_from_choices(std::vector<OpEstimate>& estimates,
                                         std::span<const ConvEngineFamily> families) {
    if (estimates.size() != families.size())
        throw ModelError("engine_families_from_choices: " + std::to_string(estimates.size()) + " op estimates but " +
                         std::to_string(families.size()) + " engine choices");
    for (std::size_t i = 0; i < estimates.size(); ++i)
        for (KernelEstimate& k : estimates[i].kernels)
            k.engine = library_launched(k.kind) && !k.library_helper ? families[i] : ConvEngineFamily::other;
}

// Names the engine family each library-launched kernel of `estimates` ran
// on, from the profile of the same graph (op_engine_family of each op's
// profiled kernels): what the library chose, as a backend that made the
// choice knows it before it runs. Helpers and the trainer's own kernels
// stay `other`.
inline void engine_families_from_profile(std::vector<OpEstimate>& estimates, const OpCosts& profiled) {
    if (estimates.size() != profiled.size())
        throw ModelError("engine_families_from_profile: " + std::to_string(estimates.size()) + " op estimates but " +
                         std::to_string(profiled.size()) + " profiled ops");
    std::vector<ConvEngineFamily> families(profiled.size());
    std::transform(profiled.begin(), profiled.end(), families.begin(),
                   [](const OpCost& op) { return op_engine_family(op); });
    engine_families_from_choices(estimates, families);
}

// The same estimates with no engine family named: what a planner without
// the backend's choices estimates.
inline std::vector<OpEstimate> without_engine_families(std::vector<OpEstimate> estimates) {
    for (OpEstimate& op : estimates)
        for (KernelEstimate& k : op.kernels) k.engine = ConvEngineFamily::other;
    return estimates;
}

struct EstimateFitOptions {
    std::vector<double> floors_ns{0, 250, 500, 750, 1000, 1500, 2000, 2500, 3000, 4000, 6000, 8000, 12000};
    std::vector<double> exponents{0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0, 1.05, 1.1};
    double reference_ns = 10000.0;
    int rounds = 6;
    // A class's kernels on one engine family get a fit of their own when
    // the profiles hold at least this many of them.
    std::size_t min_engine_kernels = 8;
};

// Fits calibration.estimate from the nets that carry estimates, per kernel
// class: each op's measured time is attributed to its estimated kernels
// (detail::attribute_kernels: own kernels beside a library call take their
// own profiled times; a library's estimated helpers take their roofline
// time) and shared within a group in proportion to their predicted times;
// per class, the (floor, exponent) pair on a grid whose kernels' times
// match their shares best in log terms, with the scale that makes the class
// add up to its share exactly. The same again per (class, engine family)
// for kernels whose estimates name their family, where there are enough of
// them. Repeated, since the shares follow the fit. Classes no net
// exercises stay unfitted (their fallback applies).
inline EstimateCalibration fit_estimates(std::span<const ProfiledNet> nets, const EstimateFitOptions& options = {}) {
    // A library's helpers (split-K reductions) are charged their
    // uncalibrated estimate, as estimate_kernel charges them, and teach no
    // class: the library's time stays with its main kernels.
    struct FitKernel {
        std::size_t cls;
        ConvEngineFamily engine;
        double roofline;
    };
    struct FitOp {
        double measured;  // less the helpers' time
        std::vector<FitKernel> kernels;
    };
    std::vector<FitOp> ops;
    std::vector<std::size_t> fitted_nets;
    for (std::size_t n = 0; n < nets.size(); ++n) {
        const ProfiledNet& net = nets[n];
        if (!net.estimates) continue;
        if (net.estimates->size() != net.profiled.size())
            throw ModelError("fit_estimates: net '" + net.name + "' has " + std::to_string(net.estimates->size()) +
                             " op estimates but " + std::to_string(net.profiled.size()) + " profiled ops");
        fitted_nets.push_back(n);
        for (std::size_t i = 0; i < net.profiled.size(); ++i)
            for (const detail::KernelGroup& g : detail::attribute_kernels((*net.estimates)[i].kernels, net.profiled[i])) {
                double helpers = 0.0;
                std::vector<FitKernel> kernels;
                for (std::size_t k = g.first; k < g.last; ++k) {
                    const KernelEstimate& e = (*net.estimates)[i].kernels[k];
                    if (e.library_helper)
                        helpers += estimate_kernel(net.device, e).duration_ns;
                    else
                        kernels.push_back({index_of(e.kind), e.engine, roofline_ns(net.device, e)});
                }
                // At least half a run is its main kernels', whatever the helpers' estimate says.
                FitOp op{std::max(g.measured_ns - helpers, 0.5 * g.measured_ns), std::move(kernels)};
                if (op.measured > 0.0 && !op.kernels.empty()) ops.push_back(std::move(op));
            }
    }
    if (ops.empty()) throw ModelError("fit_estimates: no profiled net carries estimates to fit");

    EstimateCalibration fit;
    fit.reference_ns = options.reference_ns;
    constexpr std::size_t n = kernel_class_count;
    for (const FitOp& op : ops)
        for (const FitKernel& k : op.kernels) {
            fit.classes[k.cls].scale = 1.0;
            fit.classes[k.cls].size_exponent = 0.7;
        }
    const double ref = fit.reference_ns;
    // The fit a kernel's share follows: its engine's where fitted, else its class's.
    auto time_of = [&](const FitKernel& k) {
        const KernelClassFit& e = fit.engines[k.cls][index_of(k.engine)];
        return std::max(1.0, (e.fitted() ? e : fit.classes[k.cls]).time_ns(k.roofline, ref));
    };
    // The grid point (and its scale) whose times match the (roofline,
    // share) entries best in log terms; `out` keeps its other fields.
    auto fit_shape = [&](const std::vector<std::pair<double, double>>& entries, KernelClassFit& out) {
        double share = 0.0;
        for (const auto& [roof, sh] : entries) share += sh;
        const double count = static_cast<double>(entries.size());
        double best_error = std::numeric_limits<double>::infinity();
        for (double floor_ns : options.floors_ns)
            for (double exponent : options.exponents) {
                double sum = 0.0;
                for (const auto& [roof, sh] : entries) sum += ref * std::pow(roof / ref, exponent);
                const double scale = (share - count * floor_ns) / sum;
                if (!(scale > 1e-6) || !std::isfinite(scale)) continue;
                KernelClassFit trial = out;
                trial.floor_ns = floor_ns;
                trial.size_exponent = exponent;
                trial.scale = scale;
                // Every kernel counts alike: the scale already makes the
                // total right, the shape must fit small and large.
                double error = 0.0;
                for (const auto& [roof, sh] : entries) {
                    const double e = std::log(std::max(1.0, trial.time_ns(roof, ref)) / sh);
                    error += e * e;
                }
                if (error < best_error) {
                    best_error = error;
                    out = trial;
                }
            }
    };
    for (int round = 0; round < options.rounds; ++round) {
        std::array<std::vector<std::pair<double, double>>, n> entries;  // per class: (roofline, share)
        std::array<std::array<std::vector<std::pair<double, double>>, engine_family_count>, n> per_engine;
        for (const FitOp& op : ops) {
            double total = 0.0;
            for (const FitKernel& k : op.kernels) total += time_of(k);
            for (const FitKernel& k : op.kernels) {
                const std::pair<double, double> entry{k.roofline, op.measured * time_of(k) / total};
                entries[k.cls].push_back(entry);
                if (k.engine != ConvEngineFamily::other) per_engine[k.cls][index_of(k.engine)].push_back(entry);
            }
        }
        for (std::size_t c = 0; c < n; ++c) {
            if (!entries[c].empty()) fit_shape(entries[c], fit.classes[c]);
            for (std::size_t e = 0; e < engine_family_count; ++e)
                if (per_engine[c][e].size() >= std::max<std::size_t>(options.min_engine_kernels, 1))
                    fit_shape(per_engine[c][e], fit.engines[c][e]);
        }
    }

    // Fill: per class, the logistic curve (in log2 of the roofline time of
    // an op's first estimated kernel, the one whose class the op is filed
    // under and which estimate_kernel widens by it) closest to the
    // time-weighted slot share the op's profiled kernels hold.
    struct FillPoint {
        double log2_roof, fill, weight;
    };
    std::array<std::vector<FillPoint>, n> points;
    for (std::size_t net : fitted_nets) {
        const ProfiledNet& pn = nets[net];
        if (!pn.launch_shapes) continue;
        for (std::size_t i = 0; i < pn.profiled.size(); ++i) {
            const std::vector<KernelEstimate>& ks = (*pn.estimates)[i].kernels;
            if (ks.empty() || pn.profiled[i].kernels.empty()) continue;
            const double roof = roofline_ns(pn.device, ks.front());
            double held = 0.0, time = 0.0;
            for (const KernelCost& k : pn.profiled[i].kernels) {
                held += k.duration_ns * slot_fill(pn.device, k.shape);
                time += k.duration_ns;
            }
            if (roof > 0.0 && time > 0.0)
                points[index_of(ks.front().kind)].push_back({std::log2(roof), held / time, time});
        }
    }
    for (std::size_t i = 0; i < n; ++i) {
        if (points[i].size() < 3) continue;
        double best_error = std::numeric_limits<double>::infinity();
        for (double mid = 0.0; mid <= 20.0; mid += 0.25)
            for (double width = 0.25; width <= 4.0; width += 0.25) {
                double e = 0.0;
                for (const FillPoint& q : points[i]) {
                    const double f = 1.0 / (1.0 + std::exp2((mid - q.log2_roof) / width));
                    e += q.weight * (f - q.fill) * (f - q.fill);
                }
                if (e < best_error) {
                    best_error = e;
                    fit.classes[i].fill_mid_ns = std::exp2(mid);
                    fit.classes[i].fill_width = width;
                }
            }
    }
    return fit;
}

// Per net and kernel class (the class of each op's first estimated kernel,
// as the fits file it): how many ops, and their profiled and estimated
// times added up. Where an estimate fit errs, and on which kind of work:
// what a fit that holds for one network and not another gets wrong.
struct ClassTotals {
    std::string net;
    KernelClass kind = KernelClass::other;
    std::size_t ops = 0;
    double profiled_ns = 0.0;
    double estimated_ns = 0.0;
    // Kernel launches of those ops: the profile's, and the estimates'. They
    // differ where a library launches helpers (cuDNN's layout transforms, a
    // split reduction) or the profile is of other kernels than today's.
    std::size_t profiled_kernels = 0;
    std::size_t estimated_kernels = 0;
    double error_pct() const { return profiled_ns > 0.0 ? 100.0 * (estimated_ns / profiled_ns - 1.0) : 0.0; }
};

inline std::vector<ClassTotals> class_totals(std::span<const ProfiledNet> nets, const EstimateCalibration& c) {
    std::vector<ClassTotals> out;
    for (const ProfiledNet& net : nets) {
        if (!net.estimates) continue;
        if (net.estimates->size() != net.profiled.size())
            throw ModelError("class_totals: net '" + net.name + "' has " + std::to_string(net.estimates->size()) +
                             " op estimates but " + std::to_string(net.profiled.size()) + " profiled ops");
        const OpCosts estimated = estimate_costs(net.device, *net.estimates, c);
        std::array<ClassTotals, kernel_class_count> per{};
        for (std::size_t i = 0; i < estimated.size(); ++i) {
            const std::vector<KernelEstimate>& ks = (*net.estimates)[i].kernels;
            if (ks.empty()) continue;
            ClassTotals& t = per[index_of(ks.front().kind)];
            ++t.ops;
            t.profiled_ns += net.profiled[i].duration_ns();
            t.estimated_ns += estimated[i].duration_ns();
            t.profiled_kernels += net.profiled[i].kernels.size();
            t.estimated_kernels += ks.size();
        }
        for (KernelClass k : all_kernel_classes) {
            ClassTotals& t = per[index_of(k)];
            if (t.ops == 0) continue;
            t.net = net.name;
            t.kind = k;
            out.push_back(std::move(t));
        }
    }
    return out;
}

// ------------------------------------------------------------- simulator

struct SimFitOptions {
    int sweeps = 2;
    int rounds = 3;
    int points = 5;
};

// Costs of `net` in a row's prediction: profiled, or estimated with `c`.
inline OpCosts row_costs(const ProfiledNet& net, CostSource source, const Calibration& c) {
    if (source == CostSource::profile) return net.profiled;
    if (!net.estimates) throw ModelError("net '" + net.name + "' has no estimates to predict from");
    return estimate_costs(net.device, *net.estimates, c.estimate);
}

// Fits the kernel time scales and simulator constants of `start` to `rows`
// (indices `fit_rows` into them, all when empty), predicting from profiled
// costs. The estimate part of `start` is kept, except the host times per
// class and per (class, engine family), which come from the fitted nets'
// timed bodies when they have any.
inline Calibration fit_simulator(std::span<const ProfiledNet> nets, std::span<const CalibrationRow> rows,
                                 Calibration start, std::vector<std::size_t> fit_rows = {},
                                 const SimFitOptions& options = {}) {
    if (fit_rows.empty())
        for (std::size_t i = 0; i < rows.size(); ++i) fit_rows.push_back(i);
    std::vector<detail::PreparedRow> prepared;
    prepared.reserve(rows.size());
    for (const CalibrationRow& r : rows) {
        if (r.net >= nets.size()) throw ModelError("calibration row '" + r.label + "' names net " + std::to_string(r.net) + " of " + std::to_string(nets.size()));
        prepared.push_back(detail::prepare_row(r, nets[r.net], nets[r.net].profiled));
        prepared.back().from_profile = true;
    }
    // Eager rows whose profile recorded its own (eager) run take their host
    // cost per launch from it, once the graph-mode stages fixed the dispatch gap.
    auto attach_profiled_launches = [&](const Calibration& c) {
        std::vector<double> launch(nets.size(), 0.0);
        for (std::size_t n = 0; n < nets.size(); ++n)
            launch[n] = profiled_launch_ns(*nets[n].graph, nets[n].device, nets[n].profiled,
                                           nets[n].profiled_iteration_ns, c.sim);
        for (std::size_t i = 0; i < rows.size(); ++i)
            if (rows[i].mode == LaunchMode::eager) prepared[i].profiled_launch_ns = launch[rows[i].net];
        return launch;
    };
    auto select = [&](LaunchMode mode, bool serial_only) {
        std::vector<std::size_t> out;
        for (std::size_t i : fit_rows)
            if (rows[i].mode == mode && (!serial_only || rows[i].plan.stream_count() == 1)) out.push_back(i);
        return out;
    };
    using D = detail::Dimension;
    const std::vector<D> graph_serial{
        {"graph_kernel_time_scale", [](Calibration& c) -> double& { return c.graph_kernel_time_scale; }, 0.8, 1.1},
        {"dispatch_latency_ns", [](Calibration& c) -> double& { return c.sim.dispatch_latency_ns; }, 0.0, 4000.0}};
    const std::vector<D> graph_concurrent{
        {"corun_slowdown", [](Calibration& c) -> double& { return c.sim.corun_slowdown; }, 0.0, 1.5},
        {"event_latency_ns", [](Calibration& c) -> double& { return c.sim.event_latency_ns; }, 0.0, 3000.0}};
    const std::vector<D> eager_serial{
        {"eager_dispatch_extra_ns", [](Calibration& c) -> double& { return c.sim.eager_dispatch_extra_ns; }, 0.0, 6000.0},
        {"cupti_host_scale", [](Calibration& c) -> double& { return c.cupti_host_scale; }, 0.3, 1.2}};
    const std::vector<D> eager_concurrent{
        {"record_latency_ns", [](Calibration& c) -> double& { return c.sim.record_latency_ns; }, 500.0, 3000.0},
        {"wait_latency_ns", [](Calibration& c) -> double& { return c.sim.wait_latency_ns; }, 500.0, 3000.0}};
    Calibration c = std::move(start);
    const int s = options.sweeps, r = options.rounds, p = options.points;
    // Serial rows first (no concurrency to explain), then the concurrent
    // rows with those fixed, then all of a mode together.
    std::vector<D> graph_all = graph_serial;
    graph_all.insert(graph_all.end(), graph_concurrent.begin(), graph_concurrent.end());
    std::vector<D> eager_all = eager_serial;
    eager_all.insert(eager_all.end(), eager_concurrent.begin(), eager_concurrent.end());
    detail::search(prepared, select(LaunchMode::graph, true), c, graph_serial, s, r, p);
    detail::search(prepared, select(LaunchMode::graph, false), c, graph_concurrent, s, r, p);
    detail::search(prepared, select(LaunchMode::graph, false), c, graph_all, 1, r, p);
    // The kernels are the same in both modes: what eager runs add is host
    // time and dispatch gaps, which the eager stages fit.
    c.eager_kernel_time_scale = c.graph_kernel_time_scale;
    // Only eager rows say what the profiled run's host cost means for a plain run.
    if (c.cupti_host_scale == 0.0 && !select(LaunchMode::eager, false).empty()) c.cupti_host_scale = 1.0;
    const std::vector<double> launch = attach_profiled_launches(c);
    detail::search(prepared, select(LaunchMode::eager, true), c, eager_serial, s, r, p);
    detail::search(prepared, select(LaunchMode::eager, false), c, eager_all, s, r, p);
    // Without a profile (plans from estimates) each launch costs the host
    // the fitted nets' mean, as a plain run would see it. (Their profiled
    // runs disagree: GoogLeNet's b8 run cost 16 us per launch under CUPTI,
    // ResNet-50's 22 us; no per-launch or per-op constant fits both, which
    // is why plans from profiles take their own.) Only nets with a row in
    // the fit count: a held-out net's profile must not shape the fit. No
    // eager row, no cupti_host_scale: the start's launch cost stays.
    std::vector<bool> fitted(nets.size(), false);
    for (std::size_t i : fit_rows) fitted[rows[i].net] = true;
    double sum = 0.0, count = 0.0;
    for (std::size_t n = 0; n < nets.size(); ++n)
        if (fitted[n] && launch[n] > 0.0) {
            sum += launch[n];
            count += 1.0;
        }
    if (count > 0.0 && c.cupti_host_scale > 0.0) {
        c.sim.launch_latency_ns = c.cupti_host_scale * sum / count;
        c.sim.op_host_ns = 0.0;
    }
    // Profiles that timed their bodies on the host say it per op: an
    // estimated op body costs the mean of its class's (the class of its
    // first kernel) over the fitted nets, as a plain run sees it, and the
    // mean of its (class, engine family)'s where its estimate names one
    // (cuDNN's engines differ in what a call costs the host, not only in
    // how many kernels it launches).
    //
    // Profiles that did not time bodies leave the per-launch cost alone.
    // Charging an estimated body that cost times its class's (or engine's)
    // profiled launch count was tried on the H200 data set and predicted
    // worse: the fitted nets' costs per launch differ (docs/calibration.md).
    struct HostTally {
        double sum = 0.0, ops = 0.0;
        double mean(double scale) const { return ops > 0.0 ? scale * sum / ops : -1.0; }
    };
    std::array<HostTally, kernel_class_count> class_host{};
    std::array<std::array<HostTally, engine_family_count>, kernel_class_count> engine_host{};
    for (std::size_t n = 0; n < nets.size(); ++n) {
        if (!fitted[n] || !nets[n].estimates || nets[n].estimates->size() != nets[n].profiled.size()) continue;
        for (std::size_t i = 0; i < nets[n].profiled.size(); ++i) {
            const std::vector<KernelEstimate>& ks = (*nets[n].estimates)[i].kernels;
            const double host = nets[n].profiled[i].host_ns;
            if (ks.empty() || !(host >= 0.0)) continue;
            const std::size_t k = index_of(ks.front().kind);
            class_host[k].sum += host;
            class_host[k].ops += 1.0;
            if (ks.front().engine != ConvEngineFamily::other) {
                engine_host[k][index_of(ks.front().engine)].sum += host;
                engine_host[k][index_of(ks.front().engine)].ops += 1.0;
            }
        }
    }
    const double host_scale = c.cupti_host_scale > 0.0 ? c.cupti_host_scale : 1.0;
    for (std::size_t k = 0; k < kernel_class_count; ++k) {
        if (class_host[k].ops > 0.0) c.estimate.classes[k].host_ns = class_host[k].mean(host_scale);
        for (std::size_t e = 0; e < engine_family_count; ++e)
            if (engine_host[k][e].ops > 0.0) c.estimate.engines[k][e].host_ns = engine_host[k][e].mean(host_scale);
    }
    return c;
}

// Predicts every row with `c`, from profiled or estimated costs.
inline std::vector<RowPrediction> predict_rows(std::span<const ProfiledNet> nets, std::span<const CalibrationRow> rows,
                                               const Calibration& c, CostSource source) {
    std::vector<detail::PreparedRow> prepared;
    std::vector<OpCosts> costs(nets.size());
    std::vector<bool> have(nets.size(), false);
    for (const CalibrationRow& r : rows) {
        if (!have[r.net]) {
            costs[r.net] = row_costs(nets[r.net], source, c);
            have[r.net] = true;
        }
        prepared.push_back(detail::prepare_row(r, nets[r.net], costs[r.net]));
        prepared.back().from_profile = source == CostSource::profile;
    }
    // From profiles, eager rows take the host's cost per launch from the profiled run.
    if (source == CostSource::profile) {
        std::vector<double> launch(nets.size(), -1.0);
        for (std::size_t i = 0; i < rows.size(); ++i) {
            if (rows[i].mode != LaunchMode::eager) continue;
            const ProfiledNet& n = nets[rows[i].net];
            if (launch[rows[i].net] < 0.0)
                launch[rows[i].net] = profiled_launch_ns(*n.graph, n.device, n.profiled, n.profiled_iteration_ns, c.sim);
            prepared[i].profiled_launch_ns = launch[rows[i].net];
        }
    }
    std::vector<std::size_t> all(rows.size());
    for (std::size_t i = 0; i < rows.size(); ++i) all[i] = i;
    const std::vector<double> predicted = detail::simulate_rows(prepared, all, c);
    std::vector<RowPrediction> out;
    for (std::size_t i = 0; i < rows.size(); ++i) out.push_back({i, predicted[i], prepared[i].measured_ms});
    return out;
}

}  // namespace braid
