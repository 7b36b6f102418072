// bench-gpu-conv: every distinct convolution of a bundled net's training
// step (train/conv_census.hpp), timed alone on the GPU, three ways:
//
//   legacy_nchw   the legacy cudnnConvolution* calls on NCHW activations
//                 (braid's default, --conv-api legacy)
//   graph_nchw    cuDNN graph-API engines on NCHW activations (--conv-api graph)
//   graph_nhwc    graph-API engines on NHWC activations and KRSC filters,
//                 which braid's other layers cannot take yet
//
// It answers whether channels-last activations are worth teaching every
// layer before anyone does: cuDNN's Hopper tensor-core kernels are NHWC, and
// on NCHW tensors cuDNN transposes around them (PyTorch's NCHW ResNet-50 step
// on the H200 spent about 1.9 ms of 17.4 in nchwToNhwc/nhwcToNchw kernels,
// ../shared/h200/torch-resnet50-b32-kernels.txt).
//
// Each problem runs each pass the step runs (forward and backward filter
// per layer, backward data where the layer has that op), through the CUDA
// layers (CudaConv) as the trainers call them, so each way chooses its
// algorithm or engine as training does (timed on the buffers first). Then
// --rounds rounds: in each, every problem's three ways in rotating order,
// each pass --reps times between two events. A pass's time is the median
// over rounds of its mean; a net's time is the sum over problems, weighted
// by how many layers run each. Prints `key: value` lines for tools/gpu-check:
//
//   conv_<net>_b<batch>_<way>_{forward,backward_data,backward_filter}_ms:
//   conv_<net>_b<batch>_<way>_ms:                  all three passes
//   conv_<net>_b<batch>_graphapi_speedup:          legacy_nchw over graph_nchw
//   conv_<net>_b<batch>_nhwc_speedup:              graph_nchw over graph_nhwc
//   conv_<net>_b<batch>_<way>_legacy_fallbacks:    problems the graph API gave no engine for
//   conv_<net>_b<batch>_failed_problems:           (problem, way) pairs that threw; such a
//                                                  problem is left out of every way's sums
//
//   bench-gpu-conv [--nets resnet50,inception_v3] [--batch 32] [--image S]
//                  [--rounds 5] [--reps 5] [--tf32 0|1] [--deterministic 0|1]
//                  [--workspace-mib 1024]
//
// Exit status: 0; 1 when a problem fails on a way the trainers use (NCHW;
// every failure's error is printed, NHWC's only counted);
// 77 without a GPU; non-zero naming the option for a bad command line,
// checked first.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <exception>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "braid/cuda/resources.hpp"
#include "cuda/algorithms.hpp"
#include "cuda/cuda_trainer.hpp"
#include "cuda/layers.hpp"
#include "cuda/standalone_lane.hpp"
#include "nets/zoo.hpp"
#include "train/conv_census.hpp"
#include "train/training_graph.hpp"

