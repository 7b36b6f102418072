#include "train/conv_census.hpp"

#include <map>
#include <tuple>
#include <variant>

namespace braid::samples {

std::vector<ConvCensusEntry> conv_census(const TrainingGraph& tg) {
    using Key = std::tuple<std::uint32_t, std::uint32_t, std::uint32_t, std::uint32_t, std::uint32_t, std::uint32_t,
                           std::uint32_t, std::uint32_t, std::uint32_t, std::uint32_t, std::uint32_t, bool>;
    std::vector<ConvCensusEntry> entries;
    std::map<Key, std::size_t> index;  // problem -> entry
    const auto layers = tg.network.layers();
    for (LayerId l = 0; l < layers.size(); ++l) {
        const Conv2d* conv = std::get_if<Conv2d>(&layers[l].spec);
        if (conv == nullptr) continue;
        const ConvConfig& c = conv->config;
        const Key key{conv->in.n,     conv->in.c, conv->in.h,  conv->in.w,  c.out_channels, c.kernel.h,
                      c.kernel.w,     c.stride,   c.pad.h,     c.pad.w,     c.groups,       c.bias};
        auto [it, fresh] = index.try_emplace(key, entries.size());
        if (fresh) entries.push_back({*conv, layers[l].name, 0, 0});
        ConvCensusEntry& e = entries[it->second];
        ++e.layers;
        if (tg.layer_ops.at(l).backward_data) ++e.backward_data;
    }
    return entries;
}

}  // namespace braid::samples
