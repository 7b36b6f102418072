// What a profile says, as text for people: per layer, its ops, kernels,
// copies, time and share of the step, how many SMs its kernels cover and
// what limits the occupancy of its longest kernel, and how long its bodies
// kept the host (profiles that timed them); per kernel, its launch
// shape, resources and blocks per SM. braid-profile and braid-train
// --profile-out print these tables; a custom trainer can too.
#pragma once

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "braid/graph/op_graph.hpp"
#include "braid/model/device_spec.hpp"
#include "braid/model/occupancy.hpp"
#include "braid/profiler/profile.hpp"

namespace braid::profiler {

namespace detail {

#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
inline std::string printf_string(const char* format, ...) {
    va_list args;
    va_start(args, format);
    va_list again;
    va_copy(again, args);
    const int n = std::vsnprintf(nullptr, 0, format, args);
    va_end(args);
    std::string out(n > 0 ? static_cast<std::size_t>(n) : 0, '\0');
    if (n > 0) std::vsnprintf(out.data(), out.size() + 1, format, again);
    va_end(again);
    return out;
}

inline double to_us(double ns) { return ns / 1000.0; }

}  // namespace detail

// "ns::(anonymous namespace)::gemm_tiled(float const*, ...)" -> "gemm_tiled";
// at most 40 characters.
inline std::string short_kernel_name(const std::string& demangled) {
    std::string s = demangled;
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

// One row per layer (an op without a layer is its own), in the graph's
// topological order of their first ops, then a total.
inline std::string format_layer_table(const Profile& profile, const OpGraph& graph, const DeviceSpec& dev) {
    struct Row {
        std::string layer;
        int ops = 0;
        int kernels = 0;
        int transfers = 0;  // memcpy/memset
        double time_ns = 0.0;
        int sms = 0;               // most SMs any kernel of the layer covers in its first wave
        double longest_ns = -1.0;  // the layer's longest kernel decides occupancy and limiter
        std::string occupancy = "-";
        std::string limiter = "-";
        double host_ns = 0.0;  // its ops' bodies on the host, where timed
        int host_ops = 0;
    };
    std::vector<Row> rows;
    std::map<std::string, std::size_t> row_of;
    double total_ns = 0.0;
    for (OpId id : graph.topological_order()) {
        const Op& op = graph.op(id);
        const ProfiledOp* p = profile.find_op(op.name);
        if (!p) continue;
        const std::string layer = op.layer.empty() ? op.name : op.layer;
        auto [it, fresh] = row_of.emplace(layer, rows.size());
        if (fresh) rows.push_back(Row{layer});
        Row& row = rows[it->second];
        ++row.ops;
        row.time_ns += p->duration.median_ns;
        total_ns += p->duration.median_ns;
        if (p->host) {
            row.host_ns += p->host->median_ns;
            ++row.host_ops;
        }
        row.kernels += static_cast<int>(p->kernels.size());
        row.transfers += static_cast<int>(p->transfers.size());
        for (const ProfiledKernel& k : p->kernels) {
            try {
                const Occupancy o = occupancy(dev, k.shape);
                row.sms = std::max(row.sms, footprint(dev, o, k.shape.blocks()).sms);
                if (k.duration.median_ns > row.longest_ns) {
                    row.longest_ns = k.duration.median_ns;
                    row.occupancy = detail::printf_string("%d blk/SM %3.0f%%", o.blocks_per_sm, 100.0 * o.fraction);
                    row.limiter = std::string(to_string(o.limiter));
                }
            } catch (const ModelError&) {
                row.limiter = "does not fit";
            }
        }
    }
    // The layer column fits the longest name (GoogLeNet's run to 25 characters).
    int width = 16;
    for (const Row& r : rows) width = std::max(width, static_cast<int>(r.layer.size()));
    // The host column only for profiles that timed bodies: "-" for a layer
    // none of whose bodies was timed, "*" after a partial sum.
    const bool host = std::any_of(profile.ops.begin(), profile.ops.end(), [](const ProfiledOp& op) { return op.host; });
    double host_total_ns = 0.0;
    auto host_cell = [](const Row& r) {
        if (r.host_ops == 0) return std::string("-");
        return detail::printf_string("%.1f%s", detail::to_us(r.host_ns), r.host_ops < r.ops ? "*" : "");
    };
    std::string out = detail::printf_string("\n%-*s %4s %8s %6s %11s %6s %9s %16s %-14s%s\n", width, "layer", "ops",
                                            "kernels", "copies", "time (us)", "share", "SMs", "occupancy", "limiter",
                                            host ? "  host (us)" : "");
    for (const Row& r : rows) {
        const std::string sms = profile.durations_only ? "all*"
                                : r.kernels == 0        ? "-"
                                                        : std::to_string(r.sms) + "/" + std::to_string(dev.sm_count);
        const std::string kernels = profile.durations_only ? "?" : std::to_string(r.kernels);
        const std::string copies = profile.durations_only ? "?" : std::to_string(r.transfers);
        out += detail::printf_string("%-*s %4d %8s %6s %11.1f %5.1f%% %9s %16s %-14s%s\n", width, r.layer.c_str(), r.ops,
                                     kernels.c_str(), copies.c_str(), detail::to_us(r.time_ns),
                                     total_ns > 0 ? 100.0 * r.time_ns / total_ns : 0.0, sms.c_str(),
                                     r.occupancy.c_str(), r.limiter.c_str(),
                                     host ? detail::printf_string(" %10s", host_cell(r).c_str()).c_str() : "");
        host_total_ns += r.host_ns;
    }
    out += detail::printf_string("%-*s %4zu %8s %6s %11.1f", width, "total", graph.op_count(), "", "",
                                 detail::to_us(total_ns));
    if (host)
        out += detail::printf_string(" %6s %9s %16s %-14s %10.1f", "", "", "", "", detail::to_us(host_total_ns));
    out += "\n";
    if (host) out += "host: each layer's op bodies on the host, per iteration (* some bodies untimed)\n";
    if (profile.durations_only)
        out += "* durations-only profile: kernels unknown; each op is planned as one kernel that fills the GPU\n";
    return out;
}

// Every kernel and transfer of every op, in the profile's op order.
inline std::string format_kernel_table(const Profile& profile, const DeviceSpec& dev) {
    int width = 12;  // the op column fits the longest name
    for (const ProfiledOp& op : profile.ops) width = std::max(width, static_cast<int>(op.name.size()));
    std::string out = detail::printf_string("\n%-*s %-40s %14s %12s %5s %9s %10s %7s %-14s\n", width, "op", "kernel",
                                            "grid", "block", "regs", "smem (B)", "time (us)", "blk/SM", "limiter");
    for (const ProfiledOp& op : profile.ops) {
        for (const ProfiledKernel& k : op.kernels) {
            std::string bps = "-", limiter = "does not fit";
            try {
                const Occupancy o = occupancy(dev, k.shape);
                bps = std::to_string(o.blocks_per_sm);
                limiter = std::string(to_string(o.limiter));
            } catch (const ModelError&) {
            }
            const std::string grid = std::to_string(k.shape.grid.x) + "x" + std::to_string(k.shape.grid.y) + "x" +
                                     std::to_string(k.shape.grid.z);
            const std::string block = std::to_string(k.shape.block.x) + "x" + std::to_string(k.shape.block.y) + "x" +
                                      std::to_string(k.shape.block.z);
            out += detail::printf_string("%-*s %-40s %14s %12s %5u %9u %10.1f %7s %-14s\n", width, op.name.c_str(),
                                         short_kernel_name(k.shape.name).c_str(), grid.c_str(), block.c_str(),
                                         k.shape.regs_per_thread, k.shape.static_smem_bytes + k.shape.dynamic_smem_bytes,
                                         detail::to_us(k.duration.median_ns), bps.c_str(), limiter.c_str());
        }
        for (const ProfiledTransfer& t : op.transfers)
            out += detail::printf_string("%-*s %-40s %14s %12s %5s %9s %10.1f\n", width, op.name.c_str(),
                                         std::string(to_string(t.kind)).c_str(),
                                         (std::to_string(t.bytes) + " B").c_str(), "", "", "",
                                         detail::to_us(t.duration.median_ns));
    }
    return out;
}

}  // namespace braid::profiler
