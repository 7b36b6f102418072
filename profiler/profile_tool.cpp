#include "profile_tool.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/core.h>

// device.hpp before cuda.hpp: device.hpp's unqualified detail::lowercase_alnum
// does not compile once braid::cuda::detail exists (resources.hpp).
#include "braid/config.hpp"
#include "braid/cuda/backend.hpp"
#include "braid/cuda/device.hpp"
#include "braid/cuda/error.hpp"
#include "braid/exec/executor.hpp"
#include "braid/model/occupancy.hpp"
#include "braid/plan/plan_json.hpp"
#include "braid/planner/make_plan.hpp"
#include "braid/planner/predict.hpp"
#include "braid/planner/strategies/serial.hpp"
#include "braid/profiler/costs.hpp"
#include "braid/profiler/cuda/profile_on_cuda.hpp"
#include "braid/profiler/profile_json.hpp"
#include "demo/demo_network.hpp"

namespace braid::tool {

namespace {


std::string tool_name() {
    return fmt::format("braid-profile {}.{}.{}", BRAID_VERSION_MAJOR, BRAID_VERSION_MINOR, BRAID_VERSION_PATCH);
}

std::string short_name_impl(const std::string& name) {
    std::string s = name;
    int depth = 0;
    for (std::size_t i = 0; i < s.size(); ++i) {  // cut the parameter list (the first top-level '(')
        if (s[i] == '<') ++depth;
        if (s[i] == '>') --depth;
        if (s[i] == '(' && depth == 0 && s.compare(i, 11, "(anonymous ") != 0) {
            s.resize(i);
            break;
        }
    }
    depth = 0;
    std::size_t cut = 0;
    for (std::size_t i = 0; i + 1 < s.size(); ++i) {  // drop namespaces outside template arguments
        if (s[i] == '<' || s[i] == '(') ++depth;
        if (s[i] == '>' || s[i] == ')') --depth;
        if (depth == 0 && s[i] == ':' && s[i + 1] == ':') cut = i + 2;
    }
    s = s.substr(cut);
    if (const std::size_t space = s.rfind(' ', s.find('<')); space != std::string::npos && s.find('<') != std::string::npos)
        s = s.substr(space + 1);  // "void f<...>" -> "f<...>"
    else if (const std::size_t sp = s.find(' '); sp != std::string::npos && s.find('<') == std::string::npos)
        s = s.substr(sp + 1);
    return s.size() > 40 ? s.substr(0, 37) + "..." : s;
}

class Progress {
public:
    Progress() : tty_(::isatty(::fileno(stderr)) != 0) {}
    void operator()(std::string_view phase, std::uint32_t done, std::uint32_t total) const {
        if (!tty_ && done != total) return;
        constexpr std::uint32_t width = 30;
        const std::uint32_t filled = total ? done * width / total : width;
        fmt::print(stderr, "{}  {:<9} [{}{}] {}/{}{}", tty_ ? "\r" : "", phase, std::string(filled, '#'),
                   std::string(width - filled, '.'), done, total, done == total ? "\n" : "");
        std::fflush(stderr);
    }

private:
    bool tty_;
};

double us(double ns) { return ns / 1000.0; }

struct LayerRow {
    std::string layer;
    int ops = 0;
    int kernels = 0;
    int transfers = 0;  // memcpy/memset
    double time_ns = 0.0;
    int sms = 0;                 // most SMs any kernel of the layer covers in its first wave
    double longest_ns = -1.0;    // the layer's longest kernel decides occupancy and limiter
    std::string occupancy = "-";
    std::string limiter = "-";
};

void print_layers(const braid::Profile& profile, const braid::OpGraph& graph, const braid::DeviceSpec& dev) {
    std::vector<LayerRow> rows;
    std::map<std::string, std::size_t> row_of;
    double total_ns = 0.0;
    for (braid::OpId id : graph.topological_order()) {
        const braid::Op& op = graph.op(id);
        const braid::ProfiledOp* p = profile.find_op(op.name);
        if (!p) continue;
        const std::string layer = op.layer.empty() ? op.name : op.layer;
        auto [it, fresh] = row_of.emplace(layer, rows.size());
        if (fresh) rows.push_back(LayerRow{layer});
        LayerRow& row = rows[it->second];
        ++row.ops;
        row.time_ns += p->duration.median_ns;
        total_ns += p->duration.median_ns;
        row.kernels += static_cast<int>(p->kernels.size());
        row.transfers += static_cast<int>(p->transfers.size());
        for (const braid::ProfiledKernel& k : p->kernels) {
            try {
                const braid::Occupancy o = braid::occupancy(dev, k.shape);
                row.sms = std::max(row.sms, braid::footprint(dev, o, k.shape.blocks()).sms);
                if (k.duration.median_ns > row.longest_ns) {
                    row.longest_ns = k.duration.median_ns;
                    row.occupancy = fmt::format("{} blk/SM {:>3.0f}%", o.blocks_per_sm, 100.0 * o.fraction);
                    row.limiter = std::string(braid::to_string(o.limiter));
                }
            } catch (const braid::ModelError&) {
                row.limiter = "does not fit";
            }
        }
    }
    fmt::print("\n{:<16} {:>4} {:>8} {:>6} {:>11} {:>6} {:>9} {:>16} {:<14}\n", "layer", "ops", "kernels", "copies",
               "time (us)", "share", "SMs", "occupancy", "limiter");
    for (const LayerRow& r : rows) {
        const std::string sms = profile.durations_only ? "all*"
                                : r.kernels == 0        ? "-"
                                                        : fmt::format("{}/{}", r.sms, dev.sm_count);
        const std::string kernels = profile.durations_only ? "?" : std::to_string(r.kernels);
        const std::string copies = profile.durations_only ? "?" : std::to_string(r.transfers);
        fmt::print("{:<16} {:>4} {:>8} {:>6} {:>11.1f} {:>5.1f}% {:>9} {:>16} {:<14}\n", r.layer, r.ops, kernels, copies,
                   us(r.time_ns), total_ns > 0 ? 100.0 * r.time_ns / total_ns : 0.0, sms, r.occupancy, r.limiter);
    }
    fmt::print("{:<16} {:>4} {:>8} {:>6} {:>11.1f}\n", "total", graph.op_count(), "", "", us(total_ns));
    if (profile.durations_only)
        fmt::print("* durations-only profile: kernels unknown; each op is planned as one kernel that fills the GPU\n");
}

void print_kernels(const braid::Profile& profile, const braid::DeviceSpec& dev) {
    fmt::print("\n{:<12} {:<32} {:>14} {:>12} {:>5} {:>9} {:>10} {:>7} {:<14}\n", "op", "kernel", "grid", "block",
               "regs", "smem (B)", "time (us)", "blk/SM", "limiter");
    for (const braid::ProfiledOp& op : profile.ops) {
        for (const braid::ProfiledKernel& k : op.kernels) {
            std::string bps = "-", limiter = "does not fit";
            try {
                const braid::Occupancy o = braid::occupancy(dev, k.shape);
                bps = std::to_string(o.blocks_per_sm);
                limiter = std::string(braid::to_string(o.limiter));
            } catch (const braid::ModelError&) {
            }
            fmt::print("{:<12} {:<32} {:>14} {:>12} {:>5} {:>9} {:>10.1f} {:>7} {:<14}\n", op.name,
                       short_kernel_name(k.shape.name),
                       fmt::format("{}x{}x{}", k.shape.grid.x, k.shape.grid.y, k.shape.grid.z),
                       fmt::format("{}x{}x{}", k.shape.block.x, k.shape.block.y, k.shape.block.z),
                       k.shape.regs_per_thread, k.shape.static_smem_bytes + k.shape.dynamic_smem_bytes,
                       us(k.duration.median_ns), bps, limiter);
        }
        for (const braid::ProfiledTransfer& t : op.transfers)
            fmt::print("{:<12} {:<32} {:>14} {:>12} {:>5} {:>9} {:>10.1f}\n", op.name, braid::to_string(t.kind),
                       fmt::format("{} B", t.bytes), "", "", "", us(t.duration.median_ns));
    }
}

}  // namespace

std::string short_kernel_name(const std::string& demangled) { return short_name_impl(demangled); }

void report(const Profile& profile, const OpGraph& graph, const DeviceSpec& dev, const ProfileToolOptions& opt) {
    std::size_t kernel_count = 0, transfer_count = 0;
    for (const ProfiledOp& op : profile.ops) {
        kernel_count += op.kernels.size();
        transfer_count += op.transfers.size();
    }
    fmt::print("wrote {} ({} ops, {} kernels, {} memcpy/memset; {}{})\n", opt.out_profile, profile.ops.size(),
               kernel_count, transfer_count, to_string(profile.timing), profile.durations_only ? ", durations only" : "");

    print_layers(profile, graph, dev);
    if (opt.kernels && !profile.durations_only) print_kernels(profile, dev);

    if (const std::string w = profile_device_warning(profile, dev); !w.empty()) fmt::print(stderr, "warning: {}\n", w);
    const OpCosts costs = costs_from_profile(profile, graph, dev);
    PlanOptions plan_options;
    plan_options.strategy = opt.strategy;
    plan_options.max_streams = opt.max_streams;
    if (profile.launch_api) plan_options.sim.launch_latency_ns = profile.launch_api->median_ns;
    const Plan plan = make_plan(graph, dev, costs, plan_options);
    {
        std::FILE* out = std::fopen(opt.out_plan.c_str(), "wb");
        if (!out) throw Error("cannot open '" + opt.out_plan + "' for writing");
        const std::string text = to_json(plan, graph).dump(2) + "\n";
        const bool ok = std::fwrite(text.data(), 1, text.size(), out) == text.size();
        if (std::fclose(out) != 0 || !ok) throw Error("could not write the plan to '" + opt.out_plan + "'");
    }

    const Plan serial = strategy::serial(graph, dev.key);
    const Prediction serial_pred = predict(graph, serial, dev, costs, sim::LaunchMode::eager, plan_options.sim);
    const Prediction plan_pred = predict(graph, plan, dev, costs, sim::LaunchMode::eager, plan_options.sim);
    fmt::print("\n");
    if (profile.iteration)
        fmt::print("measured serial iteration (GPU, first start to last end): {:.1f} us median over {}\n",
                   us(profile.iteration->median_ns), profile.iteration->count);
    if (profile.launch_api)
        fmt::print("kernel launch call (host): {:.2f} us median over {} launches\n", us(profile.launch_api->median_ns),
                   profile.launch_api->count);
    fmt::print("simulated: serial {:.1f} us; '{}' plan {:.1f} us on {} stream(s) ({:.2f}x); lower bound {:.1f} us\n",
               us(serial_pred.predicted_ns), plan.strategy, us(plan_pred.predicted_ns), plan.stream_count(),
               plan_pred.predicted_ns > 0 ? serial_pred.predicted_ns / plan_pred.predicted_ns : 0.0,
               us(plan_pred.bound.bound_ns));
    fmt::print("wrote {} (strategy '{}', {} steps, {} waits)\n", opt.out_plan, plan.strategy, plan.steps.size(),
               plan.waits.size());
}

int run_profile_tool(const ProfileToolOptions& opt) {
    if (opt.network != "demo")
        throw Error("unknown network '" + opt.network + "': braid-profile runs the built-in 'demo' network for now");
    if (opt.iters == 0) throw Error("--iters must be at least 1");
    if (const std::string reason = cuda::no_device_reason(); !reason.empty()) {
        std::printf("%s\n", reason.c_str());
        return 77;
    }
    cuda::check(cudaSetDevice(opt.device), "cudaSetDevice");
    const DeviceSpec dev = cuda::device_spec_from_cuda(opt.device);

    demo::DemoNetwork net;
    const OpGraph& graph = net.graph();
    CudaBackend backend;  // eager: the hook sees every op body
    std::vector<Executor<CudaBackend>::Body> bodies;
    for (const demo::DemoNetwork::Body& b : net.bodies())
        bodies.push_back([b](CudaLane& lane, const OpContext& ctx) { b(lane.stream, ctx); });
    const Plan serial = strategy::serial(graph, dev.key);
    Executor<CudaBackend> executor(graph, serial, backend, std::move(bodies));

    fmt::print("{}: network '{}' ({} ops) on {} ({} SMs, cc {}.{}), serial plan, {} warm-up + {} measured iterations\n",
               tool_name(), opt.network, graph.op_count(), dev.name, dev.sm_count, dev.cc_major, dev.cc_minor,
               opt.warmup, opt.iters);

    profiler::CudaProfileOptions po;
    po.device = opt.device;
    po.warmup_iterations = opt.warmup;
    po.measured_iterations = opt.iters;
    po.use_cupti = !opt.no_cupti;
    po.progress = Progress();
    po.stream_of = [&](const OpContext& ctx) { return backend.lane(ctx.lane).stream; };
    ProfileRun run;
    run.network = opt.network;
    run.settings = net.config().settings();
    run.plan = "serial";
    run.tool = tool_name();
    if (opt.no_cupti) fmt::print("CUPTI off (--no-cupti): timing each op with CUDA events, durations only\n");

    profiler::CudaProfileResult result = profiler::profile_on_cuda(graph, dev, run, po, [&](ProfilingHook* hook) {
        executor.set_profiling_hook(hook);
        executor.run();
    });
    executor.set_profiling_hook(nullptr);
    for (const std::string& w : result.warnings) fmt::print(stderr, "warning: {}\n", w);
    if (!result.cupti_library.empty()) fmt::print("traced with CUPTI ({})\n", result.cupti_library);

    if (const std::string wrong = net.check(); !wrong.empty()) throw Error("the demo computed a wrong result: " + wrong);

    save_profile(result.profile, opt.out_profile);
    report(result.profile, graph, dev, opt);
    return 0;
}

}  // namespace braid::tool
