// Tuning: the tuner against a simulated GPU that disagrees with the model
// and measures with noise, against host threads, and on bad input.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "braid/exec/host.hpp"
#include "braid/exec/timing.hpp"
#include "braid/plan/plan_json.hpp"
#include "braid/plan/validate.hpp"
#include "braid/planner/predict.hpp"
#include "braid/planner/sim_timing.hpp"
#include "braid/planner/strategies/braid.hpp"
#include "braid/planner/tune.hpp"
#include "braid/planner/tune_cache.hpp"
#include "braid/planner/tune_candidates.hpp"
#include "error_of.hpp"
#include "test_graphs.hpp"

using namespace braid;
using braid::testing::error_of;
using braid::testing::TestGraph;

namespace {

// Costs as a GPU that disagrees with the model per op would have them.
OpCosts disagreeing(const OpCosts& model, std::uint64_t seed, double sigma) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> normal(0.0, sigma);
    OpCosts out = model;
    for (OpCost& op : out) {
        const double f = std::exp(normal(rng));
        for (KernelCost& k : op.kernels) k.duration_ns *= f;
    }
    return out;
}

strategy::BraidResult plan_for_tuning(const TestGraph& t, std::uint32_t top) {
    strategy::BraidOptions o;
    o.mode = sim::LaunchMode::graph;
    o.max_streams = 6;
    o.complete_top = top;
    return strategy::braid_plan(t.graph, find_device("h200"), t.costs, o);
}

TuneCandidate candidate(std::string name, Plan plan) { return TuneCandidate{std::move(name), std::move(plan), 0.0}; }

// Where tests say their measurements were made.
MeasuredOn h200_graph() {
    return MeasuredOn{"NVIDIA H200 (sm_90, 132 SMs)", "13.0", "9.19.0", "13.0.0", "cuda", LaunchMode::graph, 32,
                      "googlenet: 224x224 images; at most 8 streams"};
}

}  // namespace

TEST_CASE("complete_top simulates the runners-up to the end and leaves the winner as it was") {
    const DeviceSpec& dev = find_device("h200");
    for (const TestGraph& t : {braid::testing::inception_like(3), braid::testing::training_dag(6, 12, 3, "training12")}) {
        CAPTURE(t.name);
        const strategy::BraidResult one = plan_for_tuning(t, 1);
        const strategy::BraidResult five = plan_for_tuning(t, 5);
        CHECK(five.plan == one.plan);
        const std::vector<std::size_t> ranked = five.ranked(5);
        REQUIRE(ranked.size() == 5);
        CHECK(ranked.front() == five.winner);
        for (std::size_t k = 0; k < ranked.size(); ++k) {
            const strategy::BraidCandidate& c = five.candidates[ranked[k]];
            if (k > 0) CHECK(c.simulated_ns >= five.candidates[ranked[k - 1]].simulated_ns);
            // Exact, not cut off: what the simulator says for the plan alone.
            CHECK(c.simulated_ns == doctest::Approx(simulate_plan(t.graph, c.plan, dev, t.costs, sim::LaunchMode::graph)
                                                        .result.makespan_ns)
                                        .epsilon(1e-12));
        }
    }
}

TEST_CASE("tune_candidates: the model's choice first, then its runners-up and the baselines, each plan once") {
    const TestGraph t = braid::testing::inception_like(3);
    const strategy::BraidResult r = plan_for_tuning(t, 4);
    const std::vector<TuneCandidate> c = tune_candidates(r, 4);
    REQUIRE(c.size() >= 3);
    CHECK(c[0].plan == r.plan);
    CHECK(c[0].name.rfind("model #1: ", 0) == 0);
    CHECK(c[0].model_ns == r.predicted_ns);
    bool serial = false, nimble = false;
    for (std::size_t i = 0; i < c.size(); ++i) {
        CAPTURE(c[i].name);
        CHECK(first_violation(c[i].plan, t.graph) == "");
        CHECK(c[i].plan.strategy == "braid");
        REQUIRE(c[i].plan.options.chosen.has_value());
        serial = serial || c[i].plan.options.chosen->base == "serial";
        nimble = nimble || (c[i].plan.options.chosen->base == "nimble" && !c[i].plan.options.chosen->critical_path_priorities);
        for (std::size_t j = 0; j < i; ++j) {
            const bool same = c[i].plan.steps == c[j].plan.steps && c[i].plan.waits == c[j].plan.waits &&
                              c[i].plan.stream_priorities == c[j].plan.stream_priorities;
            CHECK_FALSE(same);
        }
    }
    CHECK(serial);
    CHECK(nimble);
}

