// braid-devices: the built-in device table and how representative CNN
// kernel shapes fill each device's SMs (occupancy, limiter, waves).
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include "braid/braid.hpp"
#include "vocabulary.hpp"

namespace {

struct Shape {
    const char* what;
    braid::KernelShape kernel;
};

std::vector<Shape> representative_shapes() {
    using braid::KernelShape;
    return {
        {"implicit-GEMM conv tile 128x128 (cuDNN-like)", KernelShape{"conv_igemm_128x128", {392, 1, 1}, {256, 1, 1}, 128, 0, 65536}},
        {"1x1 conv, small batch (few blocks)", KernelShape{"conv1x1_64x64", {49, 2, 1}, {128, 1, 1}, 96, 0, 32768}},
        {"elementwise ReLU over 3.2M values", KernelShape{"relu_fwd", {12544, 1, 1}, {256, 1, 1}, 16, 0, 0}},
        {"batch-norm reduction per channel", KernelShape{"bn_fwd_reduce", {256, 1, 1}, {512, 1, 1}, 32, 4096, 0}},
        {"max pool 3x3/2", KernelShape{"maxpool_fwd", {3136, 1, 1}, {256, 1, 1}, 24, 0, 0}},
        {"weight-gradient split-K GEMM", KernelShape{"wgrad_splitk", {16, 16, 4}, {128, 1, 1}, 168, 0, 49152}},
        {"SGD update of 1M weights", KernelShape{"sgd_momentum", {1024, 1, 1}, {1024, 1, 1}, 20, 0, 0}},
    };
}

// The device table (or one device) and how the representative shapes fill
// it. As JSON, one device is its device object, a file `--device FILE`
// reads back (to edit for a GPU the table lacks); the table is an array of them.
int run(const std::vector<braid::DeviceSpec>& devices, const std::string& format, bool one) {
    if (format == "json") {
        nlohmann::json out = nlohmann::json::array();
        for (const braid::DeviceSpec& d : devices) out.push_back(braid::to_json(d));
        fmt::print("{}\n", (one ? out.front() : out).dump(2));
        return 0;
    }
    fmt::print("braid {}.{}.{}: {}\n\n", BRAID_VERSION_MAJOR, BRAID_VERSION_MINOR, BRAID_VERSION_PATCH,
               devices.size() == 1 ? "one device" : "built-in devices");
    fmt::print("{:<8} {:<26} {:>4} {:>4} {:>8} {:>9} {:>7} {:>9} {:>8} {:>8} {:>8}\n", "key", "name", "cc", "SMs",
               "warps/SM", "smem/SM", "MHz", "DRAM GB/s", "FP32 TF", "TF32 TF", "BF16 TF");
    for (const braid::DeviceSpec& d : devices)
        fmt::print("{:<8} {:<26} {:>4} {:>4} {:>8} {:>8}K {:>7.0f} {:>9.0f} {:>8.1f} {:>8.1f} {:>8.1f}\n", d.key, d.name,
                   fmt::format("{}.{}", d.cc_major, d.cc_minor), d.sm_count, d.max_warps_per_sm(),
                   d.shared_mem_per_sm_bytes / 1024, d.boost_clock_mhz, d.dram_bandwidth_gbps, d.peak_fp32_tflops,
                   d.peak_tf32_tflops, d.peak_bf16_tflops);

    fmt::print("\nOccupancy of representative kernel shapes (blocks per SM, limiting resource, waves of the grid)\n");
    for (const Shape& s : representative_shapes()) {
        const braid::KernelShape& k = s.kernel;
        fmt::print("\n{} — {}: grid {} x block {}, {} regs/thread, {} B shared\n", k.name, s.what, k.blocks(),
                   k.threads_per_block(), k.regs_per_thread, k.static_smem_bytes + k.dynamic_smem_bytes);
        fmt::print("  {:<8} {:>10} {:<14} {:>9} {:>6} {:>10}\n", "device", "blocks/SM", "limiter", "occupancy", "waves",
                   "SMs used");
        for (const braid::DeviceSpec& d : devices) {
            braid::Occupancy o = braid::occupancy(d, k);
            braid::SmFootprint f = braid::footprint(d, o, k.blocks());
            fmt::print("  {:<8} {:>10} {:<14} {:>8.0f}% {:>6} {:>6}/{:<3}\n", d.key, o.blocks_per_sm,
                       braid::to_string(o.limiter), 100.0 * o.fraction, braid::waves(d, o, k.blocks()), f.sms,
                       d.sm_count);
        }
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    std::string device, format = "table";
    CLI::App app{"braid-devices: the built-in GPU table and how representative CNN kernel shapes fill each GPU's SMs",
                 "braid-devices"};
    app.add_option("--device", device, braid::cli::device_help);
    app.add_option("--format", format,
                   "table (for people) or json (with --device, that device's JSON, a file --device FILE reads; "
                   "else an array of every device)")
        ->check(CLI::IsMember({"table", "json"}))
        ->capture_default_str();
    braid::cli::refuse_empty_values(app);
    CLI11_PARSE(app, argc, argv);
    try {
        std::vector<braid::DeviceSpec> devices;
        if (device.empty())
            devices.assign(braid::builtin_devices().begin(), braid::builtin_devices().end());
        else
            devices.push_back(braid::load_device(device));
        return run(devices, format, !device.empty());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "braid-devices: error: %s\n", e.what());
        return 1;
    }
}