namespace {

using namespace braid::samples;

struct Options {
    std::vector<std::string> nets{"resnet50", "inception_v3"};
    std::uint32_t batch = 32;
    std::optional<std::uint32_t> image;  // none: each net's default_image
    std::uint32_t rounds = 5, reps = 5;
    bool tf32 = true;             // as the trainers' default
    bool deterministic = false;   // as the trainers' default (--check asks for deterministic)
    std::uint64_t workspace_mib = 1024;
};

struct Way {
    const char* key;
    cuda::ConvApi api;
    cuda::TensorLayout layout;
};
constexpr std::array<Way, 3> ways{{{"legacy_nchw", cuda::ConvApi::legacy, cuda::TensorLayout::nchw},
                                   {"graph_nchw", cuda::ConvApi::graph, cuda::TensorLayout::nchw},
                                   {"graph_nhwc", cuda::ConvApi::graph, cuda::TensorLayout::nhwc}}};
constexpr std::array<cuda::ConvPass, 3> passes{cuda::ConvPass::forward, cuda::ConvPass::backward_data,
                                               cuda::ConvPass::backward_filter};

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// Device buffers big enough for every problem of a net, filled with small
// values (zeros would let a kernel skip work; NaNs would slow some).
class Buffers {
public:
    explicit Buffers(const std::vector<ConvCensusEntry>& census) {
        std::uint64_t x = 1, w = 1, y = 1;
        for (const ConvCensusEntry& e : census) {
            x = std::max(x, e.layer.in.elements());
            w = std::max(w, e.layer.weight_elements());
            y = std::max(y, e.layer.out.elements());
        }
        for (auto [buffer, floats] : {std::pair{&x_, x}, std::pair{&dx_, x}, std::pair{&w_, w}, std::pair{&dw_, w},
                                      std::pair{&y_, y}, std::pair{&dy_, y}}) {
            *buffer = braid::cuda::DeviceBuffer(floats * sizeof(float));
            std::vector<float> values(floats);
            for (std::uint64_t i = 0; i < floats; ++i) values[i] = static_cast<float>(i % 251) / 251.0f - 0.5f;
            braid::cuda::check(cudaMemcpy(buffer->get(), values.data(), floats * sizeof(float), cudaMemcpyHostToDevice),
                               "cudaMemcpy");
        }
    }
    float* x() const { return static_cast<float*>(x_.get()); }
    float* dx() const { return static_cast<float*>(dx_.get()); }
    float* w() const { return static_cast<float*>(w_.get()); }
    float* dw() const { return static_cast<float*>(dw_.get()); }
    float* y() const { return static_cast<float*>(y_.get()); }
    float* dy() const { return static_cast<float*>(dy_.get()); }

private:
    braid::cuda::DeviceBuffer x_, dx_, w_, dw_, y_, dy_;
};

// One pass of one problem one way, on the lane's stream.
void run_pass(cuda::CudaConv& conv, cuda::StandaloneLane& lane, const Buffers& b, cuda::ConvPass pass) {
    const Conv2d& l = conv.layer();
    const cuda::ConstDeviceView x = cuda::ConstDeviceView::dense(b.x(), l.in);
    const cuda::ConstDeviceView dy = cuda::ConstDeviceView::dense(b.dy(), l.out);
    switch (pass) {
        case cuda::ConvPass::forward:
            conv.forward(lane(), x, b.w(), nullptr, cuda::DeviceView::dense(b.y(), l.out), whole_batch(l.in));
            break;
        case cuda::ConvPass::backward_data:
            conv.backward_data(lane(), dy, b.w(), cuda::DeviceView::dense(b.dx(), l.in), whole_batch(l.in));
            break;
        case cuda::ConvPass::backward_filter:
            conv.backward_weight(lane(), x, dy, b.dw(), nullptr);
            break;
    }
}

// How many times a step runs `pass` of `e`.
std::uint32_t runs_per_step(const ConvCensusEntry& e, cuda::ConvPass pass) {
    return pass == cuda::ConvPass::backward_data ? e.backward_data : e.layers;
}

bool bench_net(const Options& o, const std::string& net) {
    TrainConfig config;
    config.model.net = net;
    config.model.batch = o.batch;
    config.model.image = o.image.value_or(default_image(net));
    const TrainingGraph tg = build_training_graph(config);
    const std::vector<ConvCensusEntry> census = conv_census(tg);
    const std::string prefix = fmt::format("conv_{}_b{}", net, o.batch);
    std::uint32_t layers = 0;
    for (const ConvCensusEntry& e : census) layers += e.layers;
    fmt::print("\n== {} b{} {}x{}: {} convolutions, {} distinct problems; {} rounds of {} runs per pass\n", net, o.batch,
               config.model.image, config.model.image, layers, census.size(), o.rounds, o.reps);
    std::fflush(stdout);

    const std::vector<std::string> described = cuda::AlgorithmCache::process().describe();
    const std::set<std::string> earlier(described.begin(), described.end());  // other nets' choices
    const Buffers buffers(census);
    cuda::StandaloneLane lane;
    // convs[problem][way], null where that way failed (the problem is then left out of every sum).
    std::vector<std::array<std::unique_ptr<cuda::CudaConv>, ways.size()>> convs(census.size());
    std::vector<std::string> failures;
    bool trainers_failed = false;  // a way the trainers use (NCHW) failed
    for (std::size_t p = 0; p < census.size(); ++p) {
        Conv2d problem = census[p].layer;
        problem.config.bias = false;  // the passes alone; a bias is an own kernel after the forward
        for (std::size_t k = 0; k < ways.size(); ++k) {
            cuda::LayerOptions lo;
            lo.deterministic = o.deterministic;
            lo.tf32 = o.tf32;
            lo.workspace_limit_bytes = o.workspace_mib << 20;
            lo.conv_api = ways[k].api;
            lo.layout = ways[k].layout;
            try {
                auto conv = std::make_unique<cuda::CudaConv>(census[p].first, problem, lo);
                for (const cuda::ConvPass pass : passes)
                    if (runs_per_step(census[p], pass) > 0) run_pass(*conv, lane, buffers, pass);  // chooses
                lane.sync();
                convs[p][k] = std::move(conv);
            } catch (const std::exception& e) {
                failures.push_back(fmt::format("{} ({}): {}", census[p].first, ways[k].key, e.what()));
                if (ways[k].layout == cuda::TensorLayout::nchw) trainers_failed = true;
                (void)cudaGetLastError();
            }
        }
    }
    for (const std::string& f : failures) fmt::print("{}: FAILED: {}\n", prefix, f);
    fmt::print("{}_failed_problems: {}\n", prefix, failures.size());

    // ms[problem][way][pass]: each round's mean of `reps` runs.
    std::vector<std::array<std::array<std::vector<double>, passes.size()>, ways.size()>> ms(census.size());
    const braid::cuda::Event start = braid::cuda::create_event(cudaEventDefault),
                             stop = braid::cuda::create_event(cudaEventDefault);
    for (std::uint32_t round = 0; round < o.rounds; ++round)
        for (std::size_t p = 0; p < census.size(); ++p)
            for (std::size_t i = 0; i < ways.size(); ++i) {
                const std::size_t k = (i + round + p) % ways.size();  // rotating order
                if (!convs[p][k]) continue;
                for (std::size_t q = 0; q < passes.size(); ++q) {
                    if (runs_per_step(census[p], passes[q]) == 0) continue;
                    braid::cuda::check(cudaEventRecord(start.get(), lane.stream()), "cudaEventRecord");
                    for (std::uint32_t r = 0; r < o.reps; ++r) run_pass(*convs[p][k], lane, buffers, passes[q]);
                    braid::cuda::check(cudaEventRecord(stop.get(), lane.stream()), "cudaEventRecord");
                    braid::cuda::check(cudaEventSynchronize(stop.get()), "cudaEventSynchronize");
                    float t = 0.0f;
                    braid::cuda::check(cudaEventElapsedTime(&t, start.get(), stop.get()), "cudaEventElapsedTime");
                    ms[p][k][q].push_back(static_cast<double>(t) / o.reps);
                }
            }

    // The table, then the sums over problems every way ran.
    fmt::print("{:<28} {:>6} {:>16} {:>16} {:>3} {:>12} {:>12} {:>12}\n", "first layer", "layers", "input", "output",
               "pass", ways[0].key, ways[1].key, ways[2].key);
    std::array<std::array<double, passes.size()>, ways.size()> total{};
    for (std::size_t p = 0; p < census.size(); ++p) {
        const ConvCensusEntry& e = census[p];
        const bool complete = std::all_of(convs[p].begin(), convs[p].end(), [](const auto& c) { return c != nullptr; });
        for (std::size_t q = 0; q < passes.size(); ++q) {
            const std::uint32_t runs = runs_per_step(e, passes[q]);
            if (runs == 0) continue;
            std::string cells;
            for (std::size_t k = 0; k < ways.size(); ++k) {
                if (ms[p][k][q].empty()) {
                    cells += fmt::format(" {:>12}", "failed");
                    continue;
                }
                const double t = median(ms[p][k][q]);
                cells += fmt::format(" {:>12.4f}", t);
                if (complete) total[k][q] += runs * t;
            }
            fmt::print("{:<28} {:>6} {:>16} {:>16} {:>3}{}\n", e.first, runs, to_string(e.layer.in),
                       to_string(e.layer.out), q == 0 ? "fwd" : q == 1 ? "bwd" : "wgt", cells);
        }
    }
    std::array<double, ways.size()> all{};
    for (std::size_t k = 0; k < ways.size(); ++k) {
        for (std::size_t q = 0; q < passes.size(); ++q) {
            fmt::print("{}_{}_{}_ms: {:.3f}\n", prefix, ways[k].key, to_string(passes[q]), total[k][q]);
            all[k] += total[k][q];
        }
        fmt::print("{}_{}_ms: {:.3f}\n", prefix, ways[k].key, all[k]);
    }
    if (all[1] > 0) fmt::print("{}_graphapi_speedup: {:.3f}\n", prefix, all[0] / all[1]);
    if (all[2] > 0) fmt::print("{}_nhwc_speedup: {:.3f}\n", prefix, all[1] / all[2]);
    // Graph-API problems that took the legacy call instead (their cache entries say why).
    for (std::size_t k = 1; k < ways.size(); ++k) {
        std::uint32_t fallbacks = 0;
        const bool nhwc = ways[k].layout == cuda::TensorLayout::nhwc;
        for (const std::string& line : cuda::AlgorithmCache::process().describe()) {
            if (earlier.count(line) > 0) continue;
            if (line.find(" graph-api ") == std::string::npos || (line.find(" nhwc") != std::string::npos) != nhwc)
                continue;
            if (line.find("legacy call") != std::string::npos) {
                ++fallbacks;
                fmt::print("{}: {}\n", ways[k].key, line);
            }
        }
        fmt::print("{}_{}_legacy_fallbacks: {}\n", prefix, ways[k].key, fallbacks);
    }
    std::fflush(stdout);
    return !trainers_failed;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    CLI::App app{"bench-gpu-conv: every distinct convolution of a net's training step, timed alone with legacy cuDNN "
                 "calls, graph-API engines on NCHW, and on NHWC (tools/gpu-check runs it)",
                 "bench-gpu-conv"};
    app.add_option("--nets", o.nets, "bundled networks, comma-separated")
        ->delimiter(',')
        ->check(CLI::IsMember(network_names()))
        ->capture_default_str();
    app.add_option("--batch", o.batch, "images per call")->check(CLI::Range(1u, 65536u))->capture_default_str();
    app.add_option("--image", o.image, "square image size (default: each net's own)")->check(CLI::Range(1u, 4096u));
    app.add_option("--rounds", o.rounds, "interleaved rounds; a pass's time is their median")
        ->check(CLI::Range(1u, 10000u))
        ->capture_default_str();
    app.add_option("--reps", o.reps, "runs of a pass per round, timed together")
        ->check(CLI::Range(1u, 10000u))
        ->capture_default_str();
    app.add_option("--tf32", o.tf32, "1: TF32 tensor cores allowed (the trainers' default)")->capture_default_str();
    app.add_option("--deterministic", o.deterministic, "1: only deterministic algorithms and engines (as --check)")
        ->capture_default_str();
    app.add_option("--workspace-mib", o.workspace_mib, "most cuDNN workspace one call may ask for")
        ->check(CLI::Range(std::uint64_t{0}, std::uint64_t{1} << 20))
        ->capture_default_str();
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }
    try {
        const std::string reason = cuda_unavailable_reason();
        if (!reason.empty()) {
            std::printf("%s: skipping the convolution benchmark\n", reason.c_str());
            return 77;
        }
        fmt::print("bench-gpu-conv: {}; tf32 {}, {}, workspace limit {} MiB\n", cuda_device_description(),
                   o.tf32 ? "on" : "off", o.deterministic ? "deterministic" : "any algorithm", o.workspace_mib);
        bool ok = true;
        for (const std::string& net : o.nets) ok = bench_net(o, net) && ok;
        return ok ? 0 : 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench-gpu-conv: %s\n", e.what());
        return 1;
    }
}
