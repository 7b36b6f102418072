#include "train/summary.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <variant>

#include "braid/model/estimate.hpp"

namespace braid::samples {

std::string describe_network(const NetConfig& c) {
    // Only GoogLeNet and Inception-v3 have auxiliary classifiers to leave out.
    const bool aux_off = has_aux_classifiers(c.net) && !c.aux_classifiers;
    return fmt::format("{}{}{}: batch {}, {}x{} images, {} classes, width scale {}", c.net,
                       aux_off ? " without auxiliary classifiers" : "",
                       net_variants(c), c.batch, c.image, c.image,
                       c.classes, c.width_scale);
}

namespace {

// Kernel, stride and padding: what tells Inception-v3's 1x7 and 7x1 convolutions apart.
std::string window_of(const LayerSpec& spec) {
    const auto pad_text = [](Size2 pad) {
        if (pad == Size2{0}) return std::string();
        return " pad " + (pad.square() ? std::to_string(pad.h) : to_string(pad));
    };
    if (const auto* c = std::get_if<Conv2d>(&spec)) {
        const ConvConfig& k = c->config;
        return fmt::format("{}/{}{}{}", to_string(k.kernel), k.stride, pad_text(k.pad),
                           k.groups > 1 ? fmt::format(" g{}", k.groups) : "");
    }
    if (const auto* p = std::get_if<Pool2d>(&spec)) {
        if (p->config.global) return "global";
        return fmt::format("{}x{}/{}{}{}", p->kernel_h, p->kernel_w, p->stride, pad_text(Size2{p->pad}),
                           p->config.ceil_mode ? " ceil" : "");
    }
    if (const auto* a = std::get_if<Add>(&spec); a && a->relu) return "+relu";
    if (const auto* b = std::get_if<BatchNorm2d>(&spec); b && (b->config.relu || b->config.share_sums))
        return std::string(b->config.relu ? "+relu" : "") + (b->config.relu && b->config.share_sums ? " " : "") +
               (b->config.share_sums ? "shared sums" : "");
    return {};
}

}  // namespace

std::vector<SummaryRow> summarize(const Network& net) {
    std::vector<SummaryRow> rows;
    for (const LayerNode& l : net.layers())
        rows.push_back(SummaryRow{l.name, kind_of(l.spec), window_of(l.spec), output_of(l.spec),
                                  parameter_count(l.spec), work_of(l.spec, Pass::forward).flops / net.batch()});
    return rows;
}

std::string format_layer_table(const Network& net) {
    const std::vector<SummaryRow> rows = summarize(net);
    std::size_t name_width = 5;
    for (const SummaryRow& r : rows) name_width = std::max(name_width, r.name.size());
    std::size_t window_width = 6;
    for (const SummaryRow& r : rows) window_width = std::max(window_width, r.window.size());
    std::string out = fmt::format("{:<{}}  {:<15}  {:<{}}  {:>14}  {:>12}  {:>14}\n", "layer", name_width, "kind",
                                  "window", window_width, "output (CxHxW)", "parameters", "fwd MFLOP/img");
    std::uint64_t params = 0;
    double flops = 0.0;
    for (const SummaryRow& r : rows) {
        out += fmt::format("{:<{}}  {:<15}  {:<{}}  {:>14}  {:>12}  {:>14.3f}\n", r.name, name_width, to_string(r.kind),
                           r.window, window_width, image_shape_string(r.output), r.parameters,
                           r.forward_flops_per_image / 1e6);
        params += r.parameters;
        flops += r.forward_flops_per_image;
    }
    const Shape4 in = net.input_shape();
    out += fmt::format("{}: {} layers, {} parameters, {:.3f} GFLOP per image forward ({}x{}x{} images, {} classes)\n",
                       net.name(), rows.size(), params, flops / 1e9, in.c, in.h, in.w, net.classes());
    return out;
}

std::string format_graph_summary(const TrainingGraph& tg, const braid::DeviceSpec* device,
                                 const EstimateOptions& options) {
    std::map<braid::OpKind, std::size_t> by_kind;
    std::size_t splittable = 0;
    for (const braid::Op& op : tg.graph.ops()) {
        ++by_kind[op.kind];
        if (op.splittable()) ++splittable;
    }
    std::string kinds;
    for (const auto& [kind, count] : by_kind) kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", count, braid::to_string(kind));
    std::string out = fmt::format(
        "training step: {} ops ({}), {} splittable over the batch of {}, {} gradient sums, {} edges, {} buffers, "
        "{:.1f} MiB allocated\n",
        tg.graph.op_count(), kinds, splittable, tg.batch(), tg.gradient_sums.size(), tg.graph.edge_count(),
        tg.graph.buffer_count(), static_cast<double>(tg.allocated_bytes()) / (1024.0 * 1024.0));
    if (device) {
        const braid::OpCosts costs = braid::estimate_costs(*device, op_estimates(tg, options));
        const std::vector<double> durations = braid::op_durations_ns(costs);
        double serial_ns = 0.0;
        std::size_t kernels = 0;
        for (std::size_t i = 0; i < costs.size(); ++i) {
            serial_ns += durations[i];
            kernels += costs[i].kernels.size();
        }
        const braid::CriticalPath cp = tg.graph.critical_path(durations);
        out += fmt::format(
            "roofline estimate on {} ({}): {} kernels, {:.3f} ms serial, critical path {:.3f} ms ({} ops)\n",
            device->key, device->name, kernels, serial_ns / 1e6, cp.length_ns / 1e6, cp.ops.size());
    }
    return out;
}

}  // namespace braid::samples
