// Calibrations: the calibrated estimate formula, the file format and its
// errors, the built-in table, and the fits, which must recover the constants
// that made synthetic measurements.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <tuple>

#include "braid/model/device_table.hpp"
#include "braid/plan/plan.hpp"
#include "braid/planner/calibrate.hpp"
#include "braid/planner/calibration_json.hpp"
#include "braid/planner/calibration_table.hpp"
#include "braid/planner/strategies/nimble.hpp"
#include "braid/planner/strategies/serial.hpp"
#include "error_of.hpp"
#include "test_graphs.hpp"

using namespace braid;
using braid::testing::error_of;

namespace {

KernelEstimate gemm_like(KernelClass kind, double flops, std::uint32_t grid) {
    KernelEstimate k;
    k.shape.name = "k";
    k.shape.grid = {grid, 1, 1};
    k.shape.block = {128, 1, 1};
    k.shape.regs_per_thread = 64;
    k.flops = flops;
    k.dram_bytes = 1e6;
    k.math = MathMode::tf32;
    k.kind = kind;
    return k;
}

// The per-class fits that make the made-up nets' "profiled" times.
EstimateCalibration made_up_truth() {
    EstimateCalibration truth;
    truth[KernelClass::conv_forward] = {3.0, 2000, 0.65, 0, 1.0};
    truth[KernelClass::elementwise] = {1.5, 750, 0.9, 0, 1.0};
    return truth;
}

// The fit of class `k` is the truth's: its floor and exponent on the grid,
// its scale within `epsilon`.
void check_fit_recovers(const EstimateCalibration& fit, const EstimateCalibration& truth, KernelClass k,
                        double epsilon = 1e-6) {
    CAPTURE(to_string(k));
    CHECK(fit[k].floor_ns == doctest::Approx(truth[k].floor_ns));
    CHECK(fit[k].size_exponent == doctest::Approx(truth[k].size_exponent));
    CHECK(fit[k].scale == doctest::Approx(truth[k].scale).epsilon(epsilon));
}
std::vector<ProfiledNet> made_up_net(const OpGraph& g, const DeviceSpec& dev, const OpCosts& profiled,
                                     const std::vector<OpEstimate>& estimates) {
    std::vector<ProfiledNet> nets(1);
    nets[0].name = "made-up";
    nets[0].graph = &g;
    nets[0].device = dev;
    nets[0].profiled = profiled;
    nets[0].estimates = estimates;
    return nets;
}

Calibration sample_calibration() {
    Calibration c;
    c.device_key = "h200";
    c.device_name = "NVIDIA H200";
    c.sm_count = 132;
    c.cc_major = 9;
    c.cc_minor = 0;
    c.source = "test";
    c.graph_kernel_time_scale = 0.93;
    c.eager_kernel_time_scale = 1.02;
    c.sim.corun_slowdown = 0.5;
    c.sim.event_latency_ns = 700;
    c.sim.op_host_ns = 3000;
    c.estimate[KernelClass::conv_forward] = {3.5, 2000, 0.7, 4096, 1.0};
    c.estimate[KernelClass::elementwise] = {2.0, 1500, 0.9, 0, 1.0};
    c.estimate.engine_fit(KernelClass::conv_forward, ConvEngineFamily::legacy) = {14.0, 2500, 0.55};
    return c;
}

// `t`'s graph as profiled on the H200, with its own costs.
ProfiledNet profiled_net(const std::string& name, const braid::testing::TestGraph& t) {
    ProfiledNet net;
    net.name = name;
    net.graph = &t.graph;
    net.device = find_device("h200");
    net.profiled = t.costs;
    return net;
}

// `t`'s serial plan run eagerly, "measured" as the simulator predicts it
// from `nets`' profile when a plain run costs the host `cupti_host_scale`
// of what CUPTI saw.
CalibrationRow serial_eager_row(const braid::testing::TestGraph& t, std::span<const ProfiledNet> nets,
                                double cupti_host_scale) {
    Calibration truth;
    truth.cupti_host_scale = cupti_host_scale;
    CalibrationRow row;
    row.label = "serial eager";
    row.plan = strategy::serial(t.graph, "h200");
    row.mode = LaunchMode::eager;
    row.measured_ms = {1.0};
    row.measured_ms = {predict_rows(nets, std::span<const CalibrationRow>(&row, 1), truth, CostSource::profile)[0].predicted_ms};
    return row;
}

nlohmann::json with(nlohmann::json j, const nlohmann::json::json_pointer& at, nlohmann::json value) {
    j[at] = std::move(value);
    return j;
}

}  // namespace

TEST_CASE("calibrated estimates: floor + scale x reference x (roofline / reference)^exponent, fallbacks, fill") {
    const DeviceSpec& dev = find_device("h200");
    EstimateCalibration c;
    c.reference_ns = 10000;
    c[KernelClass::conv_forward] = {4.0, 1500, 0.5, 0, 1.0};
    c[KernelClass::elementwise] = {2.0, 800, 0.9, 0, 1.0};

    const KernelEstimate conv = gemm_like(KernelClass::conv_forward, 1e9, 4000);
    const double roof = roofline_ns(dev, conv);
    CHECK(roof == doctest::Approx(std::max(1e9 / (dev.peak_tf32_tflops * 1e3), 1e6 / dev.dram_bytes_per_ns())));
    CHECK(estimate_kernel(dev, conv, c).duration_ns == doctest::Approx(1500 + 4.0 * 10000 * std::sqrt(roof / 10000)));

    // Backward-data has no fit of its own: conv_forward's applies; a class
    // whose chain ends unfitted keeps the roofline estimate.
    const KernelEstimate dgrad = gemm_like(KernelClass::conv_backward_data, 1e9, 4000);
    CHECK(c.time_fit(KernelClass::conv_backward_data) == &c[KernelClass::conv_forward]);
    CHECK(estimate_kernel(dev, dgrad, c).duration_ns == doctest::Approx(estimate_kernel(dev, conv, c).duration_ns));
    CHECK(c.time_fit(KernelClass::normalization) == &c[KernelClass::elementwise]);
    CHECK(c.time_fit(KernelClass::other) == nullptr);
    const KernelEstimate other = gemm_like(KernelClass::other, 1e9, 4000);
    CHECK(estimate_kernel(dev, other, c).duration_ns == estimate_kernel(dev, other).duration_ns);

    // Fill: a small grid is widened to the share of slots the curve gives,
    // a grid already wider is left alone; the duration does not change.
    c[KernelClass::conv_forward].fill_mid_ns = roof;  // at the midpoint: half the slots
    CHECK(c[KernelClass::conv_forward].fill(roof) == doctest::Approx(0.5));
    const KernelEstimate small = gemm_like(KernelClass::conv_forward, 1e9, 3);
    const KernelCost widened = estimate_kernel(dev, small, c);
    const double slots = static_cast<double>(occupancy(dev, small.shape).blocks_per_sm) * dev.sm_count;
    CHECK(widened.shape.grid.x == static_cast<std::uint32_t>(std::ceil(0.5 * slots)));
    CHECK(slot_fill(dev, widened.shape) == doctest::Approx(0.5).epsilon(0.01));
    CHECK(widened.duration_ns == doctest::Approx(estimate_kernel(dev, conv, c).duration_ns));
    CHECK(estimate_kernel(dev, conv, c).shape.grid.x == 4000);
}