TEST_CASE("tuning on a simulated GPU that disagrees with the model picks within 1 % of the truly best") {
    const DeviceSpec& dev = find_device("h200");
    double worst_model = 0.0, worst_tuned = 0.0;
    int switched = 0, cases = 0;
    for (const TestGraph& t : {braid::testing::inception_like(4), braid::testing::training_dag(6, 16, 3, "training16"),
                               braid::testing::layered_dag(5, 10, 6, "layered")}) {
        const strategy::BraidResult planned = plan_for_tuning(t, 6);
        const std::vector<TuneCandidate> candidates = tune_candidates(planned, 6);
        for (std::uint64_t seed = 1; seed <= 4; ++seed)
            for (double sigma : {0.01, 0.04}) {
                CAPTURE(t.name);
                CAPTURE(seed);
                CAPTURE(sigma);
                const OpCosts truth = disagreeing(t.costs, seed, 0.3);
                TimingNoise noise;
                noise.sigma = sigma;
                noise.outlier_probability = 0.05;
                noise.drift = 0.02;
                noise.seed = seed;
                SimulatedTiming source(t.graph, dev, truth, sim::LaunchMode::graph, {}, noise, 1e6, 1e4);
                const TuneResult r = tune(t.graph, candidates, source);
                const std::vector<double>& truth_ns = source.true_ns();
                const double best = *std::min_element(truth_ns.begin(), truth_ns.end());
                worst_tuned = std::max(worst_tuned, truth_ns[r.winner] / best - 1.0);
                worst_model = std::max(worst_model, truth_ns[r.favourite] / best - 1.0);
                CHECK(truth_ns[r.winner] <= best * 1.01);
                CHECK(r.winner < candidates.size());
                CHECK(r.elapsed_s <= 60.0);
                switched += r.switched() ? 1 : 0;
                ++cases;
            }
    }
    MESSAGE("model's choice up to " << 100 * worst_model << " % slower than the best, tuned choice up to "
                                    << 100 * worst_tuned << " %; switched in " << switched << " of " << cases);
    // The premise: trusting the model would have cost more than 1 % somewhere.
    CHECK(worst_model > 0.01);
    CHECK(switched > 0);
}

TEST_CASE("a candidate faster beyond the noise replaces the favourite; an equal one does not") {
    const DeviceSpec& dev = find_device("h200");
    const TestGraph t = braid::testing::inception_like(4);
    const Plan serial = strategy::serial(t.graph, dev.key);
    const Plan nimble = strategy::nimble(t.graph, dev.key);
    const double serial_ns = simulate_plan(t.graph, serial, dev, t.costs, sim::LaunchMode::graph).result.makespan_ns;
    const double nimble_ns = simulate_plan(t.graph, nimble, dev, t.costs, sim::LaunchMode::graph).result.makespan_ns;
    REQUIRE(nimble_ns < 0.9 * serial_ns);

    int wrong = 0, false_switches = 0;
    for (std::uint64_t seed = 1; seed <= 20; ++seed) {
        TimingNoise heavy;  // a third of all measurements up to 3x slow, and drift
        heavy.sigma = 0.05;
        heavy.outlier_probability = 0.3;
        heavy.outlier_max = 2.0;
        heavy.drift = 0.05;
        heavy.seed = seed;
        {
            SimulatedTiming source(t.graph, dev, t.costs, sim::LaunchMode::graph, {}, heavy);
            const std::vector<TuneCandidate> c{candidate("serial", serial), candidate("nimble", nimble)};
            const TuneResult r = tune(t.graph, c, source);
            wrong += r.winner == 1 ? 0 : 1;
            CHECK(r.timings[1].ratio < 1.0);
        }
        {
            SimulatedTiming source(t.graph, dev, t.costs, sim::LaunchMode::graph, {}, heavy);
            const std::vector<TuneCandidate> c{candidate("nimble", nimble), candidate("nimble again", nimble)};
            const TuneResult r = tune(t.graph, c, source);
            false_switches += r.switched() ? 1 : 0;
            CHECK(r.timings[1].samples_ns.size() >= TuneOptions{}.min_rounds);
        }
    }
    MESSAGE("equal candidates: " << false_switches << " switches in 20 tunings");
    CHECK(wrong == 0);
    // Each equal pair switches with a chance of at most 2.5 % (the interval
    // is 95 %); these seeds give none or one.
    CHECK(false_switches <= 1);
}

