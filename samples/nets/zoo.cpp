#include "nets/zoo.hpp"

#include <cmath>
#include <string>

namespace braid::samples {

std::vector<std::string> network_names() {
    return {"googlenet", "resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "inception_v3"};
}

std::uint32_t default_image(std::string_view net) { return net == "inception_v3" ? 299 : 224; }

std::string net_variants(const NetConfig& c) {
    std::string s;
    if (c.fuse_relu) s += ", ReLUs fused";
    if (c.share_batch_norm_sums) s += ", batch-norm sums shared";
    constexpr std::uint64_t mib = std::uint64_t{1} << 20;
    if (c.update_bucket_bytes > 0)
        s += ", updates in " +
             (c.update_bucket_bytes % mib == 0 ? std::to_string(c.update_bucket_bytes / mib) + " MiB"
                                               : std::to_string(c.update_bucket_bytes) + "-byte") +
             " buckets";
    return s;
}

bool has_aux_classifiers(std::string_view net) { return net == "googlenet" || net == "inception_v3"; }

std::uint32_t scaled_channels(std::uint32_t channels, double width_scale) {
    const double c = std::round(static_cast<double>(channels) * width_scale);
    return c < 1.0 ? 1u : static_cast<std::uint32_t>(c);
}

namespace {

Network build(const NetConfig& c) {
    if (c.net == "googlenet") return googlenet(c);
    if (c.net == "inception_v3") return inception_v3(c);
    if (c.net.rfind("resnet", 0) == 0) {
        const std::string depth = c.net.substr(6);
        for (const char* d : {"18", "34", "50", "101", "152"})
            if (depth == d) return resnet(static_cast<std::uint32_t>(std::stoul(depth)), c);
    }
    std::string names;
    for (const std::string& n : network_names()) names += (names.empty() ? "" : ", ") + n;
    throw ShapeError("unknown network '" + c.net + "'; known networks: " + names);
}

void check_config(const NetConfig& c) {
    const std::string who = "network '" + c.net + "': ";
    if (c.batch == 0) throw ShapeError(who + "the batch must hold at least one image");
    if (c.image == 0) throw ShapeError(who + "the image size must be at least 1 pixel");
    if (c.classes < 2) throw ShapeError(who + "needs at least 2 classes, got " + std::to_string(c.classes));
    if (!(c.width_scale > 0.0) || !std::isfinite(c.width_scale))
        throw ShapeError(who + "the width scale must be a positive number");
}

}  // namespace

std::uint32_t smallest_image(NetConfig config) {
    config.batch = 1;
    for (std::uint32_t s = 1; s <= 4096; ++s) {
        config.image = s;
        try {
            (void)build(config);
            return s;
        } catch (const ShapeError&) {
        }
    }
    return 0;
}

Network make_network(const NetConfig& config) {
    check_config(config);
    try {
        return build(config);
    } catch (const ShapeError& e) {
        const std::string what = e.what();
        if (what.rfind("unknown network", 0) == 0) throw;
        const std::uint32_t smallest = smallest_image(config);
        if (smallest == 0 || smallest <= config.image) throw;
        std::string hint = "; the smallest image " + config.net + " accepts is " + std::to_string(smallest) + "x" +
                           std::to_string(smallest);
        if (has_aux_classifiers(config.net) && config.aux_classifiers) {
            NetConfig no_aux = config;
            no_aux.aux_classifiers = false;
            const std::uint32_t plain = smallest_image(no_aux);
            if (plain != 0 && plain < smallest)
                hint += " (" + std::to_string(plain) + "x" + std::to_string(plain) +
                        " without the auxiliary classifiers)";
        }
        throw ShapeError(what + hint);
    }
}

}  // namespace braid::samples