TEST_CASE("calibrated costs scale profiled kernels per launch mode") {
    Calibration c = sample_calibration();
    OpCosts costs(1);
    KernelCost k;
    k.duration_ns = 1000;
    costs[0].kernels = {k, k};
    CHECK(calibrated_costs(costs, c, LaunchMode::graph)[0].kernels[1].duration_ns == doctest::Approx(930));
    CHECK(calibrated_costs(costs, c, LaunchMode::eager)[0].kernels[0].duration_ns == doctest::Approx(1020));
}

TEST_CASE("a calibration file round-trips and says what is wrong with a bad one") {
    const Calibration c = sample_calibration();
    const nlohmann::json j = to_json(c);
    CHECK(calibration_from_json(j) == c);
    CHECK(calibration_from_json(nlohmann::json::parse(j.dump())) == c);
    // A report for people is allowed and not read.
    CHECK(calibration_from_json(with(j, "/report"_json_pointer, {{"rows", 3}})) == c);

    using P = nlohmann::json::json_pointer;
    const std::pair<nlohmann::json, std::string> bad[] = {
        {with(j, P("/format"), "braid.plan"), "$: this is a braid.plan, not a braid.calibration"},
        {with(j, P("/version"), 2), "$.version: version 2 is not supported (this braid reads version 1)"},
        {with(j, P("/sim/launch_latency"), 5), "$.sim.launch_latency: unknown simulator parameter"},
        {with(j, P("/sim/corun_slowdown"), -1), "$.sim: sim::Params::corun_slowdown must be finite and >= 0, at most 1000, got -1"},
        {with(j, P("/sim/corun_slowdown"), 1e300), "$.sim: sim::Params::corun_slowdown must be finite and >= 0, at most 1000, got 1e+300"},
        {with(j, P("/sim/launch_latency_ns"), 1e300), "$.sim: sim::Params::launch_latency_ns must be finite and >= 0, at most 1e+09, got 1e+300"},
        {with(j, P("/sim/eager_hardware_queues"), 1000), "$.sim: sim::Params::eager_hardware_queues must be from 0 (one hardware queue per stream) to 32, got 1000"},
        {with(j, P("/sim/graph_hardware_queues"), -1), "$.sim: sim::Params::graph_hardware_queues must be from 0"},
        {with(j, P("/sim/share_bandwidth"), 1), "$.sim.share_bandwidth: expected true or false, got an integer"},
        {with(j, P("/estimates/classes/convolution"), {{"scale", 2}}), "$.estimates.classes.convolution: unknown kernel class"},
        {with(j, P("/estimates/classes/conv_forward/scale"), -1), "$.estimates.classes.conv_forward.scale: must be between 0 and 1e+06"},
        {with(j, P("/estimates/classes/conv_forward/size_exponent"), 7), "$.estimates.classes.conv_forward.size_exponent: must be between 0.05 and 2"},
        {with(j, P("/estimates/classes/conv_forward/fill_width"), 0), "$.estimates.classes.conv_forward.fill_width: must be between"},
        {with(j, P("/estimates/classes/conv_forward/speed"), 1), "$.estimates.classes.conv_forward.speed: unknown field"},
        {with(j, P("/estimates/engines/0/engine"), "other"), "$.estimates.engines[0].engine: 'other' is not an engine family a fit can be for (expected one of: legacy, tensor_core, simt, fft, winograd)"},
        {with(j, P("/estimates/engines/0/engine"), "cudnn"), "$.estimates.engines[0].engine: 'cudnn' is not an engine family"},
        {with(j, P("/estimates/engines/0/class"), "convolution"), "$.estimates.engines[0].class: unknown kernel class 'convolution'"},
        {with(j, P("/estimates/engines/0/scale"), 0), "$.estimates.engines[0].scale: must be between 1e-09 and 1e+06"},
        {with(j, P("/estimates/engines/0/fill_mid_ns"), 5), "$.estimates.engines[0].fill_mid_ns: unknown field"},
        {with(j, P("/estimates/engines/1"), j["estimates"]["engines"][0]), "$.estimates.engines[1]: a second fit for conv_forward on legacy"},
        {with(j, P("/estimates/engines"), {{"class", "gemm"}}), "$.estimates.engines: expected an array, got an object"},
        {with(j, P("/kernel_time_scale/graph"), 0), "$.kernel_time_scale.graph: must be between 0.1 and 10"},
        {with(j, P("/device/compute_capability"), "9"), "$.device.compute_capability: expected \"major.minor\""},
        {with(j, P("/device/sm_count"), 0), "$.device.sm_count: must be between 1 and 4096"},
        {with(j, P("/colour"), "blue"), "$.colour: unknown field"},
    };
    for (const auto& entry : bad) {
        const auto& doc = entry.first;
        const auto& message = entry.second;  // variables, not bindings: lambdas capture them before clang 16 too
        CAPTURE(message);
        const std::string e = error_of([&] { (void)calibration_from_json(doc); });
        CHECK(e.find(message) != std::string::npos);
    }
    const std::string missing = (std::filesystem::temp_directory_path() / "braid-no-such-calibration.json").string();
    CHECK(error_of([&] { (void)load_calibration(missing); }).find("cannot open '" + missing + "'") != std::string::npos);
}

