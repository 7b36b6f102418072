#include "train/conv_census.hpp"

#include <algorithm>
#include <map>
#include <tuple>
#include <variant>

namespace braid::samples {

bool ConvCensusEntry::sliced() const noexcept {
    return x_stride > layer.in.image_elements() || y_stride > layer.out.image_elements() ||
           dx_stride > layer.in.image_elements() || dy_stride > layer.out.image_elements();
}

std::vector<ConvCensusEntry> conv_census(const TrainingGraph& tg) {
    using Key = std::tuple<std::uint32_t, std::uint32_t, std::uint32_t, std::uint32_t, std::uint32_t, std::uint32_t,
                           std::uint32_t, std::uint32_t, std::uint32_t, std::uint32_t, std::uint32_t, bool,
                           std::uint64_t, std::uint64_t, std::uint64_t, std::uint64_t>;
    std::vector<ConvCensusEntry> entries;
    std::map<Key, std::size_t> index;  // problem -> entry
    const auto layers = tg.network.layers();
    for (LayerId l = 0; l < layers.size(); ++l) {
        const Conv2d* conv = std::get_if<Conv2d>(&layers[l].spec);
        if (conv == nullptr) continue;
        const ConvConfig& c = conv->config;
        const LayerBuffers& b = tg.layers.at(l);
        const std::uint64_t x_stride = image_stride(tg, b.inputs.at(0));
        const std::uint64_t y_stride = image_stride(tg, b.output);
        std::uint64_t dx_stride = 0;
        if (!b.input_gradients.empty() && b.input_gradients[0]) dx_stride = image_stride(tg, *b.input_gradients[0]);
        const std::uint64_t dy_stride = b.output_gradient ? image_stride(tg, *b.output_gradient) : 0;
        const Key key{conv->in.n, conv->in.c, conv->in.h, conv->in.w, c.out_channels, c.kernel.h,
                      c.kernel.w, c.stride,   c.pad.h,    c.pad.w,    c.groups,       c.bias,
                      x_stride,   y_stride,   dx_stride,  dy_stride};
        auto [it, fresh] = index.try_emplace(key, entries.size());
        if (fresh) entries.push_back({*conv, layers[l].name, 0, 0, x_stride, y_stride, dx_stride, dy_stride});
        ConvCensusEntry& e = entries[it->second];
        ++e.layers;
        if (tg.layer_ops.at(l).backward_data) ++e.backward_data;
    }
    return entries;
}

ConvCensusBuffers conv_census_buffers(const std::vector<ConvCensusEntry>& census) {
    ConvCensusBuffers b;
    // A view of n images `stride` apart ends at (n-1)*stride + C*H*W, within n*stride.
    const auto view = [](const Shape4& s, std::uint64_t stride) { return std::max(s.elements(), s.n * stride); };
    for (const ConvCensusEntry& e : census) {
        b.x = std::max(b.x, view(e.layer.in, e.x_stride));
        b.dx = std::max(b.dx, view(e.layer.in, e.dx_stride));
        b.w = std::max(b.w, e.layer.weight_elements());
        b.y = std::max(b.y, view(e.layer.out, e.y_stride));
        b.dy = std::max(b.dy, view(e.layer.out, e.dy_stride));
    }
    return b;
}

}  // namespace braid::samples
