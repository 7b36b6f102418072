// An SVG picture of a simulated iteration: one row per stream, every kernel
// a bar coloured by its op's kind, ops on the critical path outlined, and the
// busy-SM fraction plotted underneath. For people who would rather look than
// read a trace.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "braid/graph/op_graph.hpp"
#include "braid/sim/program.hpp"

namespace braid {

namespace detail {

inline std::string xml_escape(std::string_view s) {
    std::string out;
    for (char c : s) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&quot;"; break;
            case '\'': out += "&apos;"; break;
            default:
                if (static_cast<unsigned char>(c) >= 0x20 || c == '\n' || c == '\t') out += c;
        }
    }
    return out;
}

inline const char* kind_colour(OpKind k) {
    switch (k) {
        case OpKind::forward: return "#4e79a7";
        case OpKind::backward_data: return "#f28e2b";
        case OpKind::backward_weight: return "#59a14f";
        case OpKind::update: return "#b07aa1";
        case OpKind::communication: return "#e15759";
        case OpKind::other: return "#9c9c9c";
    }
    return "#9c9c9c";
}

}  // namespace detail

struct TimelineSvgOptions {
    std::string title;
    double width_px = 1600.0;
    double row_px = 26.0;
};

inline std::string timeline_svg(const OpGraph& graph, const sim::Program& program, const sim::Result& result,
                                const std::set<OpId>& critical_path, const TimelineSvgOptions& opt = {}) {
    const double left = 150.0, top = 48.0, util_h = 60.0;
    const std::uint32_t streams = program.stream_count();
    const double span_ns = std::max(result.makespan_ns, 1.0);
    const double plot_w = opt.width_px - left - 20.0;
    const double rows_h = streams * opt.row_px;
    const double height = top + rows_h + 30.0 + util_h + 50.0;
    auto x = [&](double t) { return left + plot_w * t / span_ns; };

    std::ostringstream svg;
    svg.setf(std::ios::fixed);
    svg.precision(2);
    svg << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << opt.width_px << "\" height=\"" << height
        << "\" font-family=\"sans-serif\" font-size=\"11\">\n"
        << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
        << "<text x=\"" << left << "\" y=\"20\" font-size=\"14\" font-weight=\"bold\">" << detail::xml_escape(opt.title)
        << "</text>\n"
        << "<text x=\"" << left << "\" y=\"36\">iteration " << result.makespan_ns / 1e3
        << " us; outlined: ops on the critical path</text>\n";
    // Legend: one swatch per op kind.
    double lx = left + 420.0;
    for (OpKind k : {OpKind::forward, OpKind::backward_data, OpKind::backward_weight, OpKind::update, OpKind::other}) {
        svg << "<rect x=\"" << lx << "\" y=\"27\" width=\"12\" height=\"12\" fill=\"" << detail::kind_colour(k)
            << "\"/><text x=\"" << lx + 16 << "\" y=\"37\">" << to_string(k) << "</text>\n";
        lx += 24.0 + 7.0 * static_cast<double>(to_string(k).size());
    }
    // Stream rows.
    for (std::uint32_t s = 0; s < streams; ++s) {
        const double y = top + s * opt.row_px;
        svg << "<rect x=\"" << left << "\" y=\"" << y << "\" width=\"" << plot_w << "\" height=\"" << opt.row_px - 2
            << "\" fill=\"" << (s % 2 ? "#f4f4f4" : "#fafafa") << "\"/>\n"
            << "<text x=\"8\" y=\"" << y + opt.row_px * 0.65 << "\">stream " << s << " (priority "
            << program.stream_priorities[s] << ")</text>\n";
    }
    // Kernels.
    for (std::size_t k = 0; k < program.kernels.size() && k < result.kernels.size(); ++k) {
        const sim::KernelRecord& r = result.kernels[k];
        const sim::Kernel& kern = program.kernels[k];
        const bool known_op = kern.op != sim::no_op && kern.op < graph.op_count();
        const OpKind kind = known_op ? graph.op(kern.op).kind : OpKind::other;
        const bool critical = known_op && critical_path.count(kern.op) != 0;
        const double x0 = x(r.start_ns), w = std::max(0.5, x(r.end_ns) - x0);
        const double y = top + r.stream * opt.row_px + 2;
        svg << "<rect x=\"" << x0 << "\" y=\"" << y << "\" width=\"" << w << "\" height=\"" << opt.row_px - 6
            << "\" fill=\"" << detail::kind_colour(kind) << "\"";
        if (critical) svg << " stroke=\"black\" stroke-width=\"1.5\"";
        svg << "><title>" << detail::xml_escape(kern.label) << " (" << detail::xml_escape(kern.cost.shape.name) << "): "
            << (r.end_ns - r.start_ns) / 1e3 << " us on " << r.sms_used << " SMs" << (critical ? ", critical path" : "")
            << "</title></rect>\n";
        if (w > 60.0)
            svg << "<text x=\"" << x0 + 3 << "\" y=\"" << y + opt.row_px * 0.55 << "\" fill=\"white\">"
                << detail::xml_escape(kern.label.substr(0, static_cast<std::size_t>(w / 6.5))) << "</text>\n";
    }
    // Busy SMs over time.
    const double uy = top + rows_h + 30.0;
    svg << "<text x=\"8\" y=\"" << uy + util_h * 0.5 << "\">busy SMs</text>\n"
        << "<rect x=\"" << left << "\" y=\"" << uy << "\" width=\"" << plot_w << "\" height=\"" << util_h
        << "\" fill=\"none\" stroke=\"#cccccc\"/>\n<polyline fill=\"none\" stroke=\"#e15759\" points=\"";
    std::uint32_t max_sms = 1;
    for (const sim::UtilisationSample& u : result.utilisation) max_sms = std::max(max_sms, u.busy_sms);
    double prev_y = uy + util_h;
    for (const sim::UtilisationSample& u : result.utilisation) {
        const double px = x(u.time_ns), py = uy + util_h - util_h * u.busy_sms / max_sms;
        svg << px << "," << prev_y << " " << px << "," << py << " ";
        prev_y = py;
    }
    svg << x(span_ns) << "," << prev_y << "\"/>\n";
    // Time axis: ticks 1, 2 or 5 x 10^k microseconds apart, about ten of them.
    const double ay = uy + util_h + 18.0;
    const double span_us = span_ns / 1e3;
    double step_us = std::pow(10.0, std::floor(std::log10(span_us / 10.0)));
    for (double m : {2.0, 5.0, 10.0})
        if (span_us / step_us > 12.0) step_us = std::pow(10.0, std::floor(std::log10(span_us / 10.0))) * m;
    svg.precision(step_us >= 1.0 ? 0 : step_us >= 0.1 ? 1 : 2);
    for (double t_us = 0.0; t_us <= span_us + 1e-9; t_us += step_us) {
        svg << "<line x1=\"" << x(t_us * 1e3) << "\" x2=\"" << x(t_us * 1e3) << "\" y1=\"" << top << "\" y2=\""
            << uy + util_h << "\" stroke=\"#dddddd\" stroke-width=\"0.5\"/>\n"
            << "<text x=\"" << x(t_us * 1e3) << "\" y=\"" << ay << "\" text-anchor=\"middle\">" << t_us << "</text>\n";
    }
    svg.precision(2);
    svg << "<text x=\"" << left << "\" y=\"" << ay + 16 << "\">time (us)</text>\n</svg>\n";
    return svg.str();
}

}  // namespace braid