TEST_CASE("the built-in table: fitted on the H200, used for it and nothing else; --calibration's three meanings") {
    const DeviceSpec& h200 = find_device("h200");
    const std::optional<Calibration> c = builtin_calibration(h200);
    REQUIRE(c);
    CHECK(c->device_key == "h200");
    CHECK(c->sm_count == h200.sm_count);
    CHECK(c->estimate.fitted());
    CHECK(!builtin_calibration(find_device("a100")));
    CHECK(!builtin_calibration(find_device("h100")));  // same compute capability, other SM count

    std::vector<std::string> warnings;
    CHECK(select_calibration("", h200, warnings) == c);
    CHECK(!select_calibration("none", h200, warnings));
    const std::string file = (std::filesystem::temp_directory_path() / "braid-calibration-test.json").string();
    save_calibration(sample_calibration(), file);
    CHECK(select_calibration(file, h200, warnings) == sample_calibration());
    CHECK(warnings.empty());
    CHECK(select_calibration(file, find_device("a100"), warnings) == sample_calibration());
    REQUIRE(warnings.size() == 1);
    CHECK(warnings[0].find("the calibration was fitted on 'NVIDIA H200' (132 SMs, cc 9.0), not on") != std::string::npos);
    CHECK(describe_calibration(c, "") == "built-in calibration for h200");
    CHECK(describe_calibration(std::nullopt, "none") == "no calibration");
    std::filesystem::remove(file);
}

TEST_CASE("fit_estimates recovers the per-class fits that made the profiled times") {
    const DeviceSpec& dev = find_device("h200");
    // A made-up net: ops of one conv kernel, or a conv and an elementwise
    // kernel, whose "profiled" times come from a known calibration.
    const EstimateCalibration truth = made_up_truth();
    OpGraphBuilder b;
    std::vector<OpEstimate> estimates;
    OpCosts profiled;
    for (int i = 0; i < 60; ++i) {
        b.add_op({"op" + std::to_string(i), OpKind::forward, "", {}, {b.add_buffer("b" + std::to_string(i), 64)}, 0});
        OpEstimate e;
        if (i % 4 != 1) e.kernels.push_back(gemm_like(KernelClass::conv_forward, 1e7 * (1 + i * i), 200));
        if (i % 2 == 1) {
            KernelEstimate ew = gemm_like(KernelClass::elementwise, 0, 500);
            ew.dram_bytes = 1e5 * (1 + i * i);
            e.kernels.push_back(ew);
        }
        OpCost c;
        for (const KernelEstimate& k : e.kernels) c.kernels.push_back(estimate_kernel(dev, k, truth));
        profiled.push_back(c);
        estimates.push_back(e);
    }
    const OpGraph g = b.finalize();
    std::vector<ProfiledNet> nets = made_up_net(g, dev, profiled, estimates);
    EstimateFitOptions options;
    options.rounds = 12;
    const EstimateCalibration fit = fit_estimates(nets, options);
    for (KernelClass k : {KernelClass::conv_forward, KernelClass::elementwise}) check_fit_recovers(fit, truth, k, 1e-3);
    CHECK(!fit[KernelClass::gemm].fitted());  // never seen: not fitted
    // Per class, the profiled and estimated times added up: exact under the
    // truth, ops filed by their first kernel.
    const std::vector<ClassTotals> totals = class_totals(nets, truth);
    REQUIRE(totals.size() == 2);
    CHECK(totals[0].kind == KernelClass::conv_forward);
    CHECK(totals[0].ops == 45);
    CHECK(totals[1].kind == KernelClass::elementwise);
    CHECK(totals[1].ops == 15);
    double all_profiled = 0.0;
    for (const ClassTotals& t : totals) {
        CHECK(t.net == "made-up");
        CHECK(t.estimated_ns == doctest::Approx(t.profiled_ns));
        all_profiled += t.profiled_ns;
    }
    double profiled_sum = 0.0;
    for (const OpCost& c : profiled) profiled_sum += c.duration_ns();
    CHECK(all_profiled == doctest::Approx(profiled_sum));
    // Kernels launched, per class: the estimates' and the profile's agree
    // here (1 conv kernel on 45 ops, an elementwise one on 30 of the 60)...
    CHECK(totals[0].estimated_kernels == 45 + 15);
    CHECK(totals[0].profiled_kernels == totals[0].estimated_kernels);
    CHECK(totals[1].estimated_kernels == 15);
    CHECK(totals[1].profiled_kernels == 15);
    // ... until the profile shows a helper kernel the estimate does not know.
    nets[0].profiled[0].kernels.push_back(nets[0].profiled[0].kernels.front());
    const std::vector<ClassTotals> helper = class_totals(nets, truth);
    CHECK(helper[0].profiled_kernels == totals[0].profiled_kernels + 1);
    CHECK(helper[0].estimated_kernels == totals[0].estimated_kernels);
    CHECK(helper[1].profiled_kernels == 15);
    nets[0].profiled[0].kernels.pop_back();
    // A fit that doubles elementwise work shows there, and only there.
    EstimateCalibration off = truth;
    off[KernelClass::elementwise].scale *= 2.0;
    const std::vector<ClassTotals> skewed = class_totals(nets, off);
    CHECK(skewed[0].error_pct() > 0.0);  // conv ops carry elementwise kernels too
    CHECK(skewed[1].error_pct() > skewed[0].error_pct());
    // The profiled kernels' grids say how much of the GPU they hold: a fill
    // curve; a durations-only profile's stand-in shapes say nothing: none.
    CHECK(fit[KernelClass::conv_forward].fill_mid_ns > 0.0);
    nets[0].launch_shapes = false;
    const EstimateCalibration no_shapes = fit_estimates(nets, options);
    CHECK(no_shapes[KernelClass::conv_forward].fill_mid_ns == 0.0);
    CHECK(no_shapes[KernelClass::conv_forward].scale == fit[KernelClass::conv_forward].scale);
    nets[0].launch_shapes = true;

    nets[0].estimates->pop_back();
    CHECK(error_of([&] { (void)fit_estimates(nets); }) ==
          "fit_estimates: net 'made-up' has 59 op estimates but 60 profiled ops");
}

