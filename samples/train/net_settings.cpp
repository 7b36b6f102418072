#include "train/net_settings.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <variant>

#include <fmt/format.h>

#include "train/training_graph.hpp"

namespace braid::samples {

braid::ProfileSettings net_settings(const NetConfig& c) {
    braid::ProfileSettings s{{"net", c.net},
                             {"batch", std::int64_t{c.batch}},
                             {"image", std::int64_t{c.image}},
                             {"classes", std::int64_t{c.classes}},
                             {"width_scale", c.width_scale},
                             {"no_aux", !c.aux_classifiers}};
    if (c.fuse_relu) s["fuse_relu"] = true;  // absent: not fused (profiles from before it)
    if (c.share_batch_norm_sums) s["share_bn_sums"] = true;  // absent: not shared
    if (c.update_bucket_bytes > 0) s["update_bucket_bytes"] = static_cast<std::int64_t>(c.update_bucket_bytes);
    return s;
}

namespace {

// What a setting holds, in the words of its JSON.
const char* kind_of(const braid::ProfileSetting& v) {
    constexpr const char* kinds[] = {"a whole number", "a number with a fraction", "true or false", "a string"};
    return kinds[v.index()];
}

template <class T>
const T* setting(const braid::ProfileSettings& s, const std::string& name) {
    auto it = s.find(name);
    if (it == s.end()) return nullptr;
    const T* v = std::get_if<T>(&it->second);
    if (!v)
        throw braid::Error("network setting '" + name + "' must be " + kind_of(braid::ProfileSetting{T{}}) + ", got " +
                           kind_of(it->second));
    return v;
}

// A number, whole or not ("width_scale": 1 is 1.0).
std::optional<double> number_setting(const braid::ProfileSettings& s, const std::string& name) {
    auto it = s.find(name);
    if (it == s.end()) return std::nullopt;
    if (const auto* whole = std::get_if<std::int64_t>(&it->second)) return static_cast<double>(*whole);
    if (const auto* real = std::get_if<double>(&it->second)) return *real;
    throw braid::Error("network setting '" + name + "' must be a number, got " + kind_of(it->second));
}

std::uint32_t positive(const braid::ProfileSettings& s, const std::string& name, std::uint32_t fallback,
                       std::int64_t most) {
    const std::int64_t* v = setting<std::int64_t>(s, name);
    if (!v) return fallback;
    if (*v < 1 || *v > most)
        throw braid::Error("network setting '" + name + "' must be between 1 and " + std::to_string(most) + ", got " +
                           std::to_string(*v));
    return static_cast<std::uint32_t>(*v);
}

}  // namespace

std::optional<NetConfig> net_config_from_settings(const braid::ProfileSettings& s) {
    const std::string* net = setting<std::string>(s, "net");
    if (!net) return std::nullopt;
    const std::vector<std::string> names = network_names();
    if (std::find(names.begin(), names.end(), *net) == names.end())
        throw braid::Error("network setting 'net' names '" + *net + "', not a bundled network");
    (void)kernel_settings_from(s);  // malformed kernel settings are errors here too
    for (const auto& [name, value] : s)
        if (name != "net" && name != "batch" && name != "image" && name != "classes" && name != "width_scale" &&
            name != "no_aux" && name != "fuse_relu" && name != "share_bn_sums" && name != "update_bucket_bytes" &&
            name != "conv_api" && name != "batch_norm" && name != "layout")
            throw braid::Error("unknown network setting '" + name +
                               "' (expected net, batch, image, classes, width_scale, no_aux, fuse_relu, "
                               "share_bn_sums, update_bucket_bytes; conv_api, batch_norm and layout for the kernels)");
    NetConfig c;
    c.net = *net;
    c.batch = positive(s, "batch", c.batch, 1 << 20);
    c.image = positive(s, "image", c.image, 8192);
    c.classes = positive(s, "classes", c.classes, 1 << 24);
    if (const std::optional<double> w = number_setting(s, "width_scale")) {
        // The bounds of braid-train's --width-scale.
        if (!(*w >= 1e-6 && *w <= 64.0))
            throw braid::Error("network setting 'width_scale' must be from 1e-06 to 64, got " + fmt::format("{}", *w));
        c.width_scale = *w;
    }
    if (const bool* no_aux = setting<bool>(s, "no_aux")) c.aux_classifiers = !*no_aux;
    if (const bool* fuse = setting<bool>(s, "fuse_relu")) c.fuse_relu = *fuse;
    if (const bool* share = setting<bool>(s, "share_bn_sums")) c.share_batch_norm_sums = *share;
    if (const std::int64_t* bucket = setting<std::int64_t>(s, "update_bucket_bytes")) {
        if (*bucket < 0)
            throw braid::Error("network setting 'update_bucket_bytes' must be >= 0, got " + std::to_string(*bucket));
        c.update_bucket_bytes = static_cast<std::uint64_t>(*bucket);
    }
    return c;
}

KernelSettings kernel_settings_from(const braid::ProfileSettings& s) {
    // A setting absent is the default kernel; present, one of its two values.
    const auto choice = [&](const std::string& name, const std::string& off, const std::string& on) {
        const std::string* v = setting<std::string>(s, name);
        if (v && *v != off && *v != on)
            throw braid::Error("kernel setting '" + name + "' is '" + *v + "', not '" + off + "' or '" + on + "'");
        return v && *v == on;
    };
    return {choice("conv_api", "legacy", "graph"), choice("batch_norm", "own", "cudnn"),
            choice("layout", "nchw", "nhwc")};
}

bool operator==(const KernelSettings& a, const KernelSettings& b) noexcept {
    return a.conv_graph_api == b.conv_graph_api && a.cudnn_batch_norm == b.cudnn_batch_norm &&
           a.channels_last == b.channels_last;
}

std::string to_string(const KernelSettings& k) {
    return std::string("conv_api ") + (k.conv_graph_api ? "graph" : "legacy") + ", batch_norm " +
           (k.cudnn_batch_norm ? "cudnn" : "own") + ", layout " + (k.channels_last ? "nhwc" : "nchw");
}

std::optional<std::vector<braid::OpEstimate>> net_estimates(const braid::ProfileSettings& settings,
                                                            const braid::OpGraph& expected) {
    const std::optional<NetConfig> config = net_config_from_settings(settings);
    if (!config) return std::nullopt;
    TrainConfig tc;
    tc.model = *config;
    const TrainingGraph tg = build_training_graph(tc);
    if (tg.graph.fingerprint() != expected.fingerprint())
        throw braid::ProfileError("network '" + config->net + "' at batch " + std::to_string(config->batch) +
                                  " builds graph " + tg.graph.fingerprint() + " today, but the profile ran graph " +
                                  expected.fingerprint() + ": profile it again");
    return op_estimates(tg);
}

}  // namespace braid::samples
