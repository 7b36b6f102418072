#include "train/calibration_run.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <fmt/core.h>

#include "braid/detail/json_reader.hpp"
#include "braid/profiler/profile_json.hpp"
#include "train/net_settings.hpp"

namespace braid::samples {

namespace {

bool in_groups(const std::vector<std::string>& groups, const std::string& g) {
    return groups.empty() || std::find(groups.begin(), groups.end(), g) != groups.end();
}

}  // namespace

braid::CalibrationInputs read_calibration_inputs(const std::vector<std::string>& files, std::vector<std::string>* notes) {
    if (files.empty()) throw braid::Error("no measurements or profile files given");
    braid::CalibrationInputs all;
    std::vector<std::string> skipped;  // profiles that could not be used, and why
    auto estimates = [](const braid::MeasuredRow& row, const braid::OpGraph& graph) {
        return net_estimates(row.network, graph);
    };
    // One set of kernels: a graph-API profile and a legacy one are other
    // kernels for the same network, and one fit per kernel class would
    // average them.
    std::optional<std::pair<KernelSettings, std::string>> kernels;  // the first seen, and where
    const auto same_kernels = [&](const braid::ProfileSettings& s, const std::string& where) {
        KernelSettings k;
        try {
            k = kernel_settings_from(s);
        } catch (const braid::Error& e) {
            throw braid::Error(where + ": " + e.what());
        }
        if (!kernels) kernels.emplace(k, where);
        else if (!(k == kernels->first))
            throw braid::Error(where + " ran " + to_string(k) + ", " + kernels->second + " " +
                               to_string(kernels->first) + ": a calibration is of one set of kernels");
    };
    std::vector<std::filesystem::path> seen;  // each file's canonical path: one given twice would weigh twice
    for (const std::string& file : files) {
        if (std::filesystem::is_directory(file)) throw braid::Error("cannot read '" + file + "': it is a folder, not a file");
        if (!std::filesystem::is_regular_file(file)) throw braid::Error("cannot read '" + file + "': no such file");
        const std::filesystem::path canonical = std::filesystem::canonical(file);
        if (const auto it = std::find(seen.begin(), seen.end(), canonical); it != seen.end())
            throw braid::Error("'" + file + "' is given twice (" + files[static_cast<std::size_t>(it - seen.begin())] +
                               " is the same file): its rows and profiles would count twice in the fit");
        seen.push_back(canonical);
        const nlohmann::json doc = braid::detail::load_json_file(file);
        const std::string format = doc.is_object() && doc.contains("format") && doc["format"].is_string()
                                       ? doc["format"].get<std::string>()
                                       : "";
        if (format == "braid.profile") {
            const braid::Profile p = braid::load_profile(file);
            if (!p.graph) throw braid::ProfileError("profile '" + file + "' has no embedded graph; profile again");
            same_kernels(p.run.settings, "profile '" + file + "'");
            std::optional<std::vector<braid::OpEstimate>> est = net_estimates(p.run.settings, *p.graph);
            if (!est) {
                skipped.push_back("profile '" + file +
                                     "' does not name a bundled network (run.settings has no 'net'): it cannot "
                                     "inform the estimate fit; profile with braid-profile --net, or list it in a "
                                     "measurements file with its 'network'");
                if (notes) notes->push_back(skipped.back());
                continue;
            }
            all.graphs.push_back(std::make_unique<braid::OpGraph>(*p.graph));
            braid::ProfiledNet net;
            net.name = std::filesystem::path(file).stem().stem().string();
            const auto* n = std::get_if<std::string>(&p.run.settings.at("net"));
            net.group = n ? *n : net.name;
            net.graph = all.graphs.back().get();
            net.device = p.device;
            net.profiled = braid::costs_from_profile(p, *net.graph, p.device);
            net.profiled_iteration_ns = braid::profiled_iteration_ns(p);
            net.launch_shapes = !p.durations_only;
            braid::engine_families_from_profile(*est, net.profiled);
            net.estimates = std::move(est);
            all.nets.push_back(std::move(net));
            continue;
        }
        if (format != "braid.measurements")
            throw braid::FormatError(file, format.empty() ? "neither a braid.measurements nor a braid.profile document"
                                                          : "a " + format + ", not measurements or a profile");
        const braid::MeasurementSet measured = braid::load_measurements(file);
        for (std::size_t i = 0; i < measured.rows.size(); ++i)
            same_kernels(measured.rows[i].network, "'" + file + "' row " + std::to_string(i) + " ('" +
                                                        measured.rows[i].label + "')");
        braid::CalibrationInputs in;
        try {
            in = braid::calibration_inputs(measured, estimates);
        } catch (const braid::Error& e) {
            throw braid::Error("'" + file + "': " + e.what());  // several files: say which one's row
        }
        const std::size_t offset = all.nets.size();
        for (auto& g : in.graphs) all.graphs.push_back(std::move(g));
        for (auto& n : in.nets) all.nets.push_back(std::move(n));
        for (auto& r : in.rows) {
            r.net += offset;
            all.rows.push_back(std::move(r));
        }
    }
    if (all.nets.empty()) {
        std::string why = "nothing to calibrate on: no rows and no profile of a bundled network";
        for (const std::string& s : skipped) why += "; " + s;
        throw braid::Error(why);
    }
    return all;
}

std::vector<std::string> net_groups(const braid::CalibrationInputs& in) {
    std::vector<std::string> groups;
    for (const braid::ProfiledNet& n : in.nets)
        if (std::find(groups.begin(), groups.end(), n.group) == groups.end()) groups.push_back(n.group);
    return groups;
}

std::vector<std::string> groups_without(const braid::CalibrationInputs& in, const std::string& held_out) {
    std::vector<std::string> groups = net_groups(in);
    const auto it = std::find(groups.begin(), groups.end(), held_out);
    if (it == groups.end()) throw braid::Error("no net '" + held_out + "' among the inputs");
    groups.erase(it);
    if (groups.empty()) throw braid::Error("holding '" + held_out + "' out leaves nothing to fit on");
    return groups;
}

braid::Calibration fit_calibration(const braid::CalibrationInputs& in, const std::vector<std::string>& groups,
                                   const braid::SimFitOptions& options) {
    std::vector<braid::ProfiledNet> nets;
    for (const braid::ProfiledNet& n : in.nets)
        if (in_groups(groups, n.group)) nets.push_back(n);
    if (nets.empty()) throw braid::Error("no profiled net of the networks asked for");
    braid::Calibration c;
    const braid::DeviceSpec& dev = nets.front().device;
    c.device_key = dev.key;
    c.device_name = dev.name;
    c.sm_count = dev.sm_count;
    c.cc_major = dev.cc_major;
    c.cc_minor = dev.cc_minor;
    for (const braid::ProfiledNet& n : nets)
        if (n.device.sm_count != dev.sm_count || n.device.name != dev.name)
            throw braid::Error("profiles of two GPUs ('" + dev.name + "' and '" + n.device.name +
                               "'): a calibration is for one");
    const bool any_estimates = std::any_of(nets.begin(), nets.end(), [](const auto& n) { return n.estimates.has_value(); });
    if (any_estimates) c.estimate = braid::fit_estimates(nets);
    std::vector<std::size_t> rows;
    for (std::size_t i = 0; i < in.rows.size(); ++i)
        if (in_groups(groups, in.nets[in.rows[i].net].group)) rows.push_back(i);
    if (!rows.empty()) c = braid::fit_simulator(in.nets, in.rows, std::move(c), rows, options);
    std::string fitted;
    for (const braid::ProfiledNet& n : nets) fitted += (fitted.empty() ? "" : ", ") + n.name;
    c.source = "braid-calibrate: " + std::to_string(rows.size()) + " measured rows and the profiles " + fitted;
    return c;
}

std::vector<AccuracyRow> accuracy_rows(const braid::CalibrationInputs& in, const braid::Calibration& c,
                                       const std::vector<std::string>& groups) {
    std::vector<braid::CalibrationRow> rows;
    std::vector<std::size_t> index;
    for (std::size_t i = 0; i < in.rows.size(); ++i)
        if (in_groups(groups, in.nets[in.rows[i].net].group)) {
            rows.push_back(in.rows[i]);
            index.push_back(i);
        }
    const std::vector<braid::RowPrediction> profile = braid::predict_rows(in.nets, rows, c, braid::CostSource::profile);
    // Estimates only for rows whose net has them.
    std::vector<braid::CalibrationRow> with_estimates;
    std::vector<std::size_t> where;
    for (std::size_t i = 0; i < rows.size(); ++i)
        if (in.nets[rows[i].net].estimates) {
            with_estimates.push_back(rows[i]);
            where.push_back(i);
        }
    const std::vector<braid::RowPrediction> estimate =
        with_estimates.empty() ? std::vector<braid::RowPrediction>{}
                               : braid::predict_rows(in.nets, with_estimates, c, braid::CostSource::estimate);
    std::vector<AccuracyRow> out;
    for (std::size_t i = 0; i < rows.size(); ++i) {
        AccuracyRow a;
        a.row = index[i];
        a.net = in.nets[rows[i].net].name;
        a.label = rows[i].label;
        a.mode = rows[i].mode == braid::LaunchMode::graph ? "graph" : "eager";
        a.streams = rows[i].plan.stream_count();
        a.measured_ms = profile[i].measured_ms;
        a.profile_ms = profile[i].predicted_ms;
        out.push_back(a);
    }
    for (std::size_t k = 0; k < where.size(); ++k) out[where[k]].estimate_ms = estimate[k].predicted_ms;
    return out;
}

std::string format_accuracy(const std::vector<AccuracyRow>& rows) {
    std::string s = fmt::format("  {:<22} {:<15} {:<6} {:>7} {:>9} {:>10} {:>7} {:>10} {:>7}\n", "net", "plan", "mode",
                                "streams", "measured", "profile", "error", "estimate", "error");
    double worst_p = 0.0, worst_e = 0.0;
    for (const AccuracyRow& r : rows) {
        const std::optional<double> ee = r.estimate_error_pct();
        s += fmt::format("  {:<22} {:<15} {:<6} {:>7} {:>9.2f} {:>10.2f} {:>+6.1f}% {:>10} {:>7}\n", r.net, r.label,
                         r.mode, r.streams, r.measured_ms, r.profile_ms, r.profile_error_pct(),
                         r.estimate_ms ? fmt::format("{:.2f}", *r.estimate_ms) : "-",
                         ee ? fmt::format("{:+.1f}%", *ee) : "-");
        worst_p = std::max(worst_p, std::abs(r.profile_error_pct()));
        if (ee) worst_e = std::max(worst_e, std::abs(*ee));
    }
    s += fmt::format("  worst error: {:.1f}% from profiles, {:.1f}% from estimates (times in ms, measured = median of "
                     "the repeats)\n",
                     worst_p, worst_e);
    return s;
}

std::string format_class_totals(const braid::CalibrationInputs& in, const braid::Calibration& c,
                                const std::vector<std::string>& groups) {
    std::vector<braid::ProfiledNet> nets;
    for (const braid::ProfiledNet& n : in.nets)
        if (n.estimates && in_groups(groups, n.group)) nets.push_back(n);
    const std::vector<braid::ClassTotals> totals = braid::class_totals(nets, c.estimate);
    std::string s = fmt::format("  {:<22}", "class (estimated/profiled)");
    for (const braid::ProfiledNet& n : nets) s += fmt::format(" {:>22}", n.name);
    s += "\n";
    // One line per class, a cell per net ("-" where the net has none); kept
    // where `keep` holds for one of its cells.
    const auto class_lines = [&](const std::string& indent, const auto& cell, const auto& keep) {
        std::string lines;
        for (braid::KernelClass k : braid::all_kernel_classes) {
            std::string line = fmt::format("{}{:<{}}", indent, braid::to_string(k), 24 - indent.size());
            bool kept = false;
            for (const braid::ProfiledNet& n : nets) {
                auto t = std::find_if(totals.begin(), totals.end(),
                                      [&](const braid::ClassTotals& x) { return x.net == n.name && x.kind == k; });
                if (t == totals.end()) {
                    line += fmt::format(" {:>22}", "-");
                    continue;
                }
                kept = kept || keep(*t);
                line += " " + cell(*t);
            }
            if (kept) lines += line + "\n";
        }
        return lines;
    };
    const auto kernels = [](std::size_t estimated, std::size_t profiled) {
        return fmt::format("{:>22}", fmt::format("{} of {}", estimated, profiled));
    };
    const auto times = [](const braid::ClassTotals& t) {
        return fmt::format("{:>+9.1f}% of {:>7.3f} ms", t.error_pct(), t.profiled_ns / 1e6);
    };
    s += class_lines("  ", times, [](const braid::ClassTotals&) { return true; });
    std::string line = fmt::format("  {:<22}", "all ops");
    std::string launches = fmt::format("  {:<22}", "launches (est./prof.)");
    for (const braid::ProfiledNet& n : nets) {
        double p = 0.0, e = 0.0;
        std::size_t pk = 0, ek = 0;
        for (const braid::ClassTotals& t : totals)
            if (t.net == n.name) {
                p += t.profiled_ns, e += t.estimated_ns;
                pk += t.profiled_kernels, ek += t.estimated_kernels;
            }
        line += fmt::format(" {:>+9.1f}% of {:>7.3f} ms", p > 0.0 ? 100.0 * (e / p - 1.0) : 0.0, p / 1e6);
        launches += " " + kernels(ek, pk);
    }
    s += line + "\n" + launches + "\n";
    // Where the two disagree on how many kernels a step launches, by class:
    // each launch costs host time in eager mode, which estimates cannot
    // charge for kernels they do not know of.
    const auto launch_counts = [&](const braid::ClassTotals& t) { return kernels(t.estimated_kernels, t.profiled_kernels); };
    return s + class_lines("    ", launch_counts,
                           [](const braid::ClassTotals& t) { return t.estimated_kernels != t.profiled_kernels; });
}

}  // namespace braid::samples