TEST_CASE("fit_estimates: kernels that name their engine family get that family's fit, the class's serves the rest") {
    const DeviceSpec& dev = find_device("h200");
    // Convolutions on two engines whose times per roofline nanosecond
    // differ fourfold, as cuDNN's legacy and tensor-core engines do on the H200.
    EstimateCalibration truth;
    truth.engine_fit(KernelClass::conv_forward, ConvEngineFamily::legacy) = {12.0, 2000, 0.6};
    truth.engine_fit(KernelClass::conv_forward, ConvEngineFamily::tensor_core) = {3.0, 1000, 0.75};
    OpGraphBuilder b;
    std::vector<OpEstimate> estimates;
    OpCosts profiled;
    for (int i = 0; i < 40; ++i) {
        b.add_op({"op" + std::to_string(i), OpKind::forward, "", {}, {b.add_buffer("b" + std::to_string(i), 64)}, 0});
        KernelEstimate conv = gemm_like(KernelClass::conv_forward, 1e7 * (1 + i * i), 200);
        conv.engine = i % 2 ? ConvEngineFamily::legacy : ConvEngineFamily::tensor_core;
        OpCost c;
        c.kernels.push_back(estimate_kernel(dev, conv, truth));
        profiled.push_back(c);
        estimates.push_back({{conv}, 0});
    }
    const OpGraph g = b.finalize();
    std::vector<ProfiledNet> nets = made_up_net(g, dev, profiled, estimates);
    EstimateFitOptions options;
    options.rounds = 3;
    const EstimateCalibration fit = fit_estimates(nets, options);
    for (ConvEngineFamily e : {ConvEngineFamily::legacy, ConvEngineFamily::tensor_core}) {
        CAPTURE(to_string(e));
        const KernelClassFit& got = fit.engine_fit(KernelClass::conv_forward, e);
        const KernelClassFit& want = truth.engine_fit(KernelClass::conv_forward, e);
        CHECK(got.floor_ns == doctest::Approx(want.floor_ns));
        CHECK(got.size_exponent == doctest::Approx(want.size_exponent));
        CHECK(got.scale == doctest::Approx(want.scale).epsilon(1e-6));
    }
    CHECK(!fit.engine_fit(KernelClass::conv_forward, ConvEngineFamily::simt).fitted());
    // Every op's time, exactly, where the engine is named.
    for (std::size_t i = 0; i < estimates.size(); ++i)
        CHECK(estimate_kernel(dev, estimates[i].kernels[0], fit).duration_ns ==
              doctest::Approx(profiled[i].duration_ns()).epsilon(1e-6));
    // Without it (a planner that does not know what cuDNN chose) the class's
    // fit applies: one curve between the two engines, the total right.
    const std::vector<OpEstimate> blind = without_engine_families(estimates);
    CHECK(fit.time_fit(KernelClass::conv_forward) == &fit[KernelClass::conv_forward]);
    double fitted_total = 0.0, blind_total = 0.0;
    for (std::size_t i = 0; i < estimates.size(); ++i) {
        CHECK(blind[i].kernels[0].engine == ConvEngineFamily::other);
        const double t = estimate_kernel(dev, blind[i].kernels[0], fit).duration_ns;
        CHECK(t == doctest::Approx(fit[KernelClass::conv_forward].time_ns(roofline_ns(dev, blind[i].kernels[0]), fit.reference_ns)));
        blind_total += t;
        fitted_total += profiled[i].duration_ns();
    }
    CHECK(blind_total == doctest::Approx(fitted_total).epsilon(1e-6));
    // Too few kernels of a family for a fit of their own: the class's only.
    options.min_engine_kernels = 21;
    const EstimateCalibration few = fit_estimates(nets, options);
    CHECK(!few.engine_fit(KernelClass::conv_forward, ConvEngineFamily::legacy).fitted());
    CHECK(few[KernelClass::conv_forward].fitted());
}

TEST_CASE("engine_families_from_profile: library kernels take the engine their profile ran, the trainer's own none") {
    auto named = [](std::initializer_list<std::pair<const char*, double>> kernels) {
        OpCost c;
        for (const auto& k : kernels) c.kernels.push_back({{k.first, {1, 1, 1}, {32, 1, 1}}, k.second, 0.0});
        return c;
    };
    KernelEstimate helper = gemm_like(KernelClass::reduction, 1e6, 10);
    helper.library_helper = true;
    std::vector<OpEstimate> estimates{
        {{gemm_like(KernelClass::conv_forward, 1e9, 100), gemm_like(KernelClass::elementwise, 0, 100)}, 0},
        {{gemm_like(KernelClass::conv_backward_weight, 1e9, 100), helper}, 0},
        {{gemm_like(KernelClass::gemm, 1e9, 100)}, 0},
        {{gemm_like(KernelClass::pooling_forward, 0, 100)}, 0},
    };
    const OpCosts profiled{
        named({{"cudnn::ops::nchwToNhwcKernel", 2000}, {"implicit_convolve_sgemm", 40000}, {"braid::bias_forward", 3000}}),
        named({{"sm90_xmma_wgrad_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc", 30000}, {"cudnn::reduce_wgrad_kernel", 900}}),
        named({{"cutlass_80_simt_sgemm_128x64_8x5_nn_align1", 5000}}),
        named({{"braid::max_pool_forward", 5000}}),
    };
    engine_families_from_profile(estimates, profiled);
    CHECK(estimates[0].kernels[0].engine == ConvEngineFamily::legacy);
    CHECK(estimates[0].kernels[1].engine == ConvEngineFamily::other);  // the bias kernel is braid's
    CHECK(estimates[1].kernels[0].engine == ConvEngineFamily::tensor_core);
    CHECK(estimates[1].kernels[1].engine == ConvEngineFamily::other);  // a helper has no engine fit
    CHECK(estimates[2].kernels[0].engine == ConvEngineFamily::simt);
    CHECK(estimates[3].kernels[0].engine == ConvEngineFamily::other);
    estimates.pop_back();
    CHECK(error_of([&] { engine_families_from_profile(estimates, profiled); }) ==
          "engine_families_from_profile: 3 op estimates but 4 profiled ops");
}

