// What braid-profile does, as a function the GPU tests can call too: profile
// a network's step on a serial plan (the demo, or a bundled net's training
// step), write profile.json and plan.json, print the per-layer table. The
// command line is braid_profile.cpp.
#pragma once

#include <cstdint>
#include <string>

#include "braid/graph/op_graph.hpp"
#include "braid/model/device_spec.hpp"
#include "braid/profiler/profile.hpp"
#include "nets/zoo.hpp"

namespace braid::tool {

struct ProfileToolOptions {
    std::string network = "demo";  // "demo" or a bundled net (samples::network_names())
    // A bundled net's size, as braid-train takes it (net is `network`).
    samples::NetConfig net;
    int device = 0;
    std::uint32_t warmup = 3;
    std::uint32_t iters = 10;
    std::string out_profile = "profile.json";
    std::string out_plan = "plan.json";
    std::string strategy = "braid";
    std::uint32_t max_streams = 8;
    std::string mode = "graph";  // how the plan is to run: graph or eager
    std::string calibration;     // "": built-in for the device; "none"; or a calibration file
    bool no_cupti = false;  // CUDA events only: a durations-only profile
    bool kernels = false;   // print every kernel and transfer too
    bool conv_graph_api = false;  // a bundled net's convolutions on cuDNN graph-API engines
    bool cudnn_batch_norm = false;  // a bundled net's batch norms on cuDNN's kernels
    bool channels_last = false;     // a bundled net's activations NHWC (samples::channels_last_unfit must accept it)
};

// 0 on success, 77 without a CUDA device ("no CUDA device ..." on stdout).
// Throws braid::Error (and CUDA errors, ShapeError for a net that does not
// build at that size) for everything else.
int run_profile_tool(const ProfileToolOptions& options);

// After profiling (profile already written to options.out_profile): prints
// the per-layer table (and every kernel with options.kernels), plans with
// options.strategy / max_streams / mode and the calibration, as braid-plan
// --profile does (profiler/planning.hpp), writes options.out_plan, and prints
// the measured and simulated iteration times. Needs no GPU.
void report(const Profile& profile, const OpGraph& graph, const DeviceSpec& device,
            const ProfileToolOptions& options);

}  // namespace braid::tool