TEST_CASE("tuning stays within its time budget and reports every candidate") {
    const DeviceSpec& dev = find_device("h200");
    const TestGraph t = braid::testing::training_dag(6, 12, 3, "training12");
    const strategy::BraidResult planned = plan_for_tuning(t, 5);
    std::vector<TuneCandidate> candidates = tune_candidates(planned, 5);
    // Iterations of ~1 s: a budget of 30 s ends the rounds long before max_rounds.
    OpCosts slow = t.costs;
    for (OpCost& op : slow)
        for (KernelCost& k : op.kernels) k.duration_ns *= 1e9 / planned.predicted_ns;
    SimulatedTiming source(t.graph, dev, slow, sim::LaunchMode::graph, {}, TimingNoise{}, 0.5e9, 0.0);
    TuneOptions o;
    o.budget_s = 30.0;
    for (TuneCandidate& c : candidates) c.model_ns *= 1e9 / planned.predicted_ns;
    const TuneResult r = tune(t.graph, candidates, source, o);
    CHECK(r.elapsed_s <= o.budget_s);
    // 0.5 s to prepare each candidate, then one warm-up run of each, before the rounds.
    CHECK(r.prepare_s >= 0.5 * static_cast<double>(candidates.size()));
    CHECK(r.prepare_s < r.elapsed_s);
    CHECK(r.rounds >= 1);
    CHECK(r.rounds < o.max_rounds);
    CHECK(r.stopped_because.find("budget") != std::string::npos);
    REQUIRE(r.timings.size() == candidates.size());
    for (const CandidateTiming& c : r.timings) {
        CAPTURE(c.name);
        CHECK(c.samples_ns.size() >= 1);
        CHECK(c.median_ns > 0.0);
        CHECK(c.spread_pct >= 0.0);
    }
    CHECK(source.measurements() == (o.warmup + r.rounds) * candidates.size());

    // A budget for 3 rounds: the favourite is kept, and the result says it was not measured enough to know.
    SimulatedTiming short_source(t.graph, dev, slow, sim::LaunchMode::graph, {}, TimingNoise{}, 0.5e9, 0.0);
    o.budget_s = 0.5 * static_cast<double>(candidates.size()) + 4.5 * static_cast<double>(candidates.size());
    const TuneResult few = tune(t.graph, candidates, short_source, o);
    CHECK(few.rounds < 8);
    CHECK_FALSE(few.conclusive);
    CHECK_FALSE(few.switched());

    // No round fits: the favourite comes back with no measurement to record.
    SimulatedTiming no_time(t.graph, dev, slow, sim::LaunchMode::graph, {}, TimingNoise{}, 0.5e9, 0.0);
    o.budget_s = 0.5 * static_cast<double>(candidates.size());
    const TuneResult none = tune(t.graph, candidates, no_time, o);
    CHECK(none.rounds == 0);
    const Plan unmeasured = measured_plan(candidates, none, h200_graph());
    CHECK_FALSE(unmeasured.measured.has_value());
    CHECK(unmeasured == candidates[0].plan);
}

