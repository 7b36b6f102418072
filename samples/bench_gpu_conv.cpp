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
// algorithm or engine as training does (timed on the buffers, at the first
// call). The NCHW ways take the step's views: a convolution that feeds a
// concat directly writes (and reads its gradient from) a channel slice,
// whose larger image stride may narrow what cuDNN offers. (The bundled nets
// have a ReLU or batch norm there, so their convolutions take whole
// tensors.) The NHWC way runs sliced problems on whole tensors, since
// CudaConv's NHWC views cannot be slices; the table marks them. Then each
// pass's --reps runs are captured as one CUDA graph, and --rounds rounds
// replay them: in each, every problem's three ways in
// rotating order, each graph between two events. A pass's time is the
// median over rounds of its mean per run; a net's is the sum over the
// problems every way ran, weighted by how many layers run each. Prints
// `key: value` lines for tools/gpu-check:
//
//   conv_<net>_b<batch>_<way>_{forward,backward_data,backward_filter}_ms:
//   conv_<net>_b<batch>_<way>_ms:                  all three passes
//   conv_<net>_b<batch>_graphapi_speedup:          legacy_nchw over graph_nchw
//   conv_<net>_b<batch>_nhwc_speedup:              graph_nchw over graph_nhwc
//   conv_<net>_b<batch>_<way>_legacy_fallbacks:    problems the graph API gave no engine
//                                                  for in some pass (they ran the legacy call)
//   conv_<net>_b<batch>_failed_problems:           (problem, way) pairs that threw (printed)
//   conv_<net>_b<batch>_problems_in_sums:          problems every way ran, of
//   conv_<net>_b<batch>_problems:                  the distinct problems (no sums when none)
//   conv_<net>_b<batch>_sliced_problems:           of them, those with a channel-slice view
//
//   bench-gpu-conv [--nets resnet50,inception_v3] [--batch 32] [--image S]
//                  [--rounds 5] [--reps 5] [--tf32 0|1] [--deterministic 0|1]
//                  [--workspace-mib 1024]
//
// Exit status: 0; 1 when a problem fails on a way the trainers use (NCHW;
// an NHWC failure is printed and counted, not an error); 77 without a GPU; non-zero naming the option for a bad command line,
// checked first.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "braid/cuda/resources.hpp"
#include "cuda/algorithms.hpp"
#include "cuda/cuda_trainer.hpp"
#include "cuda/gpu_program.hpp"
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

// The passes as keys name them.
constexpr std::array<std::string_view, 3> pass_keys{"forward", "backward_data", "backward_filter"};

