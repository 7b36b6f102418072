// braid-measure: measures the plans of a measurements file (docs/formats.md,
// braid.measurements) again on this GPU, interleaved and with repeats, and
// writes the file anew with the fresh times: what braid-calibrate fits on.
// Rows of one network and launch mode are timed together, round after
// round in rotating order (A B C, B C A, ...), so drift and noise fall on
// every plan alike. Each row must name its bundled network ("network").
#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "braid/cuda/device.hpp"
#include "braid/detail/json_reader.hpp"
#include "braid/plan/plan_json.hpp"
#include "braid/planner/strategies/nimble.hpp"
#include "braid/planner/strategies/serial.hpp"
#include "braid/profiler/measurements.hpp"
#include "cuda/cuda_trainer.hpp"
#include "cuda/gpu_program.hpp"
#include "train/net_settings.hpp"
#include "train/training_graph.hpp"

namespace {

struct Options {
    std::string in;
    std::string out = "measurements.json";
    std::uint32_t rounds = 10;
};

// The plan a row names, for the graph braid builds for its network.
braid::Plan row_plan(const braid::MeasurementSet& m, const braid::MeasuredRow& row, const braid::OpGraph& g) {
    if (row.plan == "serial") return braid::strategy::serial(g, m.device_key);
    if (row.plan == "nimble") return braid::strategy::nimble(g, m.device_key);
    return braid::load_plan((m.folder / row.plan).string(), g);
}

int run(const Options& o) {
    const braid::MeasurementSet m = braid::load_measurements(o.in);
    nlohmann::json doc = braid::detail::load_json_file(o.in);
    // Rows by (network settings, mode): each group shares a graph and a timing source.
    std::map<std::tuple<std::string, bool>, std::vector<std::size_t>> groups;
    for (std::size_t i = 0; i < m.rows.size(); ++i) {
        const std::string who = "measurements row " + std::to_string(i) + " ('" + m.rows[i].label + "')";
        if (m.rows[i].network.empty())
            throw braid::Error(who + " names no bundled network: braid-measure cannot rebuild its training step");
        try {
            // Checked here, before any GPU time is spent.
            (void)braid::samples::net_config_from_settings(m.rows[i].network).value();
        } catch (const std::exception& e) {
            throw braid::Error(who + ": its network settings: " + e.what());
        }
        groups[{braid::detail::settings_json(m.rows[i].network).dump(), m.rows[i].mode == braid::LaunchMode::graph}]
            .push_back(i);
    }
    fmt::print("braid-measure: {} rows in {} groups on {}, {} interleaved rounds each\n", m.rows.size(), groups.size(),
               braid::samples::cuda_device_description(), o.rounds);
    for (const auto& [key, rows] : groups) {
        const braid::samples::NetConfig net = *braid::samples::net_config_from_settings(m.rows[rows.front()].network);
        braid::samples::TrainConfig tc;
        tc.model = net;
        const braid::samples::TrainingGraph tg = braid::samples::build_training_graph(tc);
        std::vector<braid::TuneCandidate> candidates;
        for (std::size_t r : rows) candidates.push_back({m.rows[r].label, row_plan(m, m.rows[r], tg.graph)});
        braid::samples::CudaRunOptions run;
        run.graph_mode = std::get<1>(key);
        braid::samples::CudaTrainerTiming source(tg, run);
        source.prepare(candidates);
        std::vector<std::vector<double>> ms(rows.size());
        for (std::uint32_t round = 0; round < o.rounds + 1; ++round)
            for (std::size_t k = 0; k < rows.size(); ++k) {
                const std::size_t c = (k + round) % rows.size();
                const double t = source.measure_ns(c) / 1e6;
                if (round > 0) ms[c].push_back(t);  // round 0 warms every plan up (and captures graphs)
            }
        for (std::size_t k = 0; k < rows.size(); ++k) {
            doc["rows"][rows[k]]["ms"] = ms[k];
            braid::CalibrationRow measured;
            measured.measured_ms = ms[k];
            fmt::print("  {} b{} {} {:<16} median {:.3f} ms over {} rounds\n", net.net, net.batch,
                       std::get<1>(key) ? "graph" : "eager", m.rows[rows[k]].label, measured.measured_median_ms(),
                       ms[k].size());
        }
    }
    // The times are this GPU's now: the file says so.
    const braid::DeviceSpec live = braid::cuda::device_spec_from_cuda();
    const braid::MeasuredOn on = braid::samples::cuda_measured_on(0, true);
    if (!m.device_name.empty() && m.device_name != live.name)
        fmt::print("braid-measure: note: {} was measured on {}; its rows are now times on {}\n", o.in, m.device_name,
                   live.name);
    doc["device"] = {{"name", live.name}, {"key", live.key}, {"driver", on.driver}, {"cudnn", on.cudnn}, {"cublas", on.cublas}};
    doc["source"] = fmt::format("braid-measure on {}: {} interleaved rounds per (network, mode) group; rows from {}",
                                braid::samples::cuda_device_description(), o.rounds, o.in);
    const std::filesystem::path out(o.out);
    std::ofstream f(out);
    f << doc.dump(2) << "\n";
    if (!f) throw braid::Error("cannot write '" + o.out + "'");
    fmt::print("written: {} (profile and plan files are named relative to {})\n", o.out,
               std::filesystem::absolute(m.folder).string());
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    CLI::App app{"braid-measure: time a measurements file's plans again on this GPU, interleaved, and write the file "
                 "anew (docs/calibration.md)",
                 "braid-measure"};
    app.add_option("measurements", o.in, "a braid.measurements file whose rows name their bundled networks")->required();
    app.add_option("-o,--measurements-out", o.out, "where the re-measured file is written (keep it beside the input, "
                                                   "whose relative file names it keeps)")
        ->capture_default_str();
    app.add_option("--rounds", o.rounds, "interleaved rounds: the repeats each row gets")
        ->check(CLI::Range(1u, 10000u))
        ->capture_default_str();
    return braid::samples::gpu_program_main(app, argc, argv, "the re-measurement", [&] { return run(o); });
}
