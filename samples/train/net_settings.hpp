// A bundled network's configuration as profile settings and back: what
// braid-profile writes into profile.json ("net", "batch", "image",
// "classes", "width_scale", "no_aux"; "fuse_relu", "share_bn_sums",
// "update_bucket_bytes" when set) so that a profile says which network it
// measured, and what braid-calibrate reads to estimate that network beside
// its profile; and the kernels the run used ("conv_api", "batch_norm").
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "braid/graph/op_graph.hpp"
#include "braid/model/estimate.hpp"
#include "braid/profiler/profile.hpp"
#include "nets/zoo.hpp"

namespace braid::samples {

braid::ProfileSettings net_settings(const NetConfig& config);

// nullopt when the settings name no bundled network ("net" missing);
// throws braid::Error naming the setting when one is malformed or unknown.
// The kernel settings below are allowed beside the network's.
std::optional<NetConfig> net_config_from_settings(const braid::ProfileSettings& settings);

// Which library kernels a profiled run used, where not the defaults: what
// CudaTrainer::profile adds to the settings ("conv_api": "graph",
// "batch_norm": "cudnn", "layout": "nhwc"), so a profile's rows are measured
// with the kernels (and the activations' layout) it profiled. Throws
// braid::Error naming the setting for another value.
struct KernelSettings {
    bool conv_graph_api = false;
    bool cudnn_batch_norm = false;
    bool channels_last = false;
};
KernelSettings kernel_settings_from(const braid::ProfileSettings& settings);
bool operator==(const KernelSettings& a, const KernelSettings& b) noexcept;
// "conv_api graph, batch_norm own, layout nchw"
std::string to_string(const KernelSettings& k);

// The estimates of the bundled network `settings` describe, checked against
// the graph it ran (`expected`, from a profile): nullopt when the settings
// name no network; braid::ProfileError when the network braid builds today
// is another graph (naming both fingerprints).
std::optional<std::vector<braid::OpEstimate>> net_estimates(const braid::ProfileSettings& settings,
                                                            const braid::OpGraph& expected);

}  // namespace braid::samples
