// braid-calibrate: fits a GPU's calibration (docs/calibration.md) from what
// it measured — profiles of bundled networks (per-class kernel times for
// estimates) and measured iteration times of plans (the simulator's
// constants) — writes it as a calibration file braid-plan and braid-train
// load with --calibration, and prints how well it predicts every row.
#include <cstdio>
#include <exception>
#include <type_traits>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include "braid/planner/calibration_json.hpp"
#include "train/calibration_run.hpp"
#include "vocabulary.hpp"

namespace {

struct Options {
    std::vector<std::string> files;
    std::string out = "calibration.json";
    std::string hold_out;
    std::string format = "table";
    std::string cpp_out;
};

// The calibration as the body of a C++ function, for
// include/braid/planner/calibration_table.hpp (exact doubles).
std::string as_cpp(const braid::Calibration& c) {
    auto num = [](double v) { return fmt::format("{:.17g}", v); };
    // A C++ string literal: quotes, backslashes and control bytes escaped (octal).
    auto text = [](const std::string& v) {
        std::string out = "\"";
        for (const char ch : v) {
            const auto u = static_cast<unsigned char>(ch);
            if (ch == '"' || ch == '\\') out += '\\', out += ch;
            else if (u < 0x20 || u == 0x7f) out += fmt::format("\\{:03o}", u);
            else out += ch;
        }
        return out + "\"";
    };
    std::string s;
    s += fmt::format("    Calibration c;\n    c.device_key = {};\n    c.device_name = {};\n", text(c.device_key),
                     text(c.device_name));
    s += fmt::format("    c.sm_count = {};\n    c.cc_major = {};\n    c.cc_minor = {};\n", c.sm_count, c.cc_major, c.cc_minor);
    s += fmt::format("    c.source = {};\n", text(c.source));
    s += fmt::format("    c.graph_kernel_time_scale = {};\n    c.eager_kernel_time_scale = {};\n    c.cupti_host_scale = {};\n",
                     num(c.graph_kernel_time_scale), num(c.eager_kernel_time_scale), num(c.cupti_host_scale));
    braid::sim::Params p = c.sim;
    braid::detail::for_each_param(p, [&](const char* name, auto& value) {
        using T = std::remove_reference_t<decltype(value)>;
        if constexpr (std::is_same_v<T, bool>)
            s += fmt::format("    c.sim.{} = {};\n", name, value ? "true" : "false");
        else if constexpr (std::is_integral_v<T>)
            s += fmt::format("    c.sim.{} = {};\n", name, value);
        else
            s += fmt::format("    c.sim.{} = {};\n", name, num(value));
    });
    s += fmt::format("    c.estimate.reference_ns = {};\n", num(c.estimate.reference_ns));
    for (braid::KernelClass k : braid::all_kernel_classes) {
        const braid::KernelClassFit& f = c.estimate[k];
        if (f == braid::KernelClassFit{}) continue;  // what to_json leaves out too
        s += fmt::format("    c.estimate[KernelClass::{}] = {{{}, {}, {}, {}, {}{}}};\n", braid::to_string(k), num(f.scale),
                         num(f.floor_ns), num(f.size_exponent), num(f.fill_mid_ns), num(f.fill_width),
                         f.host_ns >= 0.0 ? ", " + num(f.host_ns) : std::string());
    }
    for (braid::KernelClass k : braid::all_kernel_classes)
        for (braid::ConvEngineFamily e : braid::all_engine_families) {
            const braid::KernelClassFit& f = c.estimate.engine_fit(k, e);
            if (f == braid::KernelClassFit{}) continue;  // what to_json leaves out too
            s += fmt::format("    c.estimate.engine_fit(KernelClass::{}, ConvEngineFamily::{}) = {{{}, {}, {}, 0, 1{}}};\n",
                             braid::to_string(k), braid::to_string(e), num(f.scale), num(f.floor_ns),
                             num(f.size_exponent), f.host_ns >= 0.0 ? ", " + num(f.host_ns) : std::string());
        }
    s += "    return c;\n";
    return s;
}

nlohmann::json report_json(const std::vector<braid::samples::AccuracyRow>& rows, bool held_out) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : rows) {
        nlohmann::json j{{"net", r.net},       {"plan", r.label},          {"mode", r.mode},
                         {"streams", r.streams}, {"measured_ms", r.measured_ms}, {"profile_ms", r.profile_ms},
                         {"profile_error_pct", r.profile_error_pct()}, {"held_out", held_out}};
        if (r.estimate_ms) {
            j["estimate_ms"] = *r.estimate_ms;
            j["estimate_error_pct"] = *r.estimate_error_pct();
        }
        out.push_back(j);
    }
    return out;
}