TEST_CASE("the median's interval: none from too few samples, order statistics from more") {
    using detail_tune::median_interval;
    const auto few = median_interval({1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0});
    CHECK(few.median == 4.0);
    CHECK(few.low == 0.0);
    CHECK(std::isinf(few.high));
    std::vector<double> hundred;
    for (int i = 100; i >= 1; --i) hundred.push_back(i);
    const auto m = median_interval(hundred);
    CHECK(m.median == 50.5);
    CHECK(m.low == 40.0);   // rank floor(50 - 9.8)
    CHECK(m.high == 61.0);  // rank 100 - 40 + 1
    const auto strict = median_interval(hundred, detail_tune::z_during);
    CHECK(strict.low == 33.0);   // rank floor(50 - 16.45)
    CHECK(strict.high == 68.0);
    CHECK(std::isinf(median_interval({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}, detail_tune::z_during).high));
    CHECK(median_interval({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, detail_tune::z_during).high == 15.0);
    // Bonferroni: 95 % jointly over k intervals.
    CHECK(detail_tune::z_for_comparisons(1) == doctest::Approx(1.95996).epsilon(1e-4));
    CHECK(detail_tune::z_for_comparisons(10) == doctest::Approx(2.80703).epsilon(1e-4));
}

TEST_CASE("tuning on the host backend runs every candidate's bodies and returns one of them") {
    const TestGraph t = braid::testing::inception_like(2);
    const DeviceSpec& dev = find_device("h200");
    std::atomic<std::uint64_t> bodies_run{0};
    std::vector<ExecutorTiming<HostBackend>::Body> bodies(t.graph.op_count(), [&](HostLane&, const OpContext&) {
        bodies_run.fetch_add(1, std::memory_order_relaxed);
    });
    HostBackend backend;
    ExecutorTiming<HostBackend> source(t.graph, backend, bodies);
    const std::vector<TuneCandidate> c{candidate("serial", strategy::serial(t.graph, dev.key)),
                                       candidate("nimble", strategy::nimble(t.graph, dev.key))};
    TuneOptions o;
    o.min_rounds = 3;
    o.max_rounds = 8;
    const TuneResult r = tune(t.graph, c, source, o);
    CHECK(r.winner < c.size());
    CHECK(r.rounds >= 3);
    std::uint64_t runs = 0;
    for (std::size_t i = 0; i < c.size(); ++i) {
        CHECK(r.timings[i].median_ns > 0.0);
        CHECK(source.executor(i).iterations() == o.warmup + r.timings[i].samples_ns.size());
        runs += source.executor(i).iterations();
    }
    CHECK(bodies_run.load() == runs * t.graph.op_count());
}

TEST_CASE("bad tuning input names the candidate") {
    const TestGraph t = braid::testing::diamond();
    const Plan serial = strategy::serial(t.graph, "h200");
    Plan backwards = serial;
    std::reverse(backwards.steps.begin(), backwards.steps.end());
    SimulatedTiming source(t.graph, find_device("h200"), t.costs, sim::LaunchMode::graph, {}, TimingNoise{});

    CHECK(error_of([&] { tune(t.graph, std::vector<TuneCandidate>{}, source); }) == "tune: no candidate plans");
    const std::vector<TuneCandidate> two{candidate("serial", serial), candidate("backwards", backwards)};
    const std::string invalid = error_of([&] { tune(t.graph, two, source); });
    CHECK(invalid.rfind("tune: candidate 'backwards' is not a valid plan: ", 0) == 0);
    TuneOptions o;
    o.favourite = 2;
    const std::vector<TuneCandidate> one{candidate("serial", serial)};
    CHECK(error_of([&] { tune(t.graph, one, source, o); }) == "tune: favourite 2 is not one of the 1 candidates");

    struct Failing : TimingSource {
        std::vector<std::string> prepare(std::span<const TuneCandidate>) override { return {}; }
        double measure_ns(std::size_t) override { throw std::runtime_error("cudaErrorLaunchFailure"); }
        double now_ns() override { return 0.0; }
    } failing;
    CHECK(error_of([&] { tune(t.graph, one, failing); }) == "tuning: candidate 'serial' failed: cudaErrorLaunchFailure");
}

namespace {

// The simulated GPU with no room for some candidates: prepare() declines
// them, and measuring one is an error (the tuner must never ask).
struct Cramped : TimingSource {
    SimulatedTiming& gpu;
    std::vector<bool> no_room;
    std::size_t answers = 0;  // prepare()'s answers, one per candidate unless changed
    Cramped(SimulatedTiming& g, std::vector<bool> full) : gpu(g), no_room(std::move(full)), answers(no_room.size()) {}
    std::vector<std::string> prepare(std::span<const TuneCandidate> c) override {
        (void)gpu.prepare(c);
        std::vector<std::string> out(answers);
        for (std::size_t i = 0; i < std::min(answers, no_room.size()); ++i)
            if (no_room[i]) out[i] = "cudaMalloc: out of memory (candidate " + std::to_string(i) + ")";
        return out;
    }
    double measure_ns(std::size_t i) override {
        if (no_room.at(i)) throw std::runtime_error("measured a declined candidate");
        return gpu.measure_ns(i);
    }
    double now_ns() override { return gpu.now_ns(); }
};

}  // namespace

TEST_CASE("candidates the source has no room for are reported, never timed, and cannot win") {
    const TestGraph t = braid::testing::inception_like(4);
    const strategy::BraidResult planned = plan_for_tuning(t, 6);
    const std::vector<TuneCandidate> candidates = tune_candidates(planned, 6);
    REQUIRE(candidates.size() >= 4);
    const std::size_t n = candidates.size();
    const DeviceSpec& dev = find_device("h200");
    TimingNoise noise;
    noise.sigma = 0.01;

    // A GPU that disagrees with the model, so that tuning with room for
    // every candidate switches away from the favourite; then the candidate
    // it switched to is declined: the tuner picks among the others, and the
    // plan records why.
    OpCosts truth;
    std::size_t best = 0;
    for (std::uint64_t seed = 1; seed <= 40 && best == 0; ++seed) {
        truth = disagreeing(t.costs, seed, 0.3);
        SimulatedTiming roomy(t.graph, dev, truth, sim::LaunchMode::graph, {}, noise);
        best = tune(t.graph, candidates, roomy).winner;
    }
    REQUIRE(best != 0);
    std::vector<bool> full(n, false);
    full[best] = true;
    SimulatedTiming gpu(t.graph, dev, truth, sim::LaunchMode::graph, {}, noise);
    Cramped cramped(gpu, full);
    const TuneResult r = tune(t.graph, candidates, cramped);
    CHECK(r.timings[best].declined == "cudaMalloc: out of memory (candidate " + std::to_string(best) + ")");
    CHECK(r.timings[best].samples_ns.empty());
    CHECK(r.winner != best);
    CHECK(r.fastest != best);
    for (std::size_t i = 0; i < n; ++i)
        if (i != best) {
            CAPTURE(i);
            CHECK(r.timings[i].declined.empty());
            CHECK_FALSE(r.timings[i].samples_ns.empty());
        }
    const Plan p = measured_plan(candidates, r, h200_graph());
    REQUIRE(p.measured.has_value());
    CHECK(p.measured->candidates[best].declined == r.timings[best].declined);
    CHECK(p.measured->candidates[best].samples == 0);
    const nlohmann::json j = to_json(p, t.graph);
    CHECK(j.at("measured").at("candidates").at(best).at("declined") == r.timings[best].declined);
    CHECK_FALSE(j.at("measured").at("candidates").at(0).contains("declined"));
    CHECK(plan_from_json(j, t.graph) == p);
    nlohmann::json counted = j;
    counted["measured"]["candidates"][best]["samples"] = 3;
    CHECK(error_of([&] { (void)plan_from_json(counted, t.graph); }).find("a declined candidate with 3 samples") !=
          std::string::npos);
    nlohmann::json empty_reason = j;
    empty_reason["measured"]["candidates"][best]["declined"] = "";
    CHECK(error_of([&] { (void)plan_from_json(empty_reason, t.graph); }).find("an empty reason") != std::string::npos);

    // Only the model's choice fits: it is measured alone and kept.
    std::vector<bool> all_but_first(n, true);
    all_but_first[0] = false;
    SimulatedTiming gpu2(t.graph, dev, t.costs, sim::LaunchMode::graph, {}, noise);
    Cramped alone(gpu2, all_but_first);
    const TuneResult a = tune(t.graph, candidates, alone);
    CHECK(a.winner == 0);
    CHECK(a.stopped_because == "no other candidate could be prepared");
    CHECK(a.rounds == TuneOptions{}.min_rounds);
    CHECK_FALSE(a.conclusive);  // nothing was compared
    CHECK(a.timings[0].samples_ns.size() == a.rounds);

    // A favourite that is not first, and candidate 0 declined: 0 is neither
    // the fastest nor the winner, though both start out as index 0.
    TuneOptions second;
    second.favourite = 1;
    std::vector<bool> zero(n, false);
    zero[0] = true;
    SimulatedTiming gpu5(t.graph, dev, truth, sim::LaunchMode::graph, {}, noise);
    Cramped first_full(gpu5, zero);
    const TuneResult f = tune(t.graph, candidates, first_full, second);
    CHECK(f.favourite == 1);
    CHECK(f.timings[0].samples_ns.empty());
    CHECK(f.fastest != 0);
    CHECK(f.winner != 0);
    CHECK_FALSE(f.timings[f.fastest].samples_ns.empty());

    // The model's choice declined: nothing to compare with, an error naming it.
    std::vector<bool> first(n, false);
    first[0] = true;
    SimulatedTiming gpu3(t.graph, dev, t.costs, sim::LaunchMode::graph, {}, noise);
    Cramped no_favourite(gpu3, first);
    CHECK(error_of([&] { tune(t.graph, candidates, no_favourite); }) ==
          "tuning: the model's choice '" + candidates[0].name +
              "' could not be prepared: cudaMalloc: out of memory (candidate 0)");

    // A source that answers for the wrong number of candidates.
    SimulatedTiming gpu4(t.graph, dev, t.costs, sim::LaunchMode::graph, {}, noise);
    Cramped short_answer(gpu4, std::vector<bool>(n, false));
    short_answer.answers = n - 1;
    CHECK(error_of([&] { tune(t.graph, candidates, short_answer); }) ==
          "tuning: the timing source answered for " + std::to_string(n - 1) + " of " + std::to_string(n) +
              " candidates");
}

namespace {

// A tuned plan for the diamond, as tuning on the simulator makes it.
Plan tuned_diamond(const TestGraph& t) {
    const Plan serial = strategy::serial(t.graph, "h200");
    const Plan nimble = strategy::nimble(t.graph, "h200");
    SimulatedTiming source(t.graph, find_device("h200"), t.costs, sim::LaunchMode::graph, {}, TimingNoise{});
    const std::vector<TuneCandidate> c{candidate("serial", serial), candidate("nimble", nimble)};
    return measured_plan(c, tune(t.graph, c, source), h200_graph());
}

struct TempDir {
    std::filesystem::path path;
    explicit TempDir(const std::string& name) : path(std::filesystem::temp_directory_path() / name) {
        std::filesystem::remove_all(path);
    }
    ~TempDir() { std::filesystem::remove_all(path); }
};

}  // namespace

TEST_CASE("a tuned plan records its measurement, and plan.json keeps it") {
    const TestGraph t = braid::testing::diamond();
    const Plan p = tuned_diamond(t);
    REQUIRE(p.measured.has_value());
    CHECK(p.measured->on == h200_graph());
    REQUIRE(p.measured->candidates.size() == 2);
    CHECK(p.measured->candidates[0].name == "serial");
    CHECK(p.measured->candidates[0].samples >= TuneOptions{}.min_rounds);
    CHECK(p.measured->median_ms > 0.0);
    CHECK(p.measured->rounds >= TuneOptions{}.min_rounds);
    const nlohmann::json j = to_json(p, t.graph);
    CHECK(j.at("measured").at("device") == "NVIDIA H200 (sm_90, 132 SMs)");
    CHECK(plan_from_json(j, t.graph) == p);

    nlohmann::json bad = j;
    bad["measured"]["mode"] = "fast";
    CHECK(error_of([&] { plan_from_json(bad, t.graph, "plan.json"); }) ==
          "plan.json: $.measured.mode: expected \"graph\" or \"eager\", got \"fast\"");
    bad = j;
    bad["measured"].erase("batch");
    CHECK(error_of([&] { plan_from_json(bad, t.graph, "plan.json"); }) ==
          "plan.json: $.measured.batch: required field is missing");
    bad = j;
    bad["measured"]["median_ms"] = 0.0;
    CHECK(error_of([&] { plan_from_json(bad, t.graph, "plan.json"); }) ==
          "plan.json: $.measured.median_ms: must be a finite number > 0 and at most 10000000.0, got 0.0");
    bad = j;
    bad["measured"]["candidates"][0]["spread_pct"] = -1.0;
    CHECK(error_of([&] { plan_from_json(bad, t.graph, "plan.json"); }) ==
          "plan.json: $.measured.candidates[0].spread_pct: must be a finite number >= 0 and at most 1000000.0, got -1.0");
    bad = j;
    bad["measured"]["rounds"] = 0;
    CHECK(error_of([&] { plan_from_json(bad, t.graph, "plan.json"); }) == "plan.json: $.measured.rounds: must be >= 1, got 0");
    bad["measured"]["rounds"] = -1;  // the rule, not the reader's integer range
    CHECK(error_of([&] { plan_from_json(bad, t.graph, "plan.json"); }) == "plan.json: $.measured.rounds: must be >= 1, got -1");
    bad = j;
    bad["measured"]["candidates"][0]["samples"] = p.measured->rounds + 1;
    CHECK(error_of([&] { plan_from_json(bad, t.graph, "plan.json"); }) ==
          "plan.json: $.measured.candidates[0].samples: must be from 1 to the " + std::to_string(p.measured->rounds) +
              " rounds, got " + std::to_string(p.measured->rounds + 1));
    bad["measured"]["candidates"][0]["samples"] = 0;
    CHECK(error_of([&] { plan_from_json(bad, t.graph, "plan.json"); }).find("must be from 1 to the") != std::string::npos);
    bad = j;
    bad["measured"]["backend"] = "tpu";
    CHECK(error_of([&] { plan_from_json(bad, t.graph, "plan.json"); }) ==
          "plan.json: $.measured.backend: expected \"cuda\" or \"host\", got \"tpu\"");
    bad = j;
    bad["measured"]["batch"] = 0;
    CHECK(error_of([&] { plan_from_json(bad, t.graph, "plan.json"); }) == "plan.json: $.measured.batch: must be >= 1, got 0");
    bad["measured"]["batch"] = -3;
    CHECK(error_of([&] { plan_from_json(bad, t.graph, "plan.json"); }) == "plan.json: $.measured.batch: must be >= 1, got -3");
    bad = j;
    bad["measured"]["candidates"][1]["seconds"] = 1;
    CHECK(error_of([&] { plan_from_json(bad, t.graph, "plan.json"); }).find("$.measured.candidates[1]") !=
          std::string::npos);
}

TEST_CASE("the tuning cache gives back a plan measured here and ignores, with a message, one that is not") {
    const TestGraph t = braid::testing::diamond();
    const TempDir dir("braid-tune-cache-test");
    const MeasuredOn here = h200_graph();
    CachedPlan none = find_tuned_plan(dir.path, t.graph, here);
    CHECK_FALSE(none.plan.has_value());
    CHECK(none.message == "");

    const Plan p = tuned_diamond(t);
    const std::filesystem::path file = store_tuned_plan(dir.path, t.graph, p);
    CHECK(file == tune_cache_file(dir.path, t.graph.fingerprint(), here));
    const CachedPlan hit = find_tuned_plan(dir.path, t.graph, here);
    REQUIRE(hit.plan.has_value());
    CHECK(*hit.plan == p);
    CHECK(hit.message == "using the tuned plan in " + file.string() + " (measured on " + here.describe() + ")");

    MeasuredOn other_driver = here;
    other_driver.driver = "12.8";
    const CachedPlan foreign = find_tuned_plan(dir.path, t.graph, other_driver);
    CHECK_FALSE(foreign.plan.has_value());
    CHECK(foreign.message == "ignoring the tuned plan in " + file.string() + ": it was measured on " + here.describe() +
                                 "; this run is " + other_driver.describe());

    MeasuredOn other_size = here;  // same machine, another image size
    other_size.settings = "googlenet: 160x160 images; at most 8 streams";
    CHECK(find_tuned_plan(dir.path, t.graph, other_size).message.find("; this run is " + other_size.describe()) !=
          std::string::npos);

    Plan unmeasured = p;
    unmeasured.measured.reset();
    std::ofstream(file) << to_json(unmeasured, t.graph).dump();
    CHECK(find_tuned_plan(dir.path, t.graph, here).message ==
          "ignoring the tuned plan in " + file.string() + ": it records no measurement");

    std::ofstream(file) << "{\"format\": \"braid.plan\"";
    const CachedPlan broken = find_tuned_plan(dir.path, t.graph, here);
    CHECK_FALSE(broken.plan.has_value());
    CAPTURE(broken.message);
    CHECK(broken.message.rfind("ignoring the tuned plan in " + file.string() + ": " + file.string() + ":", 0) == 0);

    // A stale entry: made for a graph that has since changed.
    const TestGraph changed = braid::testing::inception_like(1);
    store_tuned_plan(dir.path, t.graph, p);
    std::filesystem::copy_file(file, tune_cache_file(dir.path, changed.graph.fingerprint(), here));
    const CachedPlan stale = find_tuned_plan(dir.path, changed.graph, here);
    CHECK_FALSE(stale.plan.has_value());
    CHECK(stale.message.find("this plan was made for graph " + t.graph.fingerprint()) != std::string::npos);

    Plan no_measure = p;
    no_measure.measured.reset();
    CHECK(error_of([&] { store_tuned_plan(dir.path, t.graph, no_measure); }) ==
          "store_tuned_plan: the plan records no measurement");
}