TEST_CASE("engine_families_from_choices: a backend's choice per op names its library kernels, not helpers or own ones") {
    KernelEstimate helper = gemm_like(KernelClass::reduction, 1e6, 10);
    helper.library_helper = true;
    std::vector<OpEstimate> estimates{
        {{gemm_like(KernelClass::conv_forward, 1e9, 100), gemm_like(KernelClass::elementwise, 0, 100)}, 0},
        {{gemm_like(KernelClass::conv_backward_data, 1e9, 100), helper}, 0},
        {{gemm_like(KernelClass::elementwise, 0, 100)}, 0},
    };
    // A stale name goes: the op the backend does not know is `other` again.
    estimates[2].kernels[0].engine = ConvEngineFamily::fft;
    const std::vector<ConvEngineFamily> chosen{ConvEngineFamily::tensor_core, ConvEngineFamily::winograd,
                                               ConvEngineFamily::legacy};
    engine_families_from_choices(estimates, chosen);
    CHECK(estimates[0].kernels[0].engine == ConvEngineFamily::tensor_core);
    CHECK(estimates[0].kernels[1].engine == ConvEngineFamily::other);
    CHECK(estimates[1].kernels[0].engine == ConvEngineFamily::winograd);
    CHECK(estimates[1].kernels[1].engine == ConvEngineFamily::other);
    CHECK(estimates[2].kernels[0].engine == ConvEngineFamily::other);  // the trainer's own kernel
    // With an engine fit, the named kernel takes its time; unnamed, the class's.
    EstimateCalibration c;
    c[KernelClass::conv_forward] = {1.0, 0.0, 1.0, 0.0, 1.0};
    c.engine_fit(KernelClass::conv_forward, ConvEngineFamily::tensor_core) = {0.25, 0.0, 1.0, 0.0, 1.0};
    const DeviceSpec dev = find_device("h200");
    const double named = estimate_costs(dev, estimates, c)[0].kernels[0].duration_ns;
    const double blind = estimate_costs(dev, without_engine_families(estimates), c)[0].kernels[0].duration_ns;
    CHECK(named == doctest::Approx(0.25 * blind));
    CHECK(error_of([&] { engine_families_from_choices(estimates, std::span(chosen).first(2)); }) ==
          "engine_families_from_choices: 3 op estimates but 2 engine choices");
}

TEST_CASE("attribute_kernels: own kernels beside a library call answer for their own profiled times") {
    auto kernel = [](KernelClass k) { return gemm_like(k, 1e8, 100); };
    auto profiled = [](std::vector<double> times) {
        OpCost c;
        for (double t : times) c.kernels.push_back({{}, t, 0.0});
        return c;
    };
    using detail::attribute_kernels;
    using G = std::tuple<std::size_t, std::size_t, double>;
    auto groups = [](const std::vector<detail::KernelGroup>& gs) {
        std::vector<G> out;
        for (const auto& g : gs) out.emplace_back(g.first, g.last, g.measured_ns);
        return out;
    };
    const KernelEstimate conv = kernel(KernelClass::conv_forward), bias = kernel(KernelClass::elementwise),
                         split = kernel(KernelClass::conv_backward_weight), grad = kernel(KernelClass::reduction);
    // A convolution and its bias; cuDNN added two layout transforms before
    // its kernel and one after: the bias kernel is the last launch.
    CHECK(groups(attribute_kernels(std::vector{conv, bias}, profiled({1, 2, 40, 3, 7}))) ==
          std::vector<G>{{0, 1, 46.0}, {1, 2, 7.0}});
    // Own kernels on both sides, a run of two library kernels (a weight
    // gradient and its split-K reduction) that launched exactly those.
    CHECK(groups(attribute_kernels(std::vector{bias, split, split, grad}, profiled({5, 30, 4, 6}))) ==
          std::vector<G>{{0, 1, 5.0}, {1, 3, 34.0}, {3, 4, 6.0}});
    // No library call, fewer profiled launches than estimated ones (the
    // profile is of other kernels), a run broken by an own kernel, or
    // per-image launches: the op's kernels share its whole time.
    CHECK(groups(attribute_kernels(std::vector{bias, grad}, profiled({5, 6, 7}))) == std::vector<G>{{0, 2, 18.0}});
    CHECK(groups(attribute_kernels(std::vector{conv, bias}, profiled({9}))) == std::vector<G>{{0, 2, 9.0}});
    CHECK(groups(attribute_kernels(std::vector{conv, bias, conv}, profiled({1, 2, 3}))) == std::vector<G>{{0, 3, 6.0}});
    // A weight gradient whose estimate adds a split-K reduction (a library
    // helper) before the trainer's bias gradient: the helper belongs to the
    // library's run, whether cuDNN launched one kernel or three.
    KernelEstimate helper = kernel(KernelClass::reduction);
    helper.library_helper = true;
    CHECK(groups(attribute_kernels(std::vector{split, helper, grad}, profiled({30, 6}))) ==
          std::vector<G>{{0, 2, 30.0}, {2, 3, 6.0}});
    CHECK(groups(attribute_kernels(std::vector{split, helper, grad}, profiled({2, 30, 4, 6}))) ==
          std::vector<G>{{0, 2, 36.0}, {2, 3, 6.0}});
    // The same reduction launched by the trainer is an own kernel after the run.
    CHECK(groups(attribute_kernels(std::vector{split, grad, grad}, profiled({30, 4, 6}))) ==
          std::vector<G>{{0, 1, 30.0}, {1, 2, 4.0}, {2, 3, 6.0}});
    OpCost per_image = profiled({1, 2, 3, 4});
    per_image.launches_per_image = 2;
    CHECK(groups(attribute_kernels(std::vector{conv, bias}, per_image)) == std::vector<G>{{0, 2, 10.0}});
    CHECK(attribute_kernels(std::vector<KernelEstimate>{}, profiled({})).size() == 1);
}

