// braid-plan: plans one training step of a bundled network or a Caffe
// prototxt (estimated costs) or of a profiled graph (measured costs) for a
// GPU, compares every strategy on the simulator, and writes the chosen plan,
// a Chrome/Perfetto trace and an SVG timeline of its predicted iteration.
#include <cstdio>
#include <exception>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <fmt/ranges.h>

#include "braid/braid.hpp"
#include "braid/profiler/planning.hpp"
#include "braid/planner/calibrate.hpp"
#include "braid/planner/calibration_table.hpp"
#include "braid/profiler/profile_json.hpp"
#include "caffe/prototxt.hpp"
#include "nets/zoo.hpp"
#include "vocabulary.hpp"
#include "train/training_graph.hpp"

namespace {

struct Options {
    std::string net = "googlenet";
    std::uint32_t batch = 32;
    std::uint32_t image = 224;
    std::uint32_t classes = 1000;
    double width_scale = 1.0;
    bool no_aux = false;
    bool fuse_relu = false;
    bool share_bn_sums = false;
    std::uint64_t update_bucket_mib = 0;
    std::string profile;
    std::string prototxt;
    braid::samples::PrototxtOptions prototxt_options;  // what the command line sets over the prototxt
    std::string device;
    std::string device_json;
    std::string calibration;  // "": built-in for the device; "none"; or a file
    std::string strategy = "braid";
    std::uint32_t max_streams = 16;
    std::string mode = braid::cli::default_mode;
    std::optional<int> max_connections;  // eager: the hardware queues of the process the plan will run in
    std::string out_dir = "braid-plan-out";
    std::string plan_file, trace_file, svg_file;
    std::string format = "table";
    bool list_devices = false;
    bool list_nets = false;
};

// What gets planned: a graph, its costs, the device, and a label.
struct Problem {
    std::optional<braid::samples::TrainingGraph> training;  // bundled nets own their graph here
    std::optional<braid::OpGraph> profiled;                 // or the graph embedded in a profile
    braid::OpCosts costs;
    braid::DeviceSpec device;
    std::optional<braid::Calibration> calibration;
    std::string calibration_text;  // for the report
    braid::sim::Params sim;        // the simulator's constants: the calibration's, for this profile
    std::string what;       // "googlenet, batch 32, 224x224, 1000 classes"
    std::string cost_source;  // "roofline estimate" or "profile <file>"
    std::vector<std::string> warnings;
    std::vector<std::string> notes;  // what a prototxt's reader did not carry over

