// braid-measure: measures the plans of a measurements file (docs/formats.md,
// braid.measurements) again on this GPU, interleaved and with repeats, and
// writes the file anew with the fresh times: what braid-calibrate fits on.
// Or, with --profiles, measures a fresh data set for profiles braid-profile
// wrote with the code at hand: for each, the serial and nimble plans and the
// plan braid-profile wrote beside it (NAME.plan.json for NAME.profile.json),
// in graph and eager mode, and in graph mode nimble's chains with the
// critical path's chains urgent (NAME.nimble-critical-path.plan.json,
// written beside the output). Rows of one network and launch mode are timed
// together, round after round in rotating order (A B C, B C A, ...), so
// drift and noise fall on every plan alike. Each row must name its bundled
// network ("network").
#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include "braid/cuda/device.hpp"
#include "braid/plan/plan_json.hpp"
#include "braid/planner/strategies/nimble.hpp"
#include "braid/planner/strategies/serial.hpp"
#include "braid/profiler/costs.hpp"
#include "braid/profiler/measurements.hpp"
#include "cuda/cuda_trainer.hpp"
#include "cuda/gpu_program.hpp"
#include "train/net_settings.hpp"
#include "train/training_graph.hpp"
#include "vocabulary.hpp"

namespace {

struct Options {
    std::string in;                     // a measurements file to measure again, or
    std::vector<std::string> profiles;  // the profiles of a fresh data set
    std::string out = "measurements.json";
    std::uint32_t rounds = 10;
};

// `path` as a file in `folder` names it.
std::string relative_to(const std::string& path, const std::filesystem::path& folder) {
    const std::filesystem::path base = std::filesystem::absolute(folder.empty() ? std::filesystem::path(".") : folder);
    return std::filesystem::absolute(path).lexically_normal().lexically_relative(base.lexically_normal()).generic_string();
}

// A plan braid-measure makes for a fresh data set, written once every row
// has passed its checks.
struct MadePlan {
    std::string profile;  // the profile it was made from
    std::string text;     // the plan file
};
using MadePlans = std::map<std::filesystem::path, MadePlan>;  // by absolute path

std::filesystem::path absolute_path(const std::filesystem::path& p) { return std::filesystem::absolute(p).lexically_normal(); }

// The rows of a fresh data set (no times yet), files named relative to the
// output's folder; the plans it makes go to `made`.
braid::MeasurementSet fresh_rows(const Options& o, MadePlans& made) {
    braid::MeasurementSet m;
    m.folder = std::filesystem::path(o.out).parent_path();
    std::set<std::string> seen;
    for (const std::string& p : o.profiles) {
        if (!seen.insert(relative_to(p, m.folder)).second) throw braid::Error("--profiles lists '" + p + "' twice");
        const braid::Profile profile = braid::load_profile(p);
        if (m.device_key.empty()) m.device_key = profile.device.key;  // what the serial and nimble plans are for
        if (m.device_name.empty()) m.device_name = profile.device.name;
        if (profile.device.key != m.device_key)
            throw braid::Error("--profiles: '" + p + "' ran on " + profile.device.name + ", '" + o.profiles.front() +
                               "' on " + m.device_name + ": one data set is of one GPU");
        const std::string suffix = ".profile.json";
        std::optional<std::string> plan;
        if (p.size() > suffix.size() && p.ends_with(suffix)) {
            const std::string beside = p.substr(0, p.size() - suffix.size()) + ".plan.json";
            if (std::filesystem::exists(beside)) plan = relative_to(beside, m.folder);
        }
        for (braid::MeasuredRow& r : braid::rows_to_measure(relative_to(p, m.folder), profile, plan))
            m.rows.push_back(std::move(r));
        fmt::print("braid-measure: {}: serial, nimble{}, graph and eager\n", p,
                   plan ? " and " + *plan : " (no plan file beside it)");
        // Nimble's chains with the critical path's chains urgent, in graph
        // mode, timed beside plain nimble: whether stream priorities pay in
        // a captured graph (the shipped H200 data set's ResNet-50 b8 braid
        // plan was these chains with these priorities and took 11.45 ms,
        // nimble's 9.46; docs/calibration.md).
        if (profile.graph) {
            const std::string name = std::filesystem::path(p).filename().string();
            const std::string stem = name.ends_with(suffix) ? name.substr(0, name.size() - suffix.size()) : name;
            const std::filesystem::path file = m.folder / (stem + ".nimble-critical-path.plan.json");
            braid::Plan urgent;
            try {
                urgent = braid::strategy::nimble_critical_path(
                    *profile.graph, braid::costs_from_profile(profile, *profile.graph, profile.device),
                    profile.device.key);
            } catch (const std::exception& e) {
                throw braid::Error("profile '" + p + "': " + e.what());
            }
            const auto [at, fresh] = made.try_emplace(absolute_path(file), MadePlan{p, braid::plan_file_text(urgent, *profile.graph)});
            if (!fresh)
                throw braid::Error("--profiles: '" + at->second.profile + "' and '" + p + "' would both make the plan '" +
                                   file.string() + "'; give the profiles different file names");
            m.rows.push_back({"nimble-critical-path", relative_to(p, m.folder), relative_to(file.string(), m.folder),
                              braid::LaunchMode::graph, {}, profile.run.settings});
            fmt::print("braid-measure: {}: and {}, graph mode\n", p, file.string());
        }
    }
    return m;
}

// The plan a row names, for the graph braid builds for its network: read
// from its file, or from `made` before that file is written.
braid::Plan row_plan(const braid::MeasurementSet& m, const braid::MeasuredRow& row, const braid::OpGraph& g,
                     const MadePlans& made) {
    if (row.plan == "serial") return braid::strategy::serial(g, m.device_key);
    if (row.plan == "nimble") return braid::strategy::nimble(g, m.device_key);
    const std::filesystem::path file = m.folder / row.plan;
    if (const auto it = made.find(absolute_path(file)); it != made.end()) {
        braid::Plan plan = braid::plan_from_json(nlohmann::json::parse(it->second.text), g, file.string());
        braid::validate(plan, g);
        return plan;
    }
    return braid::load_plan(file.string(), g);
}

// Rows of one network (its kernel settings included) and launch mode: they
// share a training graph and a timing source, and are timed together.
struct Group {
    braid::samples::NetConfig net;
    braid::samples::TrainingGraph tg;
    bool graph_mode = true;
    braid::samples::KernelSettings kernels;
    std::vector<std::size_t> rows;
    std::vector<braid::TuneCandidate> candidates;
};

struct Work {
    braid::MeasurementSet m;
    std::vector<Group> groups;
};

// The rows to measure, grouped, each with its plan loaded against the graph
// braid builds for its network: every check before any GPU time is spent
// (without a GPU too), each error naming the row.
Work work_of(const Options& o) {
    const std::filesystem::path out_folder = std::filesystem::path(o.out).parent_path();
    const std::string where = out_folder.empty() ? std::string(".") : out_folder.string();
    if (!std::filesystem::is_directory(where))
        throw braid::Error("--measurements-out '" + o.out + "': no folder '" + where + "' to write it in");
    if (std::filesystem::is_directory(o.out)) throw braid::Error("--measurements-out '" + o.out + "' is a folder");
    if (::access(where.c_str(), W_OK) != 0 || (std::filesystem::exists(o.out) && ::access(o.out.c_str(), W_OK) != 0))
        throw braid::Error("--measurements-out '" + o.out + "': not writable");
    Work w;
    MadePlans made;
    w.m = o.profiles.empty() ? braid::load_measurements(o.in) : fresh_rows(o, made);
    // Files are named relative to the file written, wherever the input was.
    for (braid::MeasuredRow& row : w.m.rows) {
        row.profile = relative_to((w.m.folder / row.profile).string(), out_folder);
        if (row.plan != "serial" && row.plan != "nimble") row.plan = relative_to((w.m.folder / row.plan).string(), out_folder);
    }
    w.m.folder = out_folder;
    // The file written must not be one that is read: the measurements, a profile, a plan.
    std::vector<std::pair<std::string, std::string>> inputs;
    if (!o.in.empty()) inputs.emplace_back("the measurements file", o.in);
    for (const braid::MeasuredRow& row : w.m.rows) {
        inputs.emplace_back("profile '" + row.profile + "'", (w.m.folder / row.profile).string());
        if (row.plan != "serial" && row.plan != "nimble")
            inputs.emplace_back("plan '" + row.plan + "'", (w.m.folder / row.plan).string());
    }
    for (const auto& input : inputs)
        if (const std::string why = braid::cli::same_file_problem({{"--measurements-out", o.out}, input}); !why.empty())
            throw braid::Error(why);
    // Nor may a plan it makes land on a file it reads (a link named like the plan, to a profile).
    for (const auto& [path, plan] : made)
        for (const auto& input : inputs)
            if (absolute_path(input.second) != path)
                if (const std::string why = braid::cli::same_file_problem(
                        {{"the plan made from '" + plan.profile + "'", path.string()}, input});
                    !why.empty())
                    throw braid::Error(why);
    // Each profile once: the graph braid builds today must be the one it ran, with the kernels the rows name, on one GPU.
    std::map<std::string, std::string> profiles;  // file -> its device
    for (std::size_t i = 0; i < w.m.rows.size(); ++i) {
        const braid::MeasuredRow& row = w.m.rows[i];
        if (profiles.contains(row.profile)) continue;
        const std::string who = "measurements row " + std::to_string(i) + " ('" + row.label + "')";
        const std::string file = (w.m.folder / row.profile).string();
        try {
            const braid::Profile p = braid::load_profile(file);
            if (!p.graph) throw braid::Error("the profile has no embedded graph; profile again");
            if (!row.network.empty() && !braid::samples::net_estimates(row.network, *p.graph))
                throw braid::Error("its network settings name no bundled network");
            const braid::samples::KernelSettings ran = braid::samples::kernel_settings_from(p.run.settings),
                                                 asked = braid::samples::kernel_settings_from(row.network);
            if (ran != asked)
                throw braid::Error("its kernel settings (" + to_string(asked) + ") are not the ones profile '" +
                                   file + "' ran with (" + to_string(ran) + ")");
            if (!profiles.empty() && profiles.begin()->second != p.device.name)
                throw braid::Error("profile '" + file + "' ran on '" + p.device.name + "', profile '" +
                                   profiles.begin()->first + "' on '" + profiles.begin()->second +
                                   "': a data set is of one GPU");
            profiles.emplace(row.profile, p.device.name);
        } catch (const std::exception& e) {
            throw braid::Error(who + ": " + e.what());
        }
    }
    std::map<std::tuple<std::string, bool>, std::size_t> index;
    for (std::size_t i = 0; i < w.m.rows.size(); ++i) {
        const braid::MeasuredRow& row = w.m.rows[i];
        const std::string who = "measurements row " + std::to_string(i) + " ('" + row.label + "')";
        if (row.network.empty())
            throw braid::Error(who + " names no bundled network: braid-measure cannot rebuild its training step");
        try {
            const bool graph_mode = row.mode == braid::LaunchMode::graph;
            auto [it, fresh] =
                index.try_emplace({braid::detail::settings_json(row.network).dump(), graph_mode}, w.groups.size());
            if (fresh) {
                braid::samples::TrainConfig tc;
                tc.model = braid::samples::net_config_from_settings(row.network).value();
                w.groups.push_back({tc.model, braid::samples::build_training_graph(tc), graph_mode,
                                    braid::samples::kernel_settings_from(row.network), {}, {}});
            }
            Group& g = w.groups[it->second];
            g.candidates.push_back({row.label, row_plan(w.m, row, g.tg.graph, made)});
            g.rows.push_back(i);
        } catch (const std::exception& e) {
            throw braid::Error(who + ": " + e.what());
        }
    }
    // Every check passed: the plans made for the data set can be written.
    std::vector<braid::detail::FileToWrite> files;
    for (const auto& [path, plan] : made) files.push_back({"plan made from '" + plan.profile + "'", path, plan.text});
    braid::detail::write_files(files);
    return w;
}

// Writes the rows measured so far (all of them once `groups_done` is every
// group), so that a run stopped by a timeout or a failing group keeps the
// groups before it. Written to a temporary file first, then renamed.
void write_measured(const Options& o, const braid::MeasurementSet& m, const std::string& from, std::size_t groups_done,
                    std::size_t groups) {
    braid::MeasurementSet part = m;
    part.rows.clear();
    for (const braid::MeasuredRow& row : m.rows)
        if (!row.ms.empty()) part.rows.push_back(row);
    part.source = fmt::format("braid-measure on {}: {} interleaved rounds per (network, mode) group; rows from {}{}",
                              braid::samples::cuda_device_description(), o.rounds, from,
                              groups_done == groups ? ""
                                                    : fmt::format(" (the first {} of {} groups)", groups_done, groups));
    braid::detail::write_file("--measurements-out", o.out, braid::measurements_to_json(part).dump(2) + "\n");
}

int run(const Options& o, Work w) {
    braid::MeasurementSet& m = w.m;
    const std::string from = o.profiles.empty() ? o.in : fmt::format("the profiles {}", fmt::join(o.profiles, ", "));
    fmt::print("braid-measure: {} rows in {} groups on {}, {} interleaved rounds each\n", m.rows.size(),
               w.groups.size(), braid::samples::cuda_device_description(), o.rounds);
    // The times are this GPU's now: the file says so.
    const braid::DeviceSpec live = braid::cuda::device_spec_from_cuda();
    const braid::MeasuredOn on = braid::samples::cuda_measured_on(0, true);
    if (!m.device_name.empty() && m.device_name != live.name)
        fmt::print("braid-measure: note: {} was measured on {}; its rows are now times on {}, which braid-calibrate "
                   "takes only beside profiles made on it\n",
                   o.in, m.device_name, live.name);
    m.device_name = live.name;
    m.device_key = live.key;
    m.driver = on.driver;
    m.cudnn = on.cudnn;
    m.cublas = on.cublas;
    for (braid::MeasuredRow& row : m.rows) row.ms.clear();  // an input file's old times are not this run's
    for (std::size_t gi = 0; gi < w.groups.size(); ++gi) {
        const Group& g = w.groups[gi];
        braid::samples::CudaRunOptions run;
        run.graph_mode = g.graph_mode;
        run.conv_graph_api = g.kernels.conv_graph_api;
        run.cudnn_batch_norm = g.kernels.cudnn_batch_norm;
        run.channels_last = g.kernels.channels_last;
        braid::samples::CudaTrainerTiming source(g.tg, run);
        const std::vector<std::string> declined = source.prepare(g.candidates);
        for (std::size_t k = 0; k < declined.size(); ++k)
            if (!declined[k].empty())
                throw braid::Error("row '" + m.rows[g.rows[k]].label + "' could not be prepared beside the " +
                                   std::to_string(k) + " before it in its group: " + declined[k]);
        std::vector<std::vector<double>> ms(g.rows.size());
        for (std::uint32_t round = 0; round < o.rounds + 1; ++round)
            for (std::size_t k = 0; k < g.rows.size(); ++k) {
                const std::size_t c = (k + round) % g.rows.size();
                const double t = source.measure_ns(c) / 1e6;
                if (round > 0) ms[c].push_back(t);  // round 0 warms every plan up (and captures graphs)
            }
        const braid::samples::NetConfig& net = g.net;
        for (std::size_t k = 0; k < g.rows.size(); ++k) {
            m.rows[g.rows[k]].ms = ms[k];
            braid::CalibrationRow measured;
            measured.measured_ms = ms[k];
            fmt::print("  {} b{} {} {:<16} median {:.3f} ms over {} rounds\n", net.net, net.batch,
                       g.graph_mode ? "graph" : "eager", m.rows[g.rows[k]].label, measured.measured_median_ms(),
                       ms[k].size());
        }
        write_measured(o, m, from, gi + 1, w.groups.size());
        std::fflush(stdout);
    }
    fmt::print("written: {} (profile and plan files are named relative to {})\n", o.out,
               std::filesystem::absolute(m.folder.empty() ? std::filesystem::path(".") : m.folder).string());
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    CLI::App app{"braid-measure: time a measurements file's plans again on this GPU, or the plans of profiles for a "
                 "fresh data set, interleaved, and write the measurements (docs/calibration.md)",
                 "braid-measure"};
    CLI::Option* in =
        app.add_option("measurements", o.in, "a braid.measurements file whose rows name their bundled networks");
    app.add_option("--profiles", o.profiles,
                   "instead, a fresh data set: profiles of bundled nets written by braid-profile (comma-separated); "
                   "each gets the serial and nimble plans and the plan file beside it (NAME.plan.json), graph and "
                   "eager, and nimble's chains with critical-path priorities, graph mode")
        ->delimiter(',')
        ->check(CLI::ExistingFile)
        ->excludes(in);
    app.callback([&] {
        if (o.in.empty() && o.profiles.empty()) throw CLI::RequiredError("a measurements file or --profiles");
    });
    app.add_option("-o,--measurements-out", o.out,
                   "where the measurements are written (its folder must exist); profile and plan files are named "
                   "relative to it")
        ->capture_default_str();
    app.add_option("--rounds", o.rounds, "interleaved rounds: the repeats each row gets")
        ->check(braid::cli::range(1u, 10000u))
        ->capture_default_str();
    std::optional<Work> work;
    return braid::samples::gpu_program_main(
        app, argc, argv, "the measurement", [&] { work = work_of(o); }, [&] { return run(o, std::move(*work)); });
}