TEST_CASE("fit_estimates: a bias kernel beside a convolution the estimate misjudges keeps its own fit") {
    const DeviceSpec& dev = find_device("h200");
    // Every op is a convolution (a layout transform, then its kernel, taking
    // 1 to 4 times what the truth says: an engine the estimate cannot
    // know) and its bias kernel, which runs as the truth says.
    const EstimateCalibration truth = made_up_truth();
    OpGraphBuilder b;
    std::vector<OpEstimate> estimates;
    OpCosts profiled;
    for (int i = 0; i < 40; ++i) {
        b.add_op({"op" + std::to_string(i), OpKind::forward, "", {}, {b.add_buffer("b" + std::to_string(i), 64)}, 0});
        KernelEstimate bias = gemm_like(KernelClass::elementwise, 0, 500);
        bias.dram_bytes = 1e5 * (1 + i * i);
        OpEstimate e;
        e.kernels = {gemm_like(KernelClass::conv_forward, 1e7 * (1 + i), 200), bias};
        OpCost c;
        KernelCost transform = estimate_kernel(dev, bias, truth);
        c.kernels.push_back(transform);
        KernelCost main = estimate_kernel(dev, e.kernels[0], truth);
        main.duration_ns *= 1 + i % 4;
        c.kernels.push_back(main);
        c.kernels.push_back(estimate_kernel(dev, bias, truth));
        profiled.push_back(c);
        estimates.push_back(e);
    }
    const OpGraph g = b.finalize();
    std::vector<ProfiledNet> nets = made_up_net(g, dev, profiled, estimates);
    const EstimateCalibration fit = fit_estimates(nets);
    check_fit_recovers(fit, truth, KernelClass::elementwise);
    // The convolutions carry what the estimate missed, the transform included.
    double conv_profiled = 0.0, conv_fitted = 0.0;
    for (std::size_t i = 0; i < profiled.size(); ++i) {
        conv_profiled += profiled[i].kernels[0].duration_ns + profiled[i].kernels[1].duration_ns;
        conv_fitted += estimate_kernel(dev, estimates[i].kernels[0], fit).duration_ns;
    }
    CHECK(conv_fitted == doctest::Approx(conv_profiled).epsilon(1e-6));
}

TEST_CASE("fit_estimates: a library's split-K helper is charged its roofline time and teaches its class nothing") {
    const DeviceSpec& dev = find_device("h200");
    // Half the ops are the trainer's reductions, which run as the truth
    // says; the others a weight gradient estimated with a split-K
    // reduction, where the library ran one kernel that took three times
    // what the truth gives the two (an engine the estimate cannot know).
    EstimateCalibration truth = made_up_truth();
    truth[KernelClass::reduction] = {2.0, 1000, 0.8, 0, 1.0};
    OpGraphBuilder b;
    std::vector<OpEstimate> estimates;
    OpCosts profiled;
    for (int i = 0; i < 40; ++i) {
        b.add_op({"op" + std::to_string(i), OpKind::forward, "", {}, {b.add_buffer("b" + std::to_string(i), 64)}, 0});
        KernelEstimate reduce = gemm_like(KernelClass::reduction, 0, 100);
        reduce.dram_bytes = 2e5 * (1 + i * i);
        OpEstimate e;
        OpCost c;
        if (i % 2 == 0) {
            e.kernels = {reduce};
            c.kernels.push_back(estimate_kernel(dev, reduce, truth));
        } else {
            reduce.library_helper = true;
            e.kernels = {gemm_like(KernelClass::conv_backward_weight, 1e7 * (1 + i), 200), reduce};
            KernelCost run = estimate_kernel(dev, e.kernels[0], truth);
            run.duration_ns = 3.0 * (run.duration_ns + estimate_kernel(dev, reduce, truth).duration_ns);
            c.kernels.push_back(run);
        }
        profiled.push_back(c);
        estimates.push_back(e);
    }
    const OpGraph g = b.finalize();
    std::vector<ProfiledNet> nets = made_up_net(g, dev, profiled, estimates);
    const EstimateCalibration fit = fit_estimates(nets);
    check_fit_recovers(fit, truth, KernelClass::reduction);
    // The weight gradients carry what the estimate missed, helpers included.
    double wgrad_profiled = 0.0, wgrad_fitted = 0.0;
    for (std::size_t i = 1; i < profiled.size(); i += 2) {
        wgrad_profiled += profiled[i].duration_ns();
        for (const KernelEstimate& k : estimates[i].kernels) wgrad_fitted += estimate_kernel(dev, k, fit).duration_ns;
    }
    CHECK(wgrad_fitted == doctest::Approx(wgrad_profiled).epsilon(1e-6));
}

