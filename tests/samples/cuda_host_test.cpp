// Host logic of the CUDA samples, run without a device (suite 'cpu'): how
// much cuDNN workspace an algorithm may ask for, the process-wide
// algorithm cache that keeps two models' choices the same, and how the
// graph-API path describes a convolution and chooses among engines, and
// when cuDNN's batch norm hands a pass to the own kernels; and the GPU
// tests' host-side helpers.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cublas_v2.h>
#include <cudnn.h>
#include <exception>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "braid/planner/strategies/serial.hpp"

#include "cuda/algorithms.hpp"
#include "cuda/conv_engines.hpp"
#include "cuda/kernels.h"
#include "cuda/layers.hpp"
#include "gpu_samples_util.hpp"
#include "nn/batch_norm.hpp"
#include "nn/pool.hpp"
#include "cuda/cuda_model.hpp"
#include "cuda/cuda_trainer.hpp"
#include "train/training_graph.hpp"

using namespace braid::samples::cuda;
using braid::samples::Conv2d;
using braid::samples::BatchNorm2d;
using braid::samples::Pool2d;
using braid::samples::FullyConnected;

namespace {

constexpr std::size_t mib = std::size_t{1} << 20;
constexpr std::size_t gib = std::size_t{1} << 30;

}  // namespace