// `issue`'s work on `stream` as an instantiated CUDA graph. Replayed, it
// costs the host one launch, so the events around it time the GPU, not how
// fast the host issues cuDNN's calls (each graph-API call builds a
// descriptor, and a 7x7 convolution takes microseconds).
template <class Issue>
braid::cuda::GraphExec capture(cudaStream_t stream, Issue&& issue) {
    braid::cuda::check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    cudaGraph_t raw = nullptr;
    try {
        issue();
    } catch (...) {
        (void)cudaStreamEndCapture(stream, &raw);
        if (raw != nullptr) (void)cudaGraphDestroy(raw);
        throw;
    }
    braid::cuda::check(cudaStreamEndCapture(stream, &raw), "cudaStreamEndCapture");
    const braid::cuda::Graph graph(raw);
    cudaGraphExec_t exec = nullptr;
    braid::cuda::check(cudaGraphInstantiate(&exec, raw, 0), "cudaGraphInstantiate");
    return braid::cuda::GraphExec(exec);
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// Device buffers big enough for every problem of a net, its views' strides
// included, filled with small values (zeros would let a kernel skip work;
// NaNs would slow some).
class Buffers {
public:
    explicit Buffers(const std::vector<ConvCensusEntry>& census) {
        const ConvCensusBuffers f = conv_census_buffers(census);
        for (auto [buffer, floats] : {std::pair{&x_, f.x}, std::pair{&dx_, f.dx}, std::pair{&w_, f.w},
                                      std::pair{&dw_, f.w}, std::pair{&y_, f.y}, std::pair{&dy_, f.dy}}) {
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

// One pass of one problem one way, on the lane's stream: on the step's
// views (`e`'s strides), or with `whole` on whole tensors.
void run_pass(cuda::CudaConv& conv, const ConvCensusEntry& e, bool whole, cuda::StandaloneLane& lane,
              const Buffers& b, cuda::ConvPass pass, bool capturing) {
    const Conv2d& l = conv.layer();
    const auto stride = [whole](std::uint64_t step, const Shape4& shape) {
        return whole || step == 0 ? shape.image_elements() : step;
    };
    const cuda::ConstDeviceView x{b.x(), l.in, stride(e.x_stride, l.in)};
    const cuda::ConstDeviceView dy{b.dy(), l.out, stride(e.dy_stride, l.out)};
    switch (pass) {
        case cuda::ConvPass::forward:
            conv.forward(lane(capturing), x, b.w(), nullptr, cuda::DeviceView{b.y(), l.out, stride(e.y_stride, l.out)},
                         whole_batch(l.in));
            break;
        case cuda::ConvPass::backward_data:
            conv.backward_data(lane(capturing), dy, b.w(), cuda::DeviceView{b.dx(), l.in, stride(e.dx_stride, l.in)},
                               whole_batch(l.in));
            break;
        case cuda::ConvPass::backward_filter:
            conv.backward_weight(lane(capturing), x, dy, b.dw(), nullptr);
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

    const Buffers buffers(census);
    cuda::StandaloneLane lane;
    // One problem one way: its layer (null where this way failed on the
    // problem), and per pass the graph of `reps` runs and each round's mean.
    struct Trial {
        std::unique_ptr<cuda::CudaConv> conv;
        std::array<braid::cuda::GraphExec, passes.size()> runs;
        std::array<std::vector<double>, passes.size()> ms;
    };
    std::vector<std::array<Trial, ways.size()>> trials(census.size());
    std::vector<std::string> failures;
    bool trainers_failed = false;  // a way the trainers use (NCHW) failed
    const auto fail = [&](std::size_t p, std::size_t k, const std::exception& e) {
        failures.push_back(fmt::format("{} ({}): {}", census[p].first, ways[k].key, e.what()));
        if (ways[k].layout == cuda::TensorLayout::nchw) trainers_failed = true;
        trials[p][k].conv.reset();
        (void)cudaGetLastError();
    };
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
            Trial& t = trials[p][k];
            const bool whole = ways[k].layout == cuda::TensorLayout::nhwc;
            try {
                t.conv = std::make_unique<cuda::CudaConv>(census[p].first, problem, lo);
                // The first call chooses (timed on the buffers) and grows the scratch.
                for (const cuda::ConvPass pass : passes)
                    if (runs_per_step(census[p], pass) > 0)
                        run_pass(*t.conv, census[p], whole, lane, buffers, pass, false);
                lane.sync();
                for (std::size_t q = 0; q < passes.size(); ++q)
                    if (runs_per_step(census[p], passes[q]) > 0)
                        t.runs[q] = capture(lane.stream(), [&] {
                            for (std::uint32_t r = 0; r < o.reps; ++r)
                                run_pass(*t.conv, census[p], whole, lane, buffers, passes[q], true);
                        });
            } catch (const std::exception& e) {
                fail(p, k, e);
            }
        }
    }

    const braid::cuda::Event start = braid::cuda::create_event(cudaEventDefault),
                             stop = braid::cuda::create_event(cudaEventDefault);
    for (std::uint32_t round = 0; round < o.rounds; ++round)
        for (std::size_t p = 0; p < census.size(); ++p)
            for (std::size_t i = 0; i < ways.size(); ++i) {
                const std::size_t k = (i + round + p) % ways.size();  // rotating order
                Trial& t = trials[p][k];
                for (std::size_t q = 0; q < passes.size() && t.conv; ++q) {
                    if (t.runs[q].get() == nullptr) continue;
                    try {
                        braid::cuda::check(cudaEventRecord(start.get(), lane.stream()), "cudaEventRecord");
                        braid::cuda::check(cudaGraphLaunch(t.runs[q].get(), lane.stream()), "cudaGraphLaunch");
                        braid::cuda::check(cudaEventRecord(stop.get(), lane.stream()), "cudaEventRecord");
                        braid::cuda::check(cudaEventSynchronize(stop.get()), "cudaEventSynchronize");
                        float ms = 0.0f;
                        braid::cuda::check(cudaEventElapsedTime(&ms, start.get(), stop.get()), "cudaEventElapsedTime");
                        t.ms[q].push_back(static_cast<double>(ms) / o.reps);
                    } catch (const std::exception& e) {
                        fail(p, k, e);
                    }
                }
            }
    for (const std::string& f : failures) fmt::print("{}: FAILED: {}\n", prefix, f);

    // The table (a sliced problem's first layer marked "[slice]": the NHWC
    // way ran it on whole tensors), then the sums over the problems every way ran.
    fmt::print("{:<36} {:>6} {:>16} {:>16} {:>4} {:>12} {:>12} {:>12}\n", "first layer", "layers", "input", "output",
               "pass", ways[0].key, ways[1].key, ways[2].key);
    std::array<std::array<double, passes.size()>, ways.size()> total{};
    std::uint32_t in_sums = 0;
    for (std::size_t p = 0; p < census.size(); ++p) {
        const ConvCensusEntry& e = census[p];
        const bool complete = std::all_of(trials[p].begin(), trials[p].end(), [](const Trial& t) { return t.conv != nullptr; });
        in_sums += complete ? 1 : 0;
        for (std::size_t q = 0; q < passes.size(); ++q) {
            const std::uint32_t runs = runs_per_step(e, passes[q]);
            if (runs == 0) continue;
            std::string cells;
            for (std::size_t k = 0; k < ways.size(); ++k) {
                const Trial& t = trials[p][k];
                if (!t.conv) {
                    cells += fmt::format(" {:>12}", "failed");
                    continue;
                }
                const double ms = median(t.ms[q]);
                cells += fmt::format(" {:>12.4f}", ms);
                if (complete) total[k][q] += runs * ms;
            }
            fmt::print("{:<36} {:>6} {:>16} {:>16} {:>4}{}\n", e.sliced() ? e.first + " [slice]" : e.first, runs,
                       to_string(e.layer.in), to_string(e.layer.out), pass_keys[q].substr(0, 4), cells);
        }
    }
    fmt::print("{}_failed_problems: {}\n", prefix, failures.size());
    fmt::print("{}_problems_in_sums: {}\n", prefix, in_sums);
    fmt::print("{}_problems: {}\n", prefix, census.size());
    fmt::print("{}_sliced_problems: {}\n", prefix,
               std::count_if(census.begin(), census.end(), [](const ConvCensusEntry& e) { return e.sliced(); }));
    if (in_sums > 0) {
        std::array<double, ways.size()> all{};
        for (std::size_t k = 0; k < ways.size(); ++k) {
            for (std::size_t q = 0; q < passes.size(); ++q) {
                fmt::print("{}_{}_{}_ms: {:.3f}\n", prefix, ways[k].key, pass_keys[q], total[k][q]);
                all[k] += total[k][q];
            }
            fmt::print("{}_{}_ms: {:.3f}\n", prefix, ways[k].key, all[k]);
        }
        fmt::print("{}_graphapi_speedup: {:.3f}\n", prefix, all[0] / all[1]);
        fmt::print("{}_nhwc_speedup: {:.3f}\n", prefix, all[1] / all[2]);
    }
    // Problems the graph API gave no engine for, in some pass: those ran the
    // legacy call (AlgorithmCache's note says why).
    for (std::size_t k = 0; k < ways.size(); ++k) {
        if (ways[k].api != cuda::ConvApi::graph) continue;
        std::uint32_t fallbacks = 0;
        for (std::size_t p = 0; p < census.size(); ++p) {
            const Trial& t = trials[p][k];
            if (!t.conv || t.conv->legacy_fallbacks() == 0) continue;
            ++fallbacks;
            fmt::print("{}: {} ran the legacy call in {} of its passes\n", ways[k].key, census[p].first,
                       t.conv->legacy_fallbacks());
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
    app.add_option("--batch", o.batch, "images per call")->check(braid::cli::range(1u, 65536u))->capture_default_str();
    app.add_option("--image", o.image, "square image size (default: each net's own)")->check(braid::cli::range(1u, 4096u));
    app.add_option("--rounds", o.rounds, "interleaved rounds; a pass's time is their median")
        ->check(braid::cli::range(1u, 10000u))
        ->capture_default_str();
    app.add_option("--reps", o.reps, "runs of a pass per round, timed together")
        ->check(braid::cli::range(1u, 10000u))
        ->capture_default_str();
    app.add_option("--tf32", o.tf32, "1: TF32 tensor cores allowed (the trainers' default)")
        ->check(braid::cli::zero_or_one())
        ->capture_default_str();
    app.add_option("--deterministic", o.deterministic, "1: only deterministic algorithms and engines (as --check)")
        ->check(braid::cli::zero_or_one())
        ->capture_default_str();
    app.add_option("--workspace-mib", o.workspace_mib, "most cuDNN workspace one call may ask for")
        ->check(braid::cli::range(std::uint64_t{0}, std::uint64_t{1} << 20))
        ->capture_default_str();
    return gpu_program_main(app, argc, argv, "the convolution benchmark", [&] {
        fmt::print("bench-gpu-conv: {}; tf32 {}, {}, workspace limit {} MiB\n", cuda_device_description(),
                   o.tf32 ? "on" : "off", o.deterministic ? "deterministic" : "any algorithm", o.workspace_mib);
        bool ok = true;
        for (const std::string& net : o.nets) ok = bench_net(o, net) && ok;
        return ok ? 0 : 1;
    });
}