int run(const Options& o) {
    // Before the fit, which takes minutes on a full data set.
    if (const std::string why = braid::cli::output_path_problem("--calibration-out", o.out, true); !why.empty())
        throw braid::Error(why);
    if (!o.cpp_out.empty())
        if (const std::string why = braid::cli::output_path_problem("--cpp-out", o.cpp_out); !why.empty())
            throw braid::Error(why);
    // Each output against the other and every input (an input given twice is read_calibration_inputs' to refuse).
    std::vector<std::pair<std::string, std::string>> outputs{{"--calibration-out", o.out}};
    if (!o.cpp_out.empty()) outputs.emplace_back("--cpp-out", o.cpp_out);
    if (const std::string why = braid::cli::same_file_problem(outputs); !why.empty()) throw braid::Error(why);
    for (const std::string& f : o.files) {
        std::vector<std::pair<std::string, std::string>> paths = outputs;
        paths.emplace_back("input '" + f + "'", f);
        if (const std::string why = braid::cli::same_file_problem(paths); !why.empty()) throw braid::Error(why);
    }
    std::vector<std::string> notes;
    const braid::CalibrationInputs in = braid::samples::read_calibration_inputs(o.files, &notes);
    for (const std::string& n : notes) fmt::print(stderr, "note: {}\n", n);
    std::vector<std::string> fit_groups, test_groups;
    if (!o.hold_out.empty()) {
        try {
            fit_groups = braid::samples::groups_without(in, o.hold_out);
        } catch (const braid::Error& e) {
            throw braid::Error(std::string("--hold-out: ") + e.what());
        }
        test_groups = {o.hold_out};
    }
    if (o.format == "table")
        fmt::print("braid-calibrate: fitting on {} rows of {} profiled nets{}\n", in.rows.size(), in.nets.size(),
                   o.hold_out.empty() ? "" : " (without " + o.hold_out + ")");
    const braid::Calibration c = braid::samples::fit_calibration(in, fit_groups);
    const std::vector<braid::samples::AccuracyRow> fitted = braid::samples::accuracy_rows(in, c, fit_groups);
    const std::vector<braid::samples::AccuracyRow> held =
        test_groups.empty() ? std::vector<braid::samples::AccuracyRow>{} : braid::samples::accuracy_rows(in, c, test_groups);
    nlohmann::json report{{"fitted", report_json(fitted, false)}};
    if (!held.empty()) report["held_out"] = report_json(held, true);
    std::vector<braid::detail::FileToWrite> files{{"--calibration-out", o.out, braid::calibration_file_text(c, report)}};
    if (!o.cpp_out.empty()) files.push_back({"--cpp-out", o.cpp_out, as_cpp(c)});
    braid::detail::write_files(files);
    if (o.format == "json") {
        nlohmann::json j = braid::to_json(c);
        j["report"] = report;
        j["written"] = o.out;
        fmt::print("{}\n", j.dump(2));
        return 0;
    }
    fmt::print("\n  fitted rows (predicted with this calibration):\n{}", braid::samples::format_accuracy(fitted));
    if (!held.empty())
        fmt::print("\n  held-out rows ({}, not seen by the fit):\n{}", o.hold_out, braid::samples::format_accuracy(held));
    fmt::print("\n  kernel time in an iteration / in the profile: graph {:.3f}, eager {:.3f}; host time per launch, "
               "plain run / profiled run: {:.3f}\n",
               c.graph_kernel_time_scale, c.eager_kernel_time_scale, c.cupti_host_scale);
    fmt::print("  simulator: dispatch {:.0f} ns (+{:.0f} ns eager), event latency {:.0f} ns, co-run slowdown {:.3f},\n"
               "             launch {:.0f} ns, op host {:.0f} ns, record {:.0f} ns, wait {:.0f} ns\n",
               c.sim.dispatch_latency_ns, c.sim.eager_dispatch_extra_ns, c.sim.event_latency_ns, c.sim.corun_slowdown,
               c.sim.launch_latency_ns, c.sim.op_host_ns, c.sim.record_latency_ns, c.sim.wait_latency_ns);
    fmt::print("  estimates (scale, floor ns, size exponent, GPU share at half-fill ns; host ns per op body, where "
               "fitted) per kernel class and (class, engine family):\n");
    for (braid::KernelClass k : braid::all_kernel_classes) {
        const braid::KernelClassFit& f = c.estimate[k];
        if (f.fitted() || f.host_ns >= 0.0)
            fmt::print("    {:<36} {:>7.3f} {:>7.0f} {:>6.2f} {:>9.0f}{}\n", braid::to_string(k), f.scale, f.floor_ns,
                       f.size_exponent, f.fill_mid_ns, f.host_ns >= 0.0 ? fmt::format(" {:>9.0f}", f.host_ns) : "");
    }
    for (braid::KernelClass k : braid::all_kernel_classes)
        for (braid::ConvEngineFamily e : braid::all_engine_families)
            if (const braid::KernelClassFit& f = c.estimate.engine_fit(k, e); f.fitted() || f.host_ns >= 0.0)
                fmt::print("    {:<36} {:>7.3f} {:>7.0f} {:>6.2f} {:>9}{}\n",
                           fmt::format("{} on {}", braid::to_string(k), braid::to_string(e)), f.scale, f.floor_ns,
                           f.size_exponent, "", f.host_ns >= 0.0 ? fmt::format(" {:>9.0f}", f.host_ns) : "");
    fmt::print("\n  calibration: {}  (braid-plan --calibration {})\n", o.out, o.out);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    CLI::App app{"braid-calibrate: fit a GPU's calibration from its profiles and measured iterations "
                 "(docs/calibration.md)",
                 "braid-calibrate"};
    app.footer(
        "\nExamples:\n"
        "  braid-calibrate tests/data/h200/measurements.json            fit the H200 data set\n"
        "  braid-calibrate measurements.json --hold-out resnet50         fit without ResNet-50, predict it\n"
        "  braid-calibrate googlenet.profile.json resnet50.profile.json  estimates only (profiles of bundled nets)\n");
    app.add_option("files", o.files,
                   "braid.measurements files (measured plans with their profiles) and braid.profile files")
        ->required();
    app.add_option("-o,--calibration-out", o.out, "where the calibration is written")->capture_default_str();
    app.add_option("--hold-out", o.hold_out, "fit without this network's rows and profiles, then predict them");
    app.add_option("--cpp-out", o.cpp_out, "also write the calibration as a C++ function body (for braid's built-in table)")
        ->group("");
    app.add_option("--format", o.format, "table (for people) or json (for scripts)")
        ->check(CLI::IsMember({"table", "json"}))
        ->capture_default_str();
    try {
        braid::cli::refuse_empty_values(app);
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }
    try {
        return run(o);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "braid-calibrate: error: %s\n", e.what());
        return 1;
    }
}
