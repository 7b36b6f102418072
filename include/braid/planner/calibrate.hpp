// Fitting a Calibration to what a GPU measured, and judging one.
//
// Two fits, each on data a user with a GPU can produce:
//   - estimates: per kernel class, how estimated kernel times map onto the
//     profiled ones (op by op, from profiles whose networks braid can also
//     estimate). Per (floor, exponent) on a grid, class scales that make
//     each class add up to its measured share; the pair whose per-profile
//     totals and per-op times fit best is kept.
//   - the simulator and the profile-to-iteration scale: from measured
//     iterations of plans (rows), by a staged search that simulates every row
//     for each candidate constant. Serial rows fix the kernel time scale and
//     dispatch gap, concurrent rows the co-run slowdown and event latency,
//     eager rows the host's launch costs.
// The objective is the root mean square of log(predicted / measured): one
// odd row cannot drag every constant after it; the report names the worst.
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
#include "braid/model/cost.hpp"
#include "braid/model/device_spec.hpp"
#include "braid/model/estimate.hpp"
#include "braid/plan/compiled_plan.hpp"
#include "braid/plan/plan.hpp"
#include "braid/plan/sim_program.hpp"
#include "braid/planner/calibration.hpp"
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
};

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
    return sim::simulate(row.device, row.program, c.sim).makespan_ns / 1e6;
}

// Predictions of `rows` (indices into `prepared`) under `c`, two threads.
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