TEST_CASE("fit_simulator recovers the kernel time scale and constants that made the measured rows") {
    braid::testing::TestGraph t = braid::testing::inception_like(4);
    std::vector<ProfiledNet> nets{profiled_net("inception_like", t)};

    // "Measured" = simulated with known constants.
    Calibration truth;
    truth.graph_kernel_time_scale = 0.9;
    truth.sim.dispatch_latency_ns = 2000;
    truth.sim.corun_slowdown = 0.6;
    std::vector<CalibrationRow> rows;
    for (const Plan& plan : {strategy::serial(t.graph, "h200"), strategy::nimble(t.graph, "h200")}) {
        CalibrationRow r;
        r.label = plan.strategy;
        r.plan = plan;
        r.mode = LaunchMode::graph;
        r.measured_ms = {1.0};
        rows.push_back(r);
    }
    for (CalibrationRow& r : rows) {
        const auto p = predict_rows(nets, std::span<const CalibrationRow>(&r, 1), truth, CostSource::profile);
        r.measured_ms = {p[0].predicted_ms * 0.999, p[0].predicted_ms, p[0].predicted_ms * 1.001};
    }
    SimFitOptions options;
    options.rounds = 6;  // narrower brackets than the default: the truth is exactly reachable here
    const Calibration fit = fit_simulator(nets, rows, Calibration{}, {}, options);
    for (const RowPrediction& p : predict_rows(nets, rows, fit, CostSource::profile))
        CHECK(std::abs(p.error_pct()) < 0.5);
    CHECK(fit.graph_kernel_time_scale == doctest::Approx(0.9).epsilon(0.02));
}

TEST_CASE("fit_simulator: a net without fitted rows leaves the host's cost alone, and so do graph rows alone") {
    braid::testing::TestGraph t = braid::testing::inception_like(4);
    double kernel_ns = 0.0;
    std::size_t launches = 0;
    for (const OpCost& op : t.costs)
        for (const KernelCost& k : op.kernels) kernel_ns += k.duration_ns, ++launches;
    // Two profiled nets whose own runs were host-bound (each launch cost the
    // host far more than its kernel took); only the first has rows.
    std::vector<ProfiledNet> nets(2);
    for (std::size_t n = 0; n < 2; ++n) {
        nets[n] = profiled_net(n == 0 ? "fitted" : "held_out", t);
        nets[n].profiled_iteration_ns = kernel_ns + 20000.0 * static_cast<double>(launches);
    }
    auto rows_of = [&](std::initializer_list<LaunchMode> modes) {
        std::vector<CalibrationRow> rows;
        for (LaunchMode mode : modes) {
            CalibrationRow r;
            r.label = std::string("serial ") + std::string(to_string(mode));
            r.plan = strategy::serial(t.graph, "h200");
            r.mode = mode;
            r.measured_ms = {(kernel_ns + (mode == LaunchMode::eager ? 15000.0 * static_cast<double>(launches) : 0.0)) / 1e6};
            rows.push_back(r);
        }
        return rows;
    };
    SimFitOptions quick;
    quick.sweeps = 1;
    quick.rounds = 1;
    quick.points = 3;

    const std::vector<CalibrationRow> both = rows_of({LaunchMode::graph, LaunchMode::eager});
    const Calibration fit = fit_simulator(nets, both, Calibration{}, {}, quick);
    REQUIRE(fit.cupti_host_scale > 0.0);
    CHECK(fit.sim.launch_latency_ns > 0.0);
    // The held-out net's profiled run changes nothing of the fit.
    std::vector<ProfiledNet> other = nets;
    other[1].profiled_iteration_ns *= 10.0;
    const Calibration refit = fit_simulator(other, both, Calibration{}, {}, quick);
    CHECK(refit.sim.launch_latency_ns == fit.sim.launch_latency_ns);
    CHECK(refit == fit);

    // Graph rows say nothing of the host's cost per eager launch: the start's stays.
    Calibration start;
    start.sim.launch_latency_ns = 4321.0;
    const Calibration graph_only = fit_simulator(nets, rows_of({LaunchMode::graph}), start, {}, quick);
    CHECK(graph_only.cupti_host_scale == 0.0);
    CHECK(graph_only.sim.launch_latency_ns == 4321.0);

    quick.points = 1;
    CHECK(error_of([&] { (void)fit_simulator(nets, both, Calibration{}, {}, quick); })
              .find("needs at least 2 points per dimension, got 1") != std::string::npos);
}

TEST_CASE("timed op bodies: profiles predict eager runs with them, and fits learn their scale and a host time per class") {
    braid::testing::TestGraph t = braid::testing::inception_like(4);
    const DeviceSpec& dev = find_device("h200");
    // The profiled run timed every body: "convolutions" (odd ops) cost the
    // host 40 us under CUPTI, the others 10 us, far more than their kernels.
    std::vector<ProfiledNet> nets{profiled_net("timed", t)};
    std::vector<OpEstimate> estimates(t.costs.size());
    for (std::size_t i = 0; i < t.costs.size(); ++i) {
        const bool conv = i % 2 == 1;
        nets[0].profiled[i].host_ns = conv ? 40000.0 : 10000.0;
        for (KernelCost& k : nets[0].profiled[i].kernels) k.duration_ns = 1000.0;
        estimates[i].kernels.push_back(gemm_like(conv ? KernelClass::conv_forward : KernelClass::elementwise, 1e8, 200));
    }
    nets[0].estimates = estimates;
    nets[0].profiled_iteration_ns = 1e9;  // the profiled run's length says nothing more: its bodies were timed
    CHECK(profiled_launch_ns(t.graph, dev, nets[0].profiled, nets[0].profiled_iteration_ns, sim::Params{}) == 0.0);
    // Without timed bodies, a profiled run far longer than its launches could take gets the
    // longest launch the simulator accepts, not an error about sim::Params.
    OpCosts untimed = nets[0].profiled;
    for (OpCost& op : untimed) op.host_ns = -1.0;
    const double longest = profiled_launch_ns(t.graph, dev, untimed, 9e11, sim::Params{});
    CHECK(longest == sim::most_latency_ns);
    CHECK(profiled_launch_ns(t.graph, dev, untimed, 1e6, sim::Params{}) < longest);

    // "Measured": a plain run costs the host 0.6 of what CUPTI saw.
    const CalibrationRow row = serial_eager_row(t, nets, 0.6);
    const double predicted = row.measured_ms.front();
    double host_ms = 0.0;
    for (const OpCost& op : nets[0].profiled) host_ms += 0.6 * op.host_ns / 1e6;
    CHECK(predicted >= host_ms);  // host-bound: every body's time, scaled
    CHECK(predicted < host_ms * 1.2);

    SimFitOptions options;
    options.rounds = 6;
    const Calibration fit = fit_simulator(nets, std::span<const CalibrationRow>(&row, 1), Calibration{}, {}, options);
    CHECK(fit.cupti_host_scale == doctest::Approx(0.6).epsilon(0.03));
    CHECK(fit.estimate[KernelClass::conv_forward].host_ns == doctest::Approx(40000.0 * fit.cupti_host_scale));
    CHECK(fit.estimate[KernelClass::elementwise].host_ns == doctest::Approx(10000.0 * fit.cupti_host_scale));
    CHECK(fit.estimate[KernelClass::gemm].host_ns < 0.0);
    // Estimated ops take their class's host time (GEMMs conv_forward's, by fallback).
    const OpCosts est = estimate_costs(dev, estimates, fit.estimate);
    CHECK(est[1].host_ns == fit.estimate[KernelClass::conv_forward].host_ns);
    CHECK(est[0].host_ns == fit.estimate[KernelClass::elementwise].host_ns);
    CHECK(fit.estimate.host_ns(KernelClass::gemm) == fit.estimate[KernelClass::conv_forward].host_ns);
    // They survive the file.
    Calibration file = sample_calibration();
    file.estimate = fit.estimate;
    CHECK(calibration_from_json(nlohmann::json::parse(to_json(file).dump())) == file);
    CHECK(error_of([&] {
              (void)calibration_from_json(
                  with(to_json(file), nlohmann::json::json_pointer("/estimates/classes/conv_forward/host_ns"), -5));
          }).find("$.estimates.classes.conv_forward.host_ns: must be between 0 and") != std::string::npos);
}

