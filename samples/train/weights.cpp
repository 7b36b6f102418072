#include "train/weights.hpp"

#include <cmath>
#include <cstring>
#include <sstream>

namespace braid::samples {

namespace {

void same_graph(const WeightSnapshot& a, const WeightSnapshot& b) {
    if (a.graph == nullptr || b.graph == nullptr) throw braid::Error("compare_weights: an empty weight snapshot");
    if (a.graph->graph.fingerprint() != b.graph->graph.fingerprint())
        throw braid::Error("cannot compare weights of models of different graphs ('" + a.graph->network.name() + "' " +
                           a.graph->graph.fingerprint() + " vs '" + b.graph->network.name() + "' " +
                           b.graph->graph.fingerprint() + ")");
}

}  // namespace

bool is_weight(const BufferInfo& info) noexcept {
    return info.role == BufferRole::parameter || info.role == BufferRole::state;
}

WeightSnapshot snapshot_weights(const HostModel& model) {
    const TrainingGraph& tg = model.graph();
    WeightSnapshot s{&tg, std::vector<std::vector<std::byte>>(tg.buffers.size())};
    for (BufferId id = 0; id < tg.buffers.size(); ++id) {
        if (!is_weight(tg.buffers[id])) continue;
        const std::byte* p = model.bytes(id);
        s.buffers[id].assign(p, p + tg.graph.buffer(id).bytes);
    }
    return s;
}

WeightComparison compare_weights(const WeightSnapshot& a, const WeightSnapshot& b) {
    same_graph(a, b);
    const TrainingGraph& tg = *a.graph;
    WeightComparison out;
    for (BufferId id = 0; id < tg.buffers.size(); ++id) {
        const BufferInfo& info = tg.buffers[id];
        if (!is_weight(info)) continue;
        ++out.tensors_compared;
        const std::vector<std::byte>& pa = a.buffers.at(id);
        const std::vector<std::byte>& pb = b.buffers.at(id);
        if (pa.size() == pb.size() && std::memcmp(pa.data(), pb.data(), pa.size()) == 0) continue;
        const std::size_t width = info.element == ElementType::u64 ? 8 : 4;
        for (std::uint64_t i = 0; (i + 1) * width <= std::min(pa.size(), pb.size()); ++i) {
            if (std::memcmp(pa.data() + i * width, pb.data() + i * width, width) == 0) continue;
            out.identical = false;
            out.tensor = tg.graph.buffer(id).name;
            out.index = i;
            if (info.element == ElementType::u64) {
                std::uint64_t x = 0, y = 0;
                std::memcpy(&x, pa.data() + i * width, 8);
                std::memcpy(&y, pb.data() + i * width, 8);
                out.first = static_cast<double>(x);
                out.second = static_cast<double>(y);
            } else {
                float x = 0, y = 0;
                std::memcpy(&x, pa.data() + i * width, 4);
                std::memcpy(&y, pb.data() + i * width, 4);
                out.first = x;
                out.second = y;
            }
            return out;
        }
        out.identical = false;  // sizes differ
        out.tensor = tg.graph.buffer(id).name;
        return out;
    }
    return out;
}

std::string ToleranceComparison::describe() const {
    std::ostringstream s;
    if (within) {
        s << "within tolerance (" << tensors_compared << " tensors, largest difference "
          << format_compared_value(max_abs_difference);
        if (!max_tensor.empty()) s << " in '" << max_tensor << "'";
        s << ")";
    } else {
        s << "outside tolerance: tensor '" << tensor << "' index " << index << ": " << format_compared_value(first)
          << " vs " << format_compared_value(second) << " (|a - b| = " << format_compared_value(std::abs(first - second))
          << " > " << format_compared_value(bound) << ")";
    }
    return s.str();
}

ToleranceComparison compare_weights_within(const WeightSnapshot& a, const WeightSnapshot& reference, double relative,
                                           double absolute) {
    same_graph(a, reference);
    const TrainingGraph& tg = *a.graph;
    ToleranceComparison out;
    for (BufferId id = 0; id < tg.buffers.size(); ++id) {
        const BufferInfo& info = tg.buffers[id];
        if (!is_weight(info)) continue;
        ++out.tensors_compared;
        const std::vector<std::byte>& pa = a.buffers.at(id);
        const std::vector<std::byte>& pb = reference.buffers.at(id);
        const std::string& name = tg.graph.buffer(id).name;
        if (info.element != ElementType::f32) {
            if (pa != pb && out.within) {
                out.within = false;
                out.tensor = name;
            }
            continue;
        }
        const std::size_t n = std::min(pa.size(), pb.size()) / sizeof(float);
        for (std::size_t i = 0; i < n; ++i) {
            float x = 0, y = 0;
            std::memcpy(&x, pa.data() + i * 4, 4);
            std::memcpy(&y, pb.data() + i * 4, 4);
            ++out.elements_compared;
            const double d = std::abs(static_cast<double>(x) - static_cast<double>(y));
            const double bound = absolute + relative * std::abs(static_cast<double>(y));
            if (d > out.max_abs_difference || std::isnan(d)) {
                out.max_abs_difference = d;
                out.max_tensor = name;
            }
            if ((d > bound || std::isnan(d)) && out.within) {
                out.within = false;
                out.tensor = name;
                out.index = i;
                out.first = x;
                out.second = y;
                out.bound = bound;
            }
        }
    }
    return out;
}

}  // namespace braid::samples