    const braid::OpGraph& graph() const { return training ? training->graph : *profiled; }
};

braid::DeviceSpec pick_device(const Options& o, const braid::DeviceSpec* from_profile) {
    if (!o.device_json.empty()) return braid::load_device(o.device_json);  // deprecated spelling
    if (!o.device.empty()) return braid::load_device(o.device);
    if (from_profile) return *from_profile;
    return braid::find_device("h200");
}

braid::LaunchMode launch_mode(const Options& o) {
    return o.mode == "eager" ? braid::LaunchMode::eager : braid::LaunchMode::graph;
}

void pick_calibration(const Options& o, Problem& p) {
    p.calibration = braid::select_calibration(o.calibration, p.device, p.warnings);
    p.calibration_text = braid::describe_calibration(p.calibration, o.calibration);
}

Problem load_problem(const Options& o) {
    Problem p;
    if (!o.profile.empty()) {
        if (!std::filesystem::exists(o.profile)) throw braid::Error("cannot read profile '" + o.profile + "': no such file");
        braid::Profile prof = braid::load_profile(o.profile);
        if (!prof.graph)
            throw braid::Error("profile '" + o.profile + "' has no embedded graph (written by an older braid-profile); profile again");
        p.profiled = *prof.graph;
        p.device = pick_device(o, &prof.device);
        const std::string warning = braid::profile_device_warning(prof, p.device);
        if (!warning.empty()) p.warnings.push_back(warning);
        pick_calibration(o, p);
        braid::ProfilePlanning planning = braid::profile_planning(prof, *p.profiled, p.device, p.calibration, launch_mode(o));
        p.costs = std::move(planning.costs);
        p.sim = braid::sim::with_eager_hardware_queues(planning.sim, o.max_connections);
        p.what = "profiled '" + prof.run.network + "' (" + std::to_string(p.profiled->op_count()) + " ops)";
        p.cost_source = "profile " + o.profile + (prof.durations_only ? " (durations only)" : "");
        return p;
    }
    if (!o.prototxt.empty()) {
        braid::samples::PrototxtNet net = braid::samples::read_prototxt_if_built(o.prototxt, o.prototxt_options);
        const braid::samples::Shape4 in = net.network.input_shape();
        braid::samples::NetConfig variants;
        variants.update_bucket_bytes = o.update_bucket_mib << 20;
        p.what = fmt::format("{} from {}, batch {}, {}x{}, {} classes{}", net.network.name(), o.prototxt, in.n, in.h,
                             in.w, net.network.classes(), braid::samples::net_variants(variants));
        p.notes = std::move(net.notes);
        p.training = braid::samples::build_training_graph(std::move(net.network), braid::samples::SgdConfig{}, 1, 0,
                                                          o.update_bucket_mib << 20);
    } else {
        braid::samples::TrainConfig tc;
        tc.model.net = o.net;
        tc.model.batch = o.batch;
        tc.model.image = o.image;
        tc.model.classes = o.classes;
        tc.model.width_scale = o.width_scale;
        tc.model.aux_classifiers = !o.no_aux;
        tc.model.fuse_relu = o.fuse_relu;
        tc.model.share_batch_norm_sums = o.share_bn_sums;
        tc.model.update_bucket_bytes = o.update_bucket_mib << 20;
        p.training = braid::samples::build_training_graph(tc);
        p.what = fmt::format("{}, batch {}, {}x{}, {} classes{}{}", o.net, o.batch, o.image, o.image, o.classes,
                             o.width_scale != 1.0 ? fmt::format(", width x{}", o.width_scale) : "",
                             braid::samples::net_variants(tc.model));
    }
    p.device = pick_device(o, nullptr);
    pick_calibration(o, p);
    braid::samples::PlanningModel model =
        braid::samples::planning_model(*p.training, p.device, p.calibration, launch_mode(o), {}, o.max_connections);
    p.costs = std::move(model.costs);
    p.sim = model.sim;
    p.cost_source = p.calibration && p.calibration->estimate.fitted() ? "calibrated estimate" : "roofline estimate";
    return p;
}

// Where the plan, the trace and the timeline go.
std::tuple<std::string, std::string, std::string> output_paths(const Options& o) {
    return {o.plan_file.empty() ? o.out_dir + "/plan.json" : o.plan_file,
            o.trace_file.empty() ? o.out_dir + "/trace.json" : o.trace_file,
            o.svg_file.empty() ? o.out_dir + "/timeline.svg" : o.svg_file};
}

// Two outputs that are one file, or an output that is an input: the one
// written last would replace the other without a word.
void refuse_same_files(const Options& o) {
    const auto [plan, trace, svg] = output_paths(o);
    std::vector<std::pair<std::string, std::string>> paths{{o.plan_file.empty() ? "the plan (--out)" : "--plan-out", plan},
                                                           {o.trace_file.empty() ? "the trace (--out)" : "--trace-out", trace},
                                                           {o.svg_file.empty() ? "the timeline (--out)" : "--svg-out", svg}};
    for (const auto& [option, path] : {std::pair{"--profile", &o.profile}, std::pair{"--prototxt", &o.prototxt},
                                       std::pair{"--calibration", &o.calibration}, std::pair{"--device", &o.device},
                                       std::pair{"--device-json", &o.device_json}})
        if (!path->empty() && std::filesystem::exists(*path)) paths.emplace_back(option, *path);
    if (const std::string why = braid::cli::same_file_problem(paths); !why.empty()) throw braid::Error(why);
}

int run(const Options& o) {
    refuse_same_files(o);
    if (o.list_devices) {
        for (const braid::DeviceSpec& d : braid::builtin_devices())
            fmt::print("{:<8} {} ({} SMs, cc {}.{}, {:.0f} GB/s)\n", d.key, d.name, d.sm_count, d.cc_major, d.cc_minor,
                       d.dram_bandwidth_gbps);
        return 0;
    }
    if (o.list_nets) {
        for (const std::string& n : braid::samples::network_names()) fmt::print("{}\n", n);
        return 0;
    }
    braid::check_strategy_name(o.strategy);  // before the (slow) planning
    const auto [plan_path, trace_path, svg_path] = output_paths(o);
    const char* plan_option = o.plan_file.empty() ? "--out" : "--plan-out";
    const char* trace_option = o.trace_file.empty() ? "--out" : "--trace-out";
    const char* svg_option = o.svg_file.empty() ? "--out" : "--svg-out";
    for (const auto& [option, path] :
         {std::pair{plan_option, plan_path}, std::pair{trace_option, trace_path}, std::pair{svg_option, svg_path}})
        if (const std::string why = braid::cli::output_path_problem(option, path, true); !why.empty())
            throw braid::Error(why);

    const Problem p = load_problem(o);
    const braid::OpGraph& g = p.graph();
    braid::ComparisonOptions co;
    co.max_streams = o.max_streams;
    co.mode = launch_mode(o);
    co.sim = p.sim;
    const braid::Comparison cmp = braid::compare_strategies(g, p.device, p.costs, co);
    const braid::StrategyRow& chosen = cmp.row(o.strategy);

    // The chosen plan's predicted timeline, as compare_strategies simulated it.
    const braid::sim::Program& program = chosen.simulated.program;
    const braid::sim::Result& result = chosen.simulated.result;
    const std::set<braid::OpId> critical(cmp.bound.critical_ops.begin(), cmp.bound.critical_ops.end());

    braid::TimelineSvgOptions so;
    so.title = fmt::format("{} on {} — {} plan, {} mode: {:.3f} ms predicted", p.what, p.device.key, o.strategy, o.mode,
                           result.makespan_ns / 1e6);
    // All three or none: a plan beside a stale trace would mislead.
    braid::detail::write_files(
        {{plan_option, plan_path, braid::plan_file_text(chosen.plan, g)},
         {trace_option, trace_path, braid::sim::chrome_trace(program, result, "predicted " + p.device.key).dump() + "\n"},
         {svg_option, svg_path, braid::timeline_svg(g, program, result, critical, so)}});

    if (o.format == "json") {
        nlohmann::json rows = nlohmann::json::array();
        for (const braid::StrategyRow& r : cmp.rows)
            rows.push_back({{"name", r.name},
                            {"predicted_ms", r.predicted_ns / 1e6},
                            {"speedup_vs_serial", r.speedup_vs_serial},
                            {"speedup_vs_serial_graph", r.speedup_vs_serial_graph},
                            {"streams", r.streams},
                            {"waits", r.waits},
                            {"lb_ratio", r.lb_ratio},
                            {"mean_busy_sm_fraction", r.mean_busy_sm_fraction}});
        nlohmann::json out{
            {"strategies", rows},
            {"input", p.what},
            {"costs", p.cost_source},
            {"calibration", p.calibration_text},
            {"device", p.device.key},
            {"mode", o.mode},
            {"eager_hardware_queues", p.sim.eager_hardware_queues},
            {"ops", g.op_count()},
            {"edges", g.edge_count()},
            {"lower_bound_ms", cmp.bound.bound_ns / 1e6},
            {"critical_path_ms", cmp.bound.critical_path_ns / 1e6},
            {"serial_eager_ms", cmp.serial_eager_ns / 1e6},
            {"serial_graph_ms", cmp.serial_graph_ns / 1e6},
            {"chosen", o.strategy},
            {"files", {{"plan", plan_path}, {"trace", trace_path}, {"svg", svg_path}}},
            {"warnings", p.warnings},
            {"notes", p.notes},
        };
        fmt::print("{}\n", out.dump(2));
        return 0;
    }

    for (const std::string& w : p.warnings) fmt::print(stderr, "warning: {}\n", w);
    for (const std::string& n : p.notes) fmt::print(stderr, "note: {}\n", n);
    fmt::print("braid-plan: {} on {} ({}, {})\n", p.what, p.device.name, p.cost_source, p.calibration_text);
    fmt::print("  {} ops, {} edges; lower bound {:.3f} ms (critical path {:.3f} ms, SM area {:.3f} ms)\n", g.op_count(),
               g.edge_count(), cmp.bound.bound_ns / 1e6, cmp.bound.critical_path_ns / 1e6, cmp.bound.area_ns / 1e6);
    fmt::print("  serial baseline: {:.3f} ms launched eagerly, {:.3f} ms as one CUDA graph\n\n", cmp.serial_eager_ns / 1e6,
               cmp.serial_graph_ns / 1e6);
    // "vs serial graph" only says something when the plans run eagerly and
    // the serial plan is faster as a graph; otherwise it repeats "vs serial".
    const bool graph_column = o.mode == "eager" && cmp.serial_eager_ns > cmp.serial_graph_ns * 1.001;
    fmt::print("  predicted iteration time, plans run in {} mode{}:\n", o.mode,
               o.mode == "eager" ? fmt::format(" over {} hardware queues{}", p.sim.eager_hardware_queues,
                                               o.max_connections ? " (--max-connections)" : "")
                                 : "");
    fmt::print("  {:<8} {:>12} {:>10}{} {:>8} {:>7} {:>12} {:>9}\n", "strategy", "predicted ms", "vs serial",
               graph_column ? fmt::format(" {:>16}", "vs serial graph") : "", "streams", "waits", "/ lower bnd",
               "busy SMs");
    std::size_t most_waits = 0;
    for (std::size_t i = 0; i < cmp.rows.size(); ++i) {
        const braid::StrategyRow& r = cmp.rows[i];
        if (r.waits > cmp.rows[most_waits].waits) most_waits = i;
        fmt::print("  {:<8} {:>12.3f} {:>9.2f}x{} {:>8} {:>7} {:>12.2f} {:>8.0f}%{}\n", r.name, r.predicted_ns / 1e6,
                   r.speedup_vs_serial, graph_column ? fmt::format(" {:>15.2f}x", r.speedup_vs_serial_graph) : "",
                   r.streams, r.waits, r.lb_ratio, 100.0 * r.mean_busy_sm_fraction,
                   r.name == o.strategy ? "  <- written" : "");
    }
    fmt::print("\n  Predicted by braid's GPU simulator for the {} from {} costs ({}).\n", p.device.key,
               p.cost_source == "roofline estimate"     ? "roofline-estimated"
               : p.cost_source == "calibrated estimate" ? "estimated, calibrated"
                                                        : "measured (" + p.cost_source + ")",
               p.calibration_text);
    fmt::print("  vs serial: the serial plan's time in {} mode divided by the row's.{}\n", o.mode,
               graph_column          ? "\n  vs serial graph: the serial plan replayed as one CUDA graph, divided by the row's."
               : o.mode == "eager" ? "\n  (Serial takes as long replayed as one CUDA graph here, so no column for that.)"
                                   : "");
    fmt::print("  / lower bnd: the row's time over the lower bound, the time no plan can beat with these costs\n"
               "  (the longest chain of op times, or all kernels' SM time spread over every SM).\n");
    fmt::print("  waits: cross-stream event waits in the plan.{}\n",
               cmp.rows[most_waits].name == "glp4nn"
                   ? "\n  glp4nn splits every batch op into parts on several streams, and each part waits\n"
                     "  for the parts it reads from: hence its many waits."
                   : "");
    if (chosen.plan.options.chosen) fmt::print("\n  braid chose: {}\n", chosen.plan.options.chosen->describe());
    fmt::print("\n  plan:     {}\n  trace:    {}  (open in https://ui.perfetto.dev or chrome://tracing)\n  timeline: {}\n",
               plan_path, trace_path, svg_path);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    CLI::App app{"braid-plan: plan a CNN training step onto concurrent CUDA streams and predict its speed without a GPU",
                 "braid-plan"};
    app.footer(
        "\nExamples:\n"
        "  braid-plan                                   GoogLeNet, batch 32, on an H200 (the defaults)\n"
        "  braid-plan --net resnet50 --batch 128 --device a100 --mode eager\n"
        "  braid-plan --device my-gpu.json              a GPU not in the table, from a device JSON file\n"
        "  braid-plan --profile profile.json            plan a graph profiled by braid-profile\n"
        "  braid-plan --prototxt train_val.prototxt     plan a Caffe net (--batch, --image, --classes override it)\n"
        "  braid-plan --net resnet152 --format json     numbers for scripts\n"
        "  braid-plan --list-devices | --list-nets\n");
    CLI::Option* net = app.add_option("--net", o.net, "bundled network: googlenet, resnet18, resnet34, resnet50, resnet101, resnet152, inception_v3")
        ->capture_default_str();
    CLI::Option* batch =
        app.add_option("--batch", o.batch, "images per iteration")->check(braid::cli::range(1u, braid::cli::max_batch))->capture_default_str();
    CLI::Option* image = app.add_option("--image", o.image,
                                        "square input images of this many pixels a side [default: the net's own, 299 "
                                        "for inception_v3, 224 for the others]")
                             ->check(braid::cli::range(1u, braid::cli::max_image));
    CLI::Option* classes =
        app.add_option("--classes", o.classes, "output classes")->check(braid::cli::range(1u, braid::cli::max_classes))->capture_default_str();
    CLI::Option* width = app.add_option("--width-scale", o.width_scale, "multiply every hidden channel count (small nets for quick looks)")
        ->check(braid::cli::range(braid::cli::min_width_scale, braid::cli::max_width_scale))
        ->capture_default_str();
    CLI::Option* no_aux = app.add_flag("--no-aux", o.no_aux, "GoogLeNet without its two auxiliary classifiers, Inception-v3 without AuxLogits");
    CLI::Option* fuse = app.add_flag("--fuse-relu", o.fuse_relu, braid::samples::fuse_relu_help);
    CLI::Option* share = app.add_flag("--share-bn-sums", o.share_bn_sums, braid::samples::share_batch_norm_sums_help);
    CLI::Option* bucket = app.add_option("--update-bucket-mib", o.update_bucket_mib, braid::samples::update_bucket_help)
                              ->check(braid::cli::range(std::uint64_t{0}, std::uint64_t{1} << 30))
                              ->capture_default_str();
    CLI::Option* profile =
        app.add_option("--profile", o.profile, "plan the graph and measured costs of a braid-profile profile.json instead");
    app.add_option("--prototxt", o.prototxt,
                   "plan a Caffe net definition instead (docs/caffe.md); --batch, --image and --classes, when given, "
                   "override the file's")
        ->excludes(net, width, no_aux, profile, fuse, share);
    // A profile carries its own graph: nothing that builds or sizes one applies.
    for (CLI::Option* sizing : {net, batch, image, classes, width, no_aux, fuse, share, bucket}) sizing->excludes(profile);
    CLI::Option* device = app.add_option("--device", o.device, std::string(braid::cli::device_help) +
                                                                  "; default: the profile's, else h200");
    braid::cli::add_deprecated(app, "--device-json", o.device_json, "--device FILE", device);
    app.add_option("--calibration", o.calibration,
                   std::string(braid::cli::calibration_help));
    app.add_option("--strategy", o.strategy,
                   fmt::format("whose plan to write: {} (docs/design.md#strategies)", fmt::join(braid::strategy_names(), ", ")))
        ->capture_default_str();
    app.add_option("--max-streams", o.max_streams, "streams glp4nn, ios and braid may use")
        ->check(braid::cli::range(1u, braid::cli::max_streams))
        ->capture_default_str();
    app.add_option("--mode", o.mode, "how plans are run: graph (one captured CUDA graph) or eager (launch by launch)")
        ->check(CLI::IsMember({"graph", "eager"}))
        ->capture_default_str();
    app.add_option("--max-connections", o.max_connections,
                   "eager: plan for a process with this many hardware work queues (its CUDA_DEVICE_MAX_CONNECTIONS, "
                   "1 to 32); default: the calibration's, else 8")
        ->check(braid::cli::range(1, 32));
    app.add_option("--out", o.out_dir, "folder for plan.json, trace.json and timeline.svg")->capture_default_str();
    app.add_option("--plan-out", o.plan_file, "write the plan here instead");
    app.add_option("--trace-out", o.trace_file, "write the Chrome/Perfetto trace here instead");
    app.add_option("--svg-out", o.svg_file, "write the SVG timeline here instead");
    app.add_option("--format", o.format, "table (for people) or json (for scripts)")
        ->check(CLI::IsMember({"table", "json"}))
        ->capture_default_str();
    app.add_flag("--list-devices", o.list_devices, "print the built-in devices and exit");
    app.add_flag("--list-nets", o.list_nets, "print the bundled networks and exit");
    braid::cli::refuse_empty_values(app);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }
    if (batch->count() > 0) o.prototxt_options.batch = o.batch;
    if (image->count() > 0) o.prototxt_options.image = o.image;
    else o.image = braid::samples::default_image(o.net);
    if (classes->count() > 0) o.prototxt_options.classes = o.classes;
    try {
        return run(o);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "braid-plan: error: %s\n", e.what());
        return 1;
    }
}