TEST_SUITE("cpu") {

namespace {

// `inner` rethrown, caught and nested in an Error saying `outer`, as the
// layers, the executor and the trainer wrap a body's failure; returns what
// the outer catch sees.
std::exception_ptr nest(std::exception_ptr inner, const std::string& outer) {
    try {
        try {
            std::rethrow_exception(inner);
        } catch (...) {
            std::throw_with_nested(braid::Error(outer));
        }
    } catch (...) {
        return std::current_exception();
    }
    return {};
}

template <class Inner>
std::exception_ptr nested_in_error(const Inner& inner) {
    return nest(std::make_exception_ptr(inner), "op 'conv1.forward' failed");
}

// As a body's failure reaches the tuner: the allocation's error inside the
// layer's workspace error, inside the executor's error naming the op,
// inside the trainer's.
std::exception_ptr nested_three_deep(const braid::cuda::CudaError& allocation) {
    return nest(nest(nest(std::make_exception_ptr(allocation), "convolution 'conv1': cudnnBackendExecute needs workspace"),
                     "op 'conv1.forward' failed"),
                "warm-up iteration failed");
}

bool oom(std::exception_ptr p) {
    try {
        std::rethrow_exception(p);
    } catch (const std::exception& e) {
        return braid::samples::out_of_device_memory(e);
    }
}

}  // namespace

TEST_CASE("out of device memory: the CUDA and library allocation failures, nested or not, and nothing else") {
    using braid::cuda::CudaError;
    using braid::cuda::LibraryError;
    const CudaError malloc_failed(cudaErrorMemoryAllocation, "cudaMalloc", "cudaMalloc failed: out of memory");
    CHECK(braid::samples::out_of_device_memory(malloc_failed));
    CHECK(oom(nested_in_error(malloc_failed)));
    CHECK(oom(nested_three_deep(malloc_failed)));
    CHECK_FALSE(oom(nested_three_deep(CudaError(cudaErrorLaunchFailure, "cudaLaunchKernel", "launch failed"))));
    constexpr int cudnn_device_alloc = CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED;
    CHECK(oom(nested_in_error(LibraryError("cudnnBackendExecute", cudnn_device_alloc, "alloc failed"))));
    CHECK(oom(nested_in_error(LibraryError("cublasGemmEx", CUBLAS_STATUS_ALLOC_FAILED, "alloc failed"))));
    // A handle that could not be made beside the other candidates' trainers.
    CHECK(oom(nested_in_error(
        LibraryError("cudnnCreate", CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, "resources"))));

    CHECK_FALSE(braid::samples::out_of_device_memory(CudaError(cudaErrorLaunchFailure, "cudaLaunchKernel", "launch")));
    CHECK_FALSE(oom(nested_in_error(CudaError(cudaErrorIllegalAddress, "cudaStreamSynchronize", "illegal address"))));
    // The same number under the other library's name is not its ALLOC_FAILED.
    CHECK_FALSE(oom(nested_in_error(LibraryError("cublasGemmEx", cudnn_device_alloc, "other"))));
    // Host memory is not the device's.
    CHECK_FALSE(oom(nested_in_error(
        LibraryError("cudnnBackendExecute", CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, "host alloc"))));
    CHECK_FALSE(oom(nested_in_error(LibraryError("cudnnConvolutionForward", CUBLAS_STATUS_ALLOC_FAILED, "other"))));
    CHECK_FALSE(braid::samples::out_of_device_memory(braid::Error("out of memory, says the message only")));
    CHECK_FALSE(oom(nested_in_error(std::runtime_error("cudaErrorMemoryAllocation"))));
    CHECK_FALSE(oom(nested_in_error(42)));  // a nested non-std exception
}

TEST_CASE("workspace budget: the limit, or a lane's share of the free memory when that is less") {
    const std::size_t limit = LayerOptions{}.workspace_limit_bytes;
    CHECK(limit == gib);
    // An H200 with ~130 GiB free: the limit binds. The deterministic backward-data
    // algorithms of GoogLeNet's conv2/3x3 at batch 32 want 103 MB and more; the old
    // fixed 64 MiB left none.
    CHECK(workspace_budget(limit, 130 * gib) == gib);
    CHECK(workspace_budget(limit, 130 * gib) > std::size_t{103'000'000});
    // Little free memory: an eighth of it each, so that eight lanes can hold one at once.
    CHECK(workspace_budget(limit, 4 * gib) == 512 * mib);
    CHECK(workspace_budget(limit, 4 * gib, 2) == gib);
    // Whole MiB, never more than the share.
    CHECK(workspace_budget(limit, 8 * 100 * mib + 7 * mib) == 100 * mib);
    CHECK(workspace_budget(limit, 8 * mib - 1) == 0);
    CHECK(workspace_budget(limit, 0) == 0);
    CHECK(workspace_budget(limit, 64 * mib, 0) == 64 * mib);  // no lanes counts as one
    CHECK(workspace_budget(0, 130 * gib) == 0);
}

TEST_CASE("the algorithm cache keeps the first choice for a problem") {
    AlgorithmCache cache;
    const std::string key = "conv backward-data n=32 x=64x56x56/200704 k=192 r=3 pad=1 stride=1 groups=1 y/602112 tf32 "
                            "deterministic ws<=1073741824";
    CHECK_FALSE(cache.lookup(key));
    ConvAlgorithm first;
    first.algo = 1;
    first.workspace_bytes = 103 * mib;
    first.deterministic = true;
    ConvAlgorithm second = first;
    second.algo = 0;
    CHECK(cache.insert(key, first).algo == 1);
    CHECK(cache.insert(key, second).algo == 1);  // a second model gets the first model's algorithm
    REQUIRE(cache.lookup(key));
    CHECK(cache.lookup(key)->workspace_bytes == 103 * mib);
    CHECK(cache.size() == 1);
    REQUIRE(cache.describe().size() == 1);
    CHECK(cache.describe()[0].find("algo 1") != std::string::npos);
    CHECK(cache.describe()[0].find("deterministic") != std::string::npos);
    cache.clear();
    CHECK(cache.size() == 0);
}

TEST_CASE("graph-API tensors: NCHW dims and strides, a concat slice's image stride, grouped filters") {
    const BackendTensorShape dense = activation_shape(32, 64, 56, 56, 64 * 56 * 56);
    CHECK(dense.dims == std::array<std::int64_t, 4>{32, 64, 56, 56});
    CHECK(dense.strides == std::array<std::int64_t, 4>{64 * 56 * 56, 56 * 56, 56, 1});
    // GoogLeNet's inception_3a/1x1 writes 64 of the concat's 256 channels.
    const BackendTensorShape slice = activation_shape(32, 64, 28, 28, 256 * 28 * 28);
    CHECK(slice.strides[0] == 256 * 28 * 28);
    CHECK(slice.strides[1] == 28 * 28);
    // Inception-v3's 1x7: rectangular filters; two groups of 4 input channels each.
    const BackendTensorShape filter = filter_shape(6, 4, 1, 7);
    CHECK(filter.dims == std::array<std::int64_t, 4>{6, 4, 1, 7});
    CHECK(filter.strides == std::array<std::int64_t, 4>{28, 7, 7, 1});
    // Sizes past 32 bits stay exact.
    CHECK(activation_shape(1, 1, 70000, 70000, 4'900'000'000ULL).strides[1] == 4'900'000'000LL);
}

TEST_CASE("NHWC tensors: the same dims, channels adjacent; KRSC filters; every element one offset in both layouts") {
    const BackendTensorShape dense = activation_shape(32, 64, 56, 56, 64 * 56 * 56, TensorLayout::nhwc);
    CHECK(dense.dims == std::array<std::int64_t, 4>{32, 64, 56, 56});
    CHECK(dense.strides == std::array<std::int64_t, 4>{64 * 56 * 56, 1, 56 * 64, 64});
    const BackendTensorShape filter = filter_shape(6, 4, 1, 7, TensorLayout::nhwc);
    CHECK(filter.dims == std::array<std::int64_t, 4>{6, 4, 1, 7});
    CHECK(filter.strides == std::array<std::int64_t, 4>{28, 1, 28, 4});
    CHECK(filter_shape(6, 4, 1, 7, TensorLayout::nchw).strides == filter_shape(6, 4, 1, 7).strides);

    // Offsets n*s0 + c*s1 + h*s2 + w*s3 of a dense tensor cover [0, NCHW) once each.
    for (const TensorLayout layout : {TensorLayout::nchw, TensorLayout::nhwc}) {
        CAPTURE(to_string(layout));
        const std::uint32_t n = 2, c = 3, h = 4, w = 5;
        const BackendTensorShape t = activation_shape(n, c, h, w, std::uint64_t{c} * h * w, layout);
        std::vector<int> seen(std::size_t{n} * c * h * w, 0);
        for (std::int64_t i = 0; i < n; ++i)
            for (std::int64_t j = 0; j < c; ++j)
                for (std::int64_t k = 0; k < h; ++k)
                    for (std::int64_t l = 0; l < w; ++l) {
                        const std::int64_t at = i * t.strides[0] + j * t.strides[1] + k * t.strides[2] + l * t.strides[3];
                        REQUIRE(at >= 0);
                        REQUIRE(at < static_cast<std::int64_t>(seen.size()));
                        ++seen[static_cast<std::size_t>(at)];
                    }
        CHECK(std::count(seen.begin(), seen.end(), 1) == static_cast<std::ptrdiff_t>(seen.size()));
    }
    CHECK(to_string(TensorLayout::nhwc) == "nhwc");
    CHECK(to_string(TensorLayout::nchw) == "nchw");
}

TEST_CASE("NHWC convolutions take a bias; NHWC fully connected layers over many pixels take an NCHW copy in scratch") {
    LayerOptions o;
    o.layout = TensorLayout::nhwc;
    const Conv2d biased({2, 4, 8, 8}, {.out_channels = 6, .kernel = 3, .stride = 1, .pad = 1, .groups = 1, .bias = true});
    const Conv2d plain({2, 4, 8, 8}, {.out_channels = 6, .kernel = 3, .stride = 1, .pad = 1, .groups = 1, .bias = false});
    // The bias gradient reduces as the NHWC batch norm does, in its scratch.
    CHECK(CudaConv("stem.conv", biased, o).scratch_bytes() == channel_reduction_scratch_bytes(2, 6, 8, 8, true));
    CHECK(CudaConv("stem.conv", biased, {}).scratch_bytes() == channel_reduction_scratch_bytes(2, 6, 8, 8));
    CHECK(CudaConv("stem.conv", plain, o).scratch_bytes() == 0);
    const FullyConnected wide({3, 8, 4, 4}, {.out_features = 5});
    const FullyConnected flat({3, 8, 1, 1}, {.out_features = 5});
    CHECK(CudaFullyConnected("aux.fc", wide, o).scratch_bytes() == 3 * 8 * 16 * sizeof(float));
    CHECK(CudaFullyConnected("aux.fc", wide, {}).scratch_bytes() == 0);
    CHECK(CudaFullyConnected("fc", flat, o).scratch_bytes() == 0);  // one pixel: the same order in both layouts
}

TEST_CASE("NHWC pools, batch norms and convolutions take whole images only: a channel slice's stride is refused, naming the layer") {
    // NCHW: any image stride (a concat slice's is wider than its image).
    CHECK_NOTHROW(check_whole_images(TensorLayout::nchw, "pooling 'p' forward", 64, 192, 16, 48));
    CHECK_NOTHROW(check_whole_images(TensorLayout::nhwc, "pooling 'p' forward", 64, 64, 16, 16));
    CHECK_THROWS_WITH_AS(check_whole_images(TensorLayout::nhwc, "pooling 'inception_3a.pool' forward", 64, 64, 16, 48),
                         doctest::Contains("pooling 'inception_3a.pool' forward: NHWC activations must be whole "
                                           "tensors, not channel slices (image strides 64 and 48 for images of 64 "
                                           "and 16 floats)"),
                         braid::Error);
    CHECK_THROWS_AS(check_whole_images(TensorLayout::nhwc, "x", 64, 192, 16, 16), braid::Error);

    // Batch norm's own NHWC reductions take their own scratch: partials per pixel slice, two means per channel.
    LayerOptions o;
    o.layout = TensorLayout::nhwc;
    const BatchNorm2d norm({32, 256, 56, 56}, {});
    CHECK(CudaBatchNorm("bn", norm, o).scratch_bytes() == channel_reduction_scratch_bytes(32, 256, 56, 56, true));
    CHECK(CudaBatchNorm("bn", norm, {}).scratch_bytes() == channel_reduction_scratch_bytes(32, 256, 56, 56));

    const Pool2d pool({2, 8, 9, 9}, {.kernel = 3, .stride = 2, .pad = 1});
    CHECK_FALSE(pool_args(pool).channels_last);
    const PoolArgs nhwc = pool_args(pool, TensorLayout::nhwc);
    CHECK(nhwc.channels_last);
    CHECK(nhwc.out_h == pool.out.h);
    CHECK(nhwc.kernel_w == 3);
}

TEST_CASE("NHWC activations: the bundled nets and every layer kind take them; a concat fed by a convolution refuses, named") {
    const auto unfit = [](const std::string& net, std::uint32_t image) {
        braid::samples::TrainConfig c;
        c.model.net = net;
        c.model.batch = 2;
        c.model.image = image;
        c.model.width_scale = 0.125;
        return braid::samples::channels_last_unfit(braid::samples::build_training_graph(c).network);
    };
    CHECK(unfit("resnet18", 64) == "");
    CHECK(unfit("resnet50", 64) == "");
    // Biased convolutions, LRN, concats of ReLU outputs and the auxiliary heads (their fully connected layers
    // read 1x1 pixels at 64x64, 4x4 at 224x224).
    CHECK(unfit("googlenet", 64) == "");
    // Inception-v3's branches end in batch norm + ReLU or a max pool, which write NHWC channel slices.
    CHECK(unfit("inception_v3", 299) == "");

    // Small nets of one layer kind each, a loss on top.
    using namespace braid::samples;
    const auto net = [](auto&& add) {
        NetworkBuilder b("one", {2, 8, 6, 6});
        const TensorId x = add(b, b.images());
        const TensorId logits = b.fully_connected("logits", b.pool("gap", x, {.mode = PoolMode::average, .global = true}),
                                                  {.out_features = 4});
        b.softmax_loss("loss", logits);
        return channels_last_unfit(b.finish());
    };
    CHECK(net([](NetworkBuilder& b, TensorId x) { return b.lrn("stem.lrn", x); }) == "");
    CHECK(net([](NetworkBuilder& b, TensorId x) { return b.dropout("drop", x, {}); }) == "");
    CHECK(net([](NetworkBuilder& b, TensorId x) { return b.batch_norm("bn", x); }) == "");
    // A concat's inputs are channel slices: batch norm, ReLU, add and pools may write one, a convolution not.
    const ConvConfig conv{.out_channels = 4, .kernel = 1, .stride = 1, .pad = 0, .groups = 1, .bias = false};
    CHECK(net([&](NetworkBuilder& b, TensorId x) {
              return b.concat("cat", {b.relu("a.relu", b.batch_norm("a.bn", b.conv("a.conv", x, conv))),
                                      b.conv("b.conv", x, conv)});
          }) == "concat 'cat' reads 'b.conv' from conv 'b.conv', which cannot write an NHWC channel slice");
    CHECK(net([&](NetworkBuilder& b, TensorId x) {
              const TensorId c = b.batch_norm("c.bn", b.conv("c.conv", x, conv)),
                             d = b.relu("d.relu", b.conv("d.conv", x, conv));
              return b.concat("cat", {b.relu("a.relu", b.conv("a.conv", x, conv)), b.batch_norm("b.bn", c),
                                      b.pool("p", x, {.kernel = 3, .stride = 1, .pad = 1}), b.add("sum", c, d)});
          }) == "");
    // A plain add hands its output's gradient (the slice) to its inputs' writers: a convolution cannot read it.
    CHECK(net([&](NetworkBuilder& b, TensorId x) {
              const TensorId c = b.batch_norm("c.bn", b.conv("c.conv", x, conv)), d = b.conv("d.conv", x, conv);
              return b.concat("cat", {b.relu("a.relu", b.conv("a.conv", x, conv)), b.add("sum", c, d)});
          }) == "concat 'cat' reads 'sum' from add 'sum', which passes its gradient, a channel slice, on to its "
                "inputs: conv 'd.conv' cannot read an NHWC channel slice as its gradient");
    // ... and a max pool cannot either: its output stays whole, and its kernels read y and dy with one stride.
    CHECK(net([&](NetworkBuilder& b, TensorId x) {
              const TensorId c = b.batch_norm("c.bn", b.conv("c.conv", x, conv)),
                             p = b.pool("p", b.conv("p.conv", x, conv), {.kernel = 3, .stride = 1, .pad = 1});
              return b.concat("cat", {b.relu("a.relu", b.conv("a.conv", x, conv)), b.add("sum", c, p)});
          }) == "concat 'cat' reads 'sum' from add 'sum', which passes its gradient, a channel slice, on to its "
                "inputs: max_pool 'p' cannot read an NHWC channel slice as its gradient beside its whole output "
                "(its kernels read both with one pixel stride)");
    // An average pool reads no y: it may.
    CHECK(net([&](NetworkBuilder& b, TensorId x) {
              const TensorId c = b.batch_norm("c.bn", b.conv("c.conv", x, conv)),
                             p = b.pool("p", b.conv("p.conv", x, conv),
                                        {.mode = PoolMode::average, .kernel = 3, .stride = 1, .pad = 1});
              return b.concat("cat", {b.relu("a.relu", b.conv("a.conv", x, conv)), b.add("sum", c, p)});
          }) == "");
    // A softmax over logits of many pixels takes an image's floats as its classes, in memory order.
    NetworkBuilder pixels("pixels", {2, 8, 6, 6});
    pixels.softmax_loss("loss", pixels.relu("r", pixels.images()));
    CHECK(channels_last_unfit(pixels.finish()) ==
          "softmax_loss 'loss' reads logits of 6x6 pixels, whose classes NHWC would store in another order");
    NetworkBuilder flat("flat", {2, 8, 6, 6});
    const TensorId fc = flat.fully_connected("fc6", flat.images(), {.out_features = 4});
    flat.softmax_loss("loss", fc);
    CHECK(channels_last_unfit(flat.finish()) == "");
}

TEST_CASE("graph-API alignment: the largest power of two up to 16 dividing every pointer") {
    alignas(16) static float buffer[64];
    CHECK(common_alignment({buffer, buffer + 4, buffer + 8}) == 16);
    CHECK(common_alignment({buffer, buffer + 2}) == 8);
    CHECK(common_alignment({buffer + 1, buffer + 4}) == 4);
    CHECK(common_alignment({buffer, nullptr}) == 16);  // null pointers say nothing
    CHECK(common_alignment({}) == 16);
    const char* bytes = reinterpret_cast<const char*>(buffer);
    CHECK(common_alignment({bytes + 1}) == 1);
    CHECK(common_alignment({bytes + 6}) == 2);
}

namespace {

EngineCandidate engine(std::int64_t index, std::vector<cudnnBackendNumericalNote_t> notes, std::size_t workspace,
                       float ms = -1.0f) {
    EngineCandidate c;
    c.engine = index;
    c.notes = std::move(notes);
    c.workspace_bytes = workspace;
    c.time_ms = ms;
    return c;
}

}  // namespace

TEST_CASE("graph-API engine choice: the options' filters, the budget, then the fastest timed or the heuristics' first") {
    LayerOptions exact;  // deterministic, no TF32
    exact.tf32 = false;
    LayerOptions fast;
    fast.deterministic = false;
    fast.tf32 = true;
    const EngineCandidate tensor = engine(10, {CUDNN_NUMERICAL_NOTE_TENSOR_CORE}, 4 * mib);
    const EngineCandidate racy = engine(11, {CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC}, 0);
    const EngineCandidate fp16 = engine(12, {CUDNN_NUMERICAL_NOTE_TENSOR_CORE,
                                             CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS}, 0);
    const EngineCandidate half_sum = engine(13, {CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION}, 0);
    const EngineCandidate big = engine(14, {}, 2 * gib);
    const EngineCandidate plain = engine(15, {}, mib);
    EngineCandidate broken = engine(16, {}, 0);
    broken.failure = "its plan did not build: CUDNN_STATUS_NOT_SUPPORTED (status 3000)";

    CHECK(engine_rejection(tensor, exact, gib).find("tensor cores") != std::string::npos);
    CHECK(engine_rejection(tensor, fast, gib).empty());
    CHECK(engine_rejection(racy, exact, gib) == "nondeterministic");
    CHECK(engine_rejection(racy, fast, gib).empty());
    CHECK(engine_rejection(fp16, exact, gib).find("tensor cores") != std::string::npos);
    CHECK(engine_rejection(fp16, fast, gib) == "down-converts its inputs");  // FP16/BF16 inputs: never
    CHECK(engine_rejection(half_sum, fast, gib).find("reduced precision") != std::string::npos);
    CHECK(engine_rejection(big, fast, gib).find("2147483648 bytes") != std::string::npos);
    CHECK(engine_rejection(plain, exact, mib).empty());
    CHECK(engine_rejection(plain, exact, mib - 1).find("over the") != std::string::npos);
    CHECK(engine_rejection(broken, fast, gib).find("did not build") != std::string::npos);

    // Heuristics only (untimed): the first allowed in the heuristics' order.
    const std::vector<EngineCandidate> untimed{tensor, racy, big, plain};
    REQUIRE(pick_engine(untimed, exact, gib));
    CHECK(*pick_engine(untimed, exact, gib) == 3);
    CHECK(*pick_engine(untimed, fast, gib) == 0);
    CHECK_FALSE(pick_engine({tensor, racy, half_sum, broken}, exact, gib));
    CHECK_FALSE(pick_engine({}, fast, gib));

    // Timed: the fastest allowed one; a faster forbidden one does not count; ties keep the earlier.
    const std::vector<EngineCandidate> timed{engine(1, {}, 0, 0.9f), engine(2, {CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC}, 0, 0.1f),
                                             engine(3, {CUDNN_NUMERICAL_NOTE_TENSOR_CORE}, 0, 0.3f),
                                             engine(4, {}, 0, 0.5f), engine(5, {}, 0, 0.5f), engine(6, {}, 0)};
    CHECK(*pick_engine(timed, exact, gib) == 3);
    CHECK(*pick_engine(timed, fast, gib) == 1);
    // A candidate timed beside untimed ones wins over the heuristics' first.
    CHECK(*pick_engine({engine(7, {}, 0), engine(8, {}, 0, 2.0f)}, exact, gib) == 1);

    CHECK(describe(tensor) == "engine 10 (tensor-core, 4.0 MiB)");
    EngineCandidate compiled = plain;
    compiled.runtime_compiled = true;
    CHECK(describe(compiled) == "engine 15 (runtime-compiled, 1.0 MiB)");
    CHECK(describe(engine(2, {CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC}, 0, 0.25f)) ==
          "engine 2 (nondeterministic, 0.0 MiB, 0.25 ms)");
}

TEST_CASE("engine search: builds only what the notes allow, stops or times as told, precompiled first, fallback lists add only new engines") {
    LayerOptions exact;
    exact.tf32 = false;
    // Candidates by id; what building and timing them gives.
    std::map<std::size_t, std::optional<std::size_t>> workspace;
    std::map<std::size_t, float> ms;
    std::vector<std::size_t> built, timed;
    const EngineSearch::Build build = [&](std::size_t id) {
        built.push_back(id);
        const std::optional<std::size_t> w = workspace.at(id);
        return w ? EngineSearch::Built{*w, ""} : EngineSearch::Built{0, "its plan did not build: status 3000"};
    };
    const EngineSearch::Time time = [&](std::size_t id) {
        timed.push_back(id);
        return ms.at(id);
    };
    const auto candidate = [](std::size_t id, std::int64_t index, std::vector<cudnnBackendNumericalNote_t> notes = {},
                              bool compiled = false) {
        EngineCandidate c = engine(index, std::move(notes), 0);
        c.id = id;
        c.runtime_compiled = compiled;
        return c;
    };

    SUBCASE("heuristics only: the first allowed engine whose plan builds") {
        workspace = {{2, std::nullopt}, {3, mib}, {4, 0}};
        EngineSearch search(exact, gib, false);
        search.offer({candidate(0, 10, {CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC}),
                      candidate(1, 11, {CUDNN_NUMERICAL_NOTE_TENSOR_CORE}), candidate(2, 12), candidate(3, 13),
                      candidate(4, 14)},
                     build, time);
        CHECK(built == std::vector<std::size_t>{2, 3});  // never the forbidden ones, nothing after the choice
        CHECK(timed.empty());
        REQUIRE(search.choice());
        CHECK(search.tried()[*search.choice()].engine == 13);
        CHECK(search.tried()[*search.choice()].workspace_bytes == mib);
        CHECK(search.tried().size() == 4);
        CHECK(engine_rejection(search.tried()[2], exact, gib).find("did not build") != std::string::npos);
    }
    SUBCASE("timed: up to engine_trials allowed engines, the fastest kept; a failed run never chosen") {
        exact.engine_trials = 3;
        workspace = {{0, 0}, {1, 0}, {2, 0}, {3, 0}, {4, 0}};
        ms = {{0, 1.0f}, {1, -1.0f}, {3, 0.5f}, {4, 0.01f}};
        EngineSearch search(exact, gib, true);
        search.offer({candidate(0, 20), candidate(1, 21), candidate(2, 22, {CUDNN_NUMERICAL_NOTE_TENSOR_CORE}),
                      candidate(3, 23), candidate(4, 24)},
                     build, time);
        CHECK(timed == std::vector<std::size_t>{0, 1, 3});  // the forbidden 2 is not a trial; 4 is past the budget of 3
        REQUIRE(search.choice());
        CHECK(search.tried()[*search.choice()].engine == 23);
        CHECK(search.tried()[*search.choice()].time_ms == doctest::Approx(0.5));
        CHECK(engine_rejection(search.tried()[1], exact, gib) == "its plan failed when timed");
    }
    SUBCASE("one engine with two knob settings in a list: both tried; no trials asked for still times one") {
        workspace = {{0, 0}, {1, 0}};
        ms = {{0, 0.8f}, {1, 0.4f}};
        EngineSearch search(exact, gib, true);
        search.offer({candidate(0, 60), candidate(1, 60)}, build, time);
        CHECK(timed == std::vector<std::size_t>{0, 1});
        REQUIRE(search.choice());
        CHECK(search.tried()[*search.choice()].id == 1);
        exact.engine_trials = 0;
        timed.clear();
        EngineSearch one(exact, gib, true);
        one.offer({candidate(0, 60), candidate(1, 60)}, build, time);
        CHECK(timed == std::vector<std::size_t>{0});
        CHECK(one.choice());
    }
    SUBCASE("a plan over the workspace budget is built, then refused") {
        workspace = {{0, 2 * mib}, {1, mib}};
        EngineSearch search(exact, mib, false);
        search.offer({candidate(0, 30), candidate(1, 31)}, build, time);
        CHECK(built == std::vector<std::size_t>{0, 1});
        REQUIRE(search.choice());
        CHECK(search.tried()[*search.choice()].engine == 31);
    }
    SUBCASE("runtime-compiled engines go after the precompiled ones of their list") {
        exact.engine_trials = 1;
        workspace = {{0, 0}, {1, 0}};
        ms = {{0, 0.1f}, {1, 0.9f}};
        EngineSearch search(exact, gib, true);
        search.offer({candidate(0, 40, {}, true), candidate(1, 41)}, build, time);
        CHECK(built == std::vector<std::size_t>{1});  // the faster one compiles at run time: not reached
        REQUIRE(search.choice());
        CHECK(search.tried()[*search.choice()].engine == 41);
    }
    SUBCASE("a fallback list adds only engines not offered before") {
        workspace = {{2, 0}};
        EngineSearch search(exact, gib, false);
        search.offer({candidate(0, 50, {CUDNN_NUMERICAL_NOTE_TENSOR_CORE})}, build, time);
        CHECK_FALSE(search.choice());
        search.offer({candidate(1, 50, {CUDNN_NUMERICAL_NOTE_TENSOR_CORE}), candidate(2, 51),
                      candidate(3, 51)},
                     build, time);
        CHECK(built == std::vector<std::size_t>{2});
        CHECK(search.tried().size() == 2);
        REQUIRE(search.choice());
        CHECK(search.tried()[*search.choice()].id == 2);
    }
}

TEST_CASE("the convolution API has names for messages and keys") {
    CHECK(to_string(ConvApi::legacy) == "legacy");
    CHECK(to_string(ConvApi::graph) == "graph");
    CHECK(LayerOptions{}.conv_api == ConvApi::legacy);
    CHECK(LayerOptions{}.engine_trials > 0);
}

TEST_CASE("engine families of cuDNN choices: FFT and Winograd by name, tensor-op math, the pre-Volta FP32 engines, else unknown") {
    using F = braid::ConvEngineFamily;
    const auto fwd = [](cudnnConvolutionFwdAlgo_t a, cudnnMathType_t m) {
        return legacy_algorithm_family(ConvPass::forward, a, m);
    };
    CHECK(fwd(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, CUDNN_FMA_MATH) == F::legacy);
    CHECK(fwd(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, CUDNN_DEFAULT_MATH) == F::legacy);
    CHECK(fwd(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, CUDNN_TENSOR_OP_MATH) == F::tensor_core);
    CHECK(fwd(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) ==
          F::tensor_core);
    CHECK(fwd(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, CUDNN_FMA_MATH) == F::other);
    CHECK(fwd(CUDNN_CONVOLUTION_FWD_ALGO_GEMM, CUDNN_DEFAULT_MATH) == F::other);
    CHECK(fwd(CUDNN_CONVOLUTION_FWD_ALGO_FFT, CUDNN_FMA_MATH) == F::fft);
    CHECK(fwd(CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING, CUDNN_TENSOR_OP_MATH) == F::fft);
    CHECK(fwd(CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD, CUDNN_FMA_MATH) == F::winograd);
    CHECK(fwd(CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED, CUDNN_TENSOR_OP_MATH) == F::winograd);
    CHECK(legacy_algorithm_family(ConvPass::backward_data, CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, CUDNN_FMA_MATH) ==
          F::legacy);
    CHECK(legacy_algorithm_family(ConvPass::backward_data, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, CUDNN_TENSOR_OP_MATH) ==
          F::tensor_core);
    CHECK(legacy_algorithm_family(ConvPass::backward_data, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, CUDNN_FMA_MATH) ==
          F::other);
    CHECK(legacy_algorithm_family(ConvPass::backward_data, CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING,
                                  CUDNN_FMA_MATH) == F::fft);
    CHECK(legacy_algorithm_family(ConvPass::backward_data, CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED,
                                  CUDNN_FMA_MATH) == F::winograd);
    CHECK(legacy_algorithm_family(ConvPass::backward_filter, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, CUDNN_FMA_MATH) ==
          F::legacy);
    CHECK(legacy_algorithm_family(ConvPass::backward_filter, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1,
                                  CUDNN_TENSOR_OP_MATH) == F::tensor_core);
    CHECK(legacy_algorithm_family(ConvPass::backward_filter, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3, CUDNN_FMA_MATH) ==
          F::other);
    CHECK(legacy_algorithm_family(ConvPass::backward_filter, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT,
                                  CUDNN_FMA_MATH) == F::fft);
    CHECK(legacy_algorithm_family(ConvPass::backward_filter, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED,
                                  CUDNN_FMA_MATH) == F::winograd);
    // Graph-API engines, by their numerical notes.
    CHECK(engine_notes_family({}) == F::other);
    CHECK(engine_notes_family({CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC}) == F::other);
    CHECK(engine_notes_family({CUDNN_NUMERICAL_NOTE_TENSOR_CORE}) == F::tensor_core);
    CHECK(engine_notes_family({CUDNN_NUMERICAL_NOTE_FFT, CUDNN_NUMERICAL_NOTE_TENSOR_CORE}) == F::fft);
    CHECK(engine_notes_family({CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_4x4}) == F::winograd);
    CHECK(engine_notes_family({CUDNN_NUMERICAL_NOTE_TENSOR_CORE, CUDNN_NUMERICAL_NOTE_WINOGRAD}) == F::winograd);
}

TEST_CASE("cuDNN batch norm: which statuses hand a pass to the own kernels, which layers and layouts it cannot take") {
    using Answer = CudaBatchNorm::Answer;
    CHECK(to_string(BatchNormKernels::own) == "own");
    CHECK(to_string(BatchNormKernels::cudnn) == "cudnn");
    CHECK(LayerOptions{}.batch_norm == BatchNormKernels::own);
    for (const bool packed : {true, false}) {
        CAPTURE(packed);
        CHECK(CudaBatchNorm::answer(CUDNN_STATUS_SUCCESS, packed) == Answer::ran);
        CHECK(CudaBatchNorm::answer(CUDNN_STATUS_NOT_SUPPORTED, packed) == Answer::declined);
        CHECK(CudaBatchNorm::answer(static_cast<cudnnStatus_t>(CUDNN_STATUS_NOT_SUPPORTED + 1), packed) ==
              Answer::declined);  // a sub-code of the family
        CHECK(CudaBatchNorm::answer(CUDNN_STATUS_EXECUTION_FAILED, packed) == Answer::failed);
        CHECK(CudaBatchNorm::answer(CUDNN_STATUS_INTERNAL_ERROR, packed) == Answer::failed);
        CHECK(CudaBatchNorm::answer(CUDNN_STATUS_NOT_INITIALIZED, packed) == Answer::failed);
    }
    // A bad parameter is cuDNN refusing a layout only where the tensors are strided.
    CHECK(CudaBatchNorm::answer(CUDNN_STATUS_BAD_PARAM, false) == Answer::declined);
    CHECK(CudaBatchNorm::answer(CUDNN_STATUS_BAD_PARAM, true) == Answer::failed);

    CHECK(CudaBatchNorm::unfit({1, 64, 1, 1}).find("one value per channel") != std::string::npos);
    CHECK(CudaBatchNorm::unfit({2, 64, 1, 1}).empty());
    CHECK(CudaBatchNorm::unfit({1, 64, 1, 2}).empty());
    CHECK(CudaBatchNorm::unfit({32, 64, 56, 56}).empty());

    CHECK(CudaBatchNorm::layout_conflict(100, 100, 100).empty());
    const std::string conflict = CudaBatchNorm::layout_conflict(100, 250, 100);
    CHECK(conflict.find("100, 250 and 100 floats per image") != std::string::npos);
    CHECK_FALSE(CudaBatchNorm::layout_conflict(100, 100, 250).empty());
    CHECK_FALSE(CudaBatchNorm::layout_conflict(250, 100, 100).empty());
}

TEST_CASE("compare_runs: two runs of one launch mode and at least one round, refused before any GPU is asked") {
    braid::samples::TrainConfig c;
    c.model.net = "resnet18";
    c.model.batch = 2;
    c.model.image = 32;
    c.model.classes = 10;
    c.model.width_scale = 0.125;
    const braid::samples::TrainingGraph tg = braid::samples::build_training_graph(c);
    const braid::Plan serial = braid::strategy::serial(tg.graph);
    braid::samples::CudaRunOptions eager, graph;
    graph.graph_mode = true;
    CHECK_THROWS_WITH_AS(braid::samples::compare_runs(tg, serial, eager, graph),
                         doctest::Contains("both runs must launch alike"), braid::Error);
    CHECK_THROWS_WITH_AS(braid::samples::compare_runs(tg, serial, graph, eager),
                         doctest::Contains("both runs must launch alike"), braid::Error);
    CHECK_THROWS_WITH_AS(braid::samples::compare_runs(tg, serial, eager, eager, 0),
                         doctest::Contains("rounds must be at least 1"), braid::Error);
}

}  // TEST_SUITE

TEST_CASE("the GPU tests' slice helpers: channels of a wide buffer, in order, and the values left alone") {
    const braid::samples::Shape4 wide{2, 4, 1, 3};  // values: 100 n + 10 c + i
    std::vector<float> all;
    for (std::uint32_t n = 0; n < 2; ++n)
        for (std::uint32_t c = 0; c < 4; ++c)
            for (std::uint32_t i = 0; i < 3; ++i) all.push_back(static_cast<float>(100 * n + 10 * c + i));
    CHECK(gpu_test::channel_slice(all, wide, 1, 2) ==
          std::vector<float>{10, 11, 12, 20, 21, 22, 110, 111, 112, 120, 121, 122});
    CHECK(gpu_test::channel_slice(all, wide, 3, 1) == std::vector<float>{30, 31, 32, 130, 131, 132});
    all[0] = all[4] = all[3 * 3 + 1] = all[12 + 9] = -1.0f;  // (0,0,0), (0,1,1) inside, (0,3,1), (1,3,0)
    CHECK(gpu_test::untouched_outside(all, wide, 1, 2, -1.0f) == 3);
}

namespace {

// The kernels of CUDA source `text` whose body does not begin with
// await_previous_kernels(), and how many kernels it has. A kernel is a
// `__global__` declaration with a body, whatever stands between it and the
// name (static, void, __launch_bounds__(...)).
struct KernelEntries {
    std::size_t kernels = 0;
    std::vector<std::string> not_waiting;
};

KernelEntries kernels_not_waiting(const std::string& text) {
    KernelEntries out;
    const std::string marker = "__global__";
    for (std::size_t at = text.find(marker); at != std::string::npos; at = text.find(marker, at + 1)) {
        // The parameter list is the first '(' whose word before it is not __launch_bounds__.
        std::size_t open = text.find('(', at);
        while (open != std::string::npos && open >= 17 && text.compare(open - 17, 17, "__launch_bounds__") == 0) {
            std::size_t p = open;
            for (int depth = 0; p < text.size(); ++p) {
                if (text[p] == '(') ++depth;
                if (text[p] == ')' && --depth == 0) break;
            }
            open = text.find('(', p);
        }
        if (open == std::string::npos) break;
        std::size_t name_begin = open;
        while (name_begin > at && (std::isalnum(static_cast<unsigned char>(text[name_begin - 1])) != 0 ||
                                   text[name_begin - 1] == '_'))
            --name_begin;
        const std::string name = text.substr(name_begin, open - name_begin);
        std::size_t p = open;
        for (int depth = 0; p < text.size(); ++p) {
            if (text[p] == '(') ++depth;
            if (text[p] == ')' && --depth == 0) break;
        }
        const std::size_t body = text.find_first_of("{;", p);
        if (body == std::string::npos || text[body] == ';') continue;  // a declaration: its definition counts
        const std::size_t first = text.find_first_not_of(" \n", body + 1);
        ++out.kernels;
        if (text.compare(first, 25, "await_previous_kernels();") != 0) out.not_waiting.push_back(name);
    }
    return out;
}

std::size_t occurrences(const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}

}  // namespace

// CudaBackendOptions::programmatic_launch lets a kernel start before the
// kernel it follows has finished; only its first instruction's wait keeps
// the results those of a plain launch. So every own kernel waits first,
// and every launch goes through the one launcher that sets the attribute
// (KernelStream has no conversion from a bare stream, so a layer cannot
// leave the choice out).
TEST_CASE("every own kernel waits for the kernels before it first, and every launch takes the lane's launch kind") {
    std::ifstream in(BRAID_SOURCE_DIR "/samples/cuda/kernels.cu");
    REQUIRE(in);
    const std::string source{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    const KernelEntries entries = kernels_not_waiting(source);
    CAPTURE(entries.not_waiting.size());
    CHECK(entries.kernels >= 30);
    for (const std::string& name : entries.not_waiting) FAIL_CHECK("kernel " << name << " does not wait first");
    CHECK(source.find("<<<") == std::string::npos);
    // The launcher's one call; no other launch API.
    CHECK(occurrences(source, "cudaLaunchKernel") == 1);
    CHECK(occurrences(source, "cudaLaunchKernelEx(&config, kernel,") == 1);
    CHECK(occurrences(source, "cudaLaunchCooperativeKernel") == 0);
    static_assert(!std::is_convertible_v<cudaStream_t, KernelStream>);

    // The scan itself finds the kernels that do not wait, however declared.
    const KernelEntries made_up = kernels_not_waiting(
        "__global__ void good(int (*f)(int), float* x) {\n    await_previous_kernels();\n    x[0] = 1;\n}\n"
        "template <int V>\n__global__ void bad(float* x) { x[0] = 2; await_previous_kernels(); }\n"
        "static __global__ void __launch_bounds__(256, 2) bounded(float* x) { x[0] = 3; }\n"
        "__global__ void declared(float* x);\n"
        "__global__ static void also_static(float* x)\n{\n    await_previous_kernels();\n}\n");
    CHECK(made_up.kernels == 4);
    CHECK(made_up.not_waiting == std::vector<std::string>{"bad", "bounded"});
}