inline double rms_log_error(std::span<const double> predicted, std::span<const double> measured) {
    double ss = 0.0;
    for (std::size_t i = 0; i < predicted.size(); ++i) {
        const double e = std::log(predicted[i] / measured[i]);
        ss += e * e;
    }
    return predicted.empty() ? 0.0 : std::sqrt(ss / static_cast<double>(predicted.size()));
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
    std::vector<double> measured;
    for (std::size_t r : rows) measured.push_back(prepared[r].measured_ms);
    auto objective = [&](const Calibration& x) { return rms_log_error(simulate_rows(prepared, rows, x), measured); };
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

struct EstimateFitOptions {
    std::vector<double> floors_ns{0, 500, 1000, 1500, 2000, 2500, 3000, 4000, 5000, 6000};
    std::vector<double> exponents{0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0};
    double reference_ns = 10000.0;
};

// Fits calibration.estimate from the nets that carry estimates. Per
// (floor, exponent) each class's scale makes its kernels add up to their
// share of the measured op times; the pair kept is the one whose per-net
// totals and per-op log errors are smallest.
// Classes no net exercises stay unfitted (their fallback applies).
inline EstimateCalibration fit_estimates(std::span<const ProfiledNet> nets, const EstimateFitOptions& options = {}) {
    struct FitOp {
        std::size_t net;
        double measured;
        std::vector<std::pair<std::size_t, double>> kernels;  // (class index, roofline ns)
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
        for (std::size_t i = 0; i < net.profiled.size(); ++i) {
            FitOp op{n, net.profiled[i].duration_ns(), {}};
            for (const KernelEstimate& k : (*net.estimates)[i].kernels)
                op.kernels.emplace_back(index_of(k.kind), roofline_ns(net.device, k));
            if (op.measured > 0.0 && !op.kernels.empty()) ops.push_back(std::move(op));
        }
    }
    if (ops.empty()) throw ModelError("fit_estimates: no profiled net carries estimates to fit");

    EstimateCalibration best;
    double best_objective = std::numeric_limits<double>::infinity();
    for (double floor_ns : options.floors_ns)
        for (double exponent : options.exponents) {
            EstimateCalibration c;
            c.floor_ns = floor_ns;
            c.size_exponent = exponent;
            c.reference_ns = options.reference_ns;
            // Class totals: each op's measured time is shared among its
            // kernels in proportion to their predicted times, and each
            // class's scale is set so its kernels add up to their share;
            // repeated until the shares settle (a fixed point, like
            // iterative proportional fitting).
            constexpr std::size_t n = kernel_class_count;
            std::array<double, n> roof_sum{}, count{};
            for (const FitOp& op : ops)
                for (const auto& [cls, roof] : op.kernels) {
                    roof_sum[cls] += calibrated_ns(c, 1.0, roof) - c.floor_ns;
                    count[cls] += 1.0;
                }
            for (std::size_t i = 0; i < n; ++i) c.scale[i] = count[i] > 0.0 ? 1.0 : 0.0;
            for (int it = 0; it < 200; ++it) {
                std::array<double, n> share{};
                for (const FitOp& op : ops) {
                    double total = 0.0;
                    for (const auto& [cls, roof] : op.kernels) total += calibrated_ns(c, c.scale[cls], roof);
                    for (const auto& [cls, roof] : op.kernels)
                        share[cls] += op.measured * calibrated_ns(c, c.scale[cls], roof) / total;
                }
                for (std::size_t i = 0; i < n; ++i)
                    if (count[i] > 0.0)
                        c.scale[i] = roof_sum[i] > 0.0 ? std::max(1e-3, (share[i] - count[i] * c.floor_ns) / roof_sum[i]) : 1.0;
            }
            // Judge: per-net totals (what a serial iteration sums) and per-op log error.
            std::vector<double> predicted_total(nets.size(), 0.0), measured_total(nets.size(), 0.0);
            double op_error = 0.0;
            for (std::size_t o = 0; o < ops.size(); ++o) {
                double p = 0.0;
                for (const auto& [cls, roof] : ops[o].kernels) p += calibrated_ns(c, c.scale[cls], roof);
                p = std::max(p, 1.0);
                predicted_total[ops[o].net] += p;
                measured_total[ops[o].net] += ops[o].measured;
                const double e = std::log(p / ops[o].measured);
                op_error += e * e * (ops[o].measured);
            }
            double total_error = 0.0, weight = 0.0;
            for (std::size_t net : fitted_nets) {
                const double e = std::log(predicted_total[net] / measured_total[net]);
                total_error += e * e;
                weight += measured_total[net];
            }
            const double objective = std::sqrt(total_error / static_cast<double>(fitted_nets.size())) +
                                     0.25 * std::sqrt(op_error / weight);
            if (objective < best_objective) {
                best_objective = objective;
                best = c;
            }
        }
    // Fill: per class, the logistic curve (in log2 of the op's roofline
    // time) closest to the time-weighted slot share its ops' profiled
    // kernels hold (an op's class is its first estimated kernel's).
    struct FillPoint {
        double log2_roof, fill, weight;
    };
    std::array<std::vector<FillPoint>, kernel_class_count> points;
    for (std::size_t net : fitted_nets) {
        const ProfiledNet& pn = nets[net];
        for (std::size_t i = 0; i < pn.profiled.size(); ++i) {
            const std::vector<KernelEstimate>& ks = (*pn.estimates)[i].kernels;
            if (ks.empty() || pn.profiled[i].kernels.empty()) continue;
            double roof = 0.0, held = 0.0, time = 0.0;
            for (const KernelEstimate& k : ks) roof += roofline_ns(pn.device, k);
            for (const KernelCost& k : pn.profiled[i].kernels) {
                held += k.duration_ns * slot_fill(pn.device, k.shape);
                time += k.duration_ns;
            }
            if (roof > 0.0 && time > 0.0)
                points[index_of(ks.front().kind)].push_back({std::log2(roof), held / time, time});
        }
    }
    for (std::size_t i = 0; i < kernel_class_count; ++i) {
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
                    best.fill_mid_ns[i] = std::exp2(mid);
                    best.fill_width[i] = width;
                }
            }
    }
    return best;
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
// costs. The estimate part of `start` is kept.
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
    }
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
        {"event_latency_ns", [](Calibration& c) -> double& { return c.sim.event_latency_ns; }, 0.0, 8000.0}};
    const std::vector<D> eager_serial{
        {"eager_kernel_time_scale", [](Calibration& c) -> double& { return c.eager_kernel_time_scale; }, 0.8, 1.1},
        {"eager_dispatch_extra_ns", [](Calibration& c) -> double& { return c.sim.eager_dispatch_extra_ns; }, 0.0, 6000.0},
        {"launch_latency_ns", [](Calibration& c) -> double& { return c.sim.launch_latency_ns; }, 1000.0, 16000.0},
        {"op_host_ns", [](Calibration& c) -> double& { return c.sim.op_host_ns; }, 0.0, 30000.0}};
    const std::vector<D> eager_concurrent{
        {"record_latency_ns", [](Calibration& c) -> double& { return c.sim.record_latency_ns; }, 0.0, 8000.0},
        {"wait_latency_ns", [](Calibration& c) -> double& { return c.sim.wait_latency_ns; }, 0.0, 8000.0}};
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
    detail::search(prepared, select(LaunchMode::eager, true), c, eager_serial, s, r, p);
    detail::search(prepared, select(LaunchMode::eager, false), c, eager_all, s, r, p);
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
    }
    std::vector<std::size_t> all(rows.size());
    for (std::size_t i = 0; i < rows.size(); ++i) all[i] = i;
    const std::vector<double> predicted = detail::simulate_rows(prepared, all, c);
    std::vector<RowPrediction> out;
    for (std::size_t i = 0; i < rows.size(); ++i) out.push_back({i, predicted[i], prepared[i].measured_ms});
    return out;
}

}  // namespace braid