TEST_CASE("timed op bodies per engine family: an estimate that names its engine takes that engine's host time") {
    braid::testing::TestGraph t = braid::testing::inception_like(4);
    const DeviceSpec& dev = find_device("h200");
    // "Convolutions" (odd ops) on tensor-core engines cost the host 60 us a
    // body under CUPTI, on legacy engines 30 us; the other ops 10 us.
    auto engine_of = [](std::size_t i) { return i % 4 == 1 ? ConvEngineFamily::tensor_core : ConvEngineFamily::legacy; };
    auto host_of = [&](std::size_t i) {
        return i % 2 == 0 ? 10000.0 : engine_of(i) == ConvEngineFamily::tensor_core ? 60000.0 : 30000.0;
    };
    std::vector<ProfiledNet> nets{profiled_net("timed", t)};
    std::vector<OpEstimate> estimates(t.costs.size());
    for (std::size_t i = 0; i < t.costs.size(); ++i) {
        const bool conv = i % 2 == 1;
        nets[0].profiled[i].host_ns = host_of(i);
        for (KernelCost& k : nets[0].profiled[i].kernels) k.duration_ns = 1000.0;
        estimates[i].kernels.push_back(gemm_like(conv ? KernelClass::conv_forward : KernelClass::elementwise, 1e8, 200));
        if (conv) estimates[i].kernels.back().engine = engine_of(i);
    }
    nets[0].estimates = estimates;
    nets[0].profiled_iteration_ns = 1e9;
    const CalibrationRow row = serial_eager_row(t, nets, 0.6);
    SimFitOptions options;
    options.rounds = 6;
    const Calibration fit = fit_simulator(nets, std::span<const CalibrationRow>(&row, 1), Calibration{}, {}, options);
    const double scale = fit.cupti_host_scale;
    CHECK(scale == doctest::Approx(0.6).epsilon(0.03));
    const EstimateCalibration& e = fit.estimate;
    CHECK(e.engine_fit(KernelClass::conv_forward, ConvEngineFamily::tensor_core).host_ns == doctest::Approx(60000.0 * scale));
    CHECK(e.engine_fit(KernelClass::conv_forward, ConvEngineFamily::legacy).host_ns == doctest::Approx(30000.0 * scale));
    CHECK(e.engine_fit(KernelClass::conv_forward, ConvEngineFamily::simt).host_ns < 0.0);  // no op ran on it
    CHECK(!e.engine_fit(KernelClass::conv_forward, ConvEngineFamily::tensor_core).fitted());  // the host time alone
    // The class's is the mean over its ops, whatever their engines.
    double conv_host = 0.0, conv_ops = 0.0;
    for (std::size_t i = 1; i < t.costs.size(); i += 2) conv_host += host_of(i), conv_ops += 1.0;
    CHECK(e[KernelClass::conv_forward].host_ns == doctest::Approx(scale * conv_host / conv_ops));
    CHECK(e[KernelClass::elementwise].host_ns == doctest::Approx(10000.0 * scale));

    // Estimated bodies cost what their engine's did; an estimate that names
    // no engine takes its class's.
    const OpCosts est = estimate_costs(dev, estimates, e);
    for (std::size_t i = 0; i < est.size(); ++i) CHECK(est[i].host_ns == doctest::Approx(scale * host_of(i)));
    const OpCosts blind = estimate_costs(dev, without_engine_families(estimates), e);
    CHECK(blind[1].host_ns == e[KernelClass::conv_forward].host_ns);

    // Host-only engine fits survive the file; a time fit comes whole.
    Calibration file = sample_calibration();
    file.estimate = e;
    const nlohmann::json j = to_json(file);
    CHECK(calibration_from_json(nlohmann::json::parse(j.dump())) == file);
    nlohmann::json partial = j;
    nlohmann::json& first = partial["estimates"]["engines"][0];
    first.erase("host_ns");
    first["scale"] = 2.0;
    CHECK(error_of([&] { (void)calibration_from_json(partial); }) ==
          "$.estimates.engines[0]: an engine fit's time needs 'floor_ns' too");
    first.erase("scale");
    CHECK(error_of([&] { (void)calibration_from_json(partial); }) ==
          "$.estimates.engines[0]: an engine fit needs scale, floor_ns and size_exponent, or host_ns");
}
