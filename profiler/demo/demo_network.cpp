#include "demo_network.hpp"

#include <cmath>
#include <cstdint>
#include <string>

#include "braid/cuda/error.hpp"
#include "demo_kernels.h"

namespace braid::demo {
namespace {

std::size_t floats(std::int64_t count) { return static_cast<std::size_t>(count) * sizeof(float); }

}  // namespace

OpGraph demo_graph(const DemoConfig& c) {
    if (c.m <= 0 || c.n <= 0 || c.k <= 0 || c.m % 16 != 0 || c.n % 32 != 0)
        throw Error("demo network: m must be a positive multiple of 16, n of 32, k positive (got m=" +
                    std::to_string(c.m) + ", n=" + std::to_string(c.n) + ", k=" + std::to_string(c.k) + ")");
    if (c.loss_blocks <= 0 || c.loss_blocks > 64)
        throw Error("demo network: loss_blocks must be in [1, 64], got " + std::to_string(c.loss_blocks));
    const std::int64_t m = c.m, n = c.n, k = c.k;
    OpGraphBuilder b;
    const BufferId a = b.add_buffer("A", floats(m * k)), bm = b.add_buffer("B", floats(k * n)),
                   cm = b.add_buffer("C", floats(m * n)), r = b.add_buffer("R", floats(m * n)),
                   s = b.add_buffer("S", floats(n)), cc = b.add_buffer("C_copy", floats(m * n)),
                   o = b.add_buffer("O", floats(m * n)), partials = b.add_buffer("partials", floats(c.loss_blocks)),
                   acc = b.add_buffer("acc", floats(16));
    b.add_op({.name = "zero_acc", .kind = OpKind::forward, .layer = "loss", .reads = {}, .writes = {acc}});
    b.add_op({.name = "gemm", .kind = OpKind::forward, .layer = "fc", .reads = {a, bm}, .writes = {cm}});
    b.add_op({.name = "relu", .kind = OpKind::forward, .layer = "relu", .reads = {cm}, .writes = {r}});
    b.add_op({.name = "colsum", .kind = OpKind::forward, .layer = "colsum", .reads = {cm}, .writes = {s}});
    b.add_op({.name = "copy_c", .kind = OpKind::forward, .layer = "skip", .reads = {cm}, .writes = {cc}});
    b.add_op({.name = "combine", .kind = OpKind::forward, .layer = "combine", .reads = {r, s, cc}, .writes = {o}});
    b.add_op({.name = "loss", .kind = OpKind::forward, .layer = "loss", .reads = {o, acc}, .writes = {partials, acc}});
    return b.finalize();
}

namespace {

// Deterministic values in [-1, 1).
void fill(std::vector<float>& v, std::uint64_t seed) {
    std::uint64_t x = seed * 6364136223846793005ull + 1442695040888963407ull;
    for (float& f : v) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        f = static_cast<float>(static_cast<double>(x >> 40) / static_cast<double>(1ull << 23) - 1.0);
    }
}

}  // namespace

DemoNetwork::DemoNetwork(DemoConfig config) : config_(config), graph_(demo_graph(config)) {
    const std::int64_t m = config_.m, n = config_.n, k = config_.k;
    host_a_.resize(static_cast<std::size_t>(m * k));
    host_b_.resize(static_cast<std::size_t>(k * n));
    fill(host_a_, 1);
    fill(host_b_, 2);
    a_ = cuda::DeviceBuffer(floats(m * k));
    b_ = cuda::DeviceBuffer(floats(k * n));
    c_ = cuda::DeviceBuffer(floats(m * n));
    r_ = cuda::DeviceBuffer(floats(m * n));
    s_ = cuda::DeviceBuffer(floats(n));
    cc_ = cuda::DeviceBuffer(floats(m * n));
    o_ = cuda::DeviceBuffer(floats(m * n));
    partials_ = cuda::DeviceBuffer(floats(config_.loss_blocks));
    acc_ = cuda::DeviceBuffer(floats(16));
    cuda::check(cudaMemcpy(a_.get(), host_a_.data(), a_.bytes(), cudaMemcpyHostToDevice), "cudaMemcpy(A)");
    cuda::check(cudaMemcpy(b_.get(), host_b_.data(), b_.bytes(), cudaMemcpyHostToDevice), "cudaMemcpy(B)");

    auto f = [](const cuda::DeviceBuffer& buf) { return static_cast<float*>(buf.get()); };
    const int mi = config_.m, ni = config_.n, ki = config_.k, blocks = config_.loss_blocks;
    const std::size_t mn = static_cast<std::size_t>(m * n);
    float *A = f(a_), *B = f(b_), *C = f(c_), *R = f(r_), *S = f(s_), *CC = f(cc_), *O = f(o_), *P = f(partials_),
          *acc = f(acc_);
    bodies_.resize(graph_.op_count());
    expected_.resize(graph_.op_count());
    auto body = [&](const char* op, Body fn, ExpectedWork work) {
        const OpId id = graph_.op_id(op);
        bodies_[id] = std::move(fn);
        expected_[id] = std::move(work);
    };
    body(
        "zero_acc",
        [acc](cudaStream_t st, const OpContext&) {
            cuda::check(cudaMemsetAsync(acc, 0, floats(16), st), "cudaMemsetAsync(acc)");
        },
        {{}, {TransferKind::memset}});
    body(
        "gemm", [=](cudaStream_t st, const OpContext&) { launch_gemm(A, B, C, mi, ni, ki, st); },
        {{"gemm_tiled"}, {}});
    body(
        "relu", [=](cudaStream_t st, const OpContext&) { launch_relu(C, R, mn, st); }, {{"relu"}, {}});
    body(
        "colsum", [=](cudaStream_t st, const OpContext&) { launch_colsum(C, S, mi, ni, st); }, {{"column_sum"}, {}});
    body(
        "copy_c",
        [=](cudaStream_t st, const OpContext&) {
            cuda::check(cudaMemcpyAsync(CC, C, floats(m * n), cudaMemcpyDeviceToDevice, st), "cudaMemcpyAsync(C)");
        },
        {{}, {TransferKind::memcpy_dtod}});
    body(
        "combine", [=](cudaStream_t st, const OpContext&) { launch_combine(R, S, CC, O, mi, ni, st); },
        {{"combine"}, {}});
    body(
        "loss", [=](cudaStream_t st, const OpContext&) { launch_loss(O, mn, P, blocks, acc, st); },
        {{"sum_partials", "sum_final"}, {}});
}

float DemoNetwork::loss() const {
    float v = 0.0f;
    cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    cuda::check(cudaMemcpy(&v, acc_.get(), sizeof v, cudaMemcpyDeviceToHost), "cudaMemcpy(acc)");
    return v;
}

std::string DemoNetwork::check() const {
    const std::size_t m = static_cast<std::size_t>(config_.m), n = static_cast<std::size_t>(config_.n),
                      k = static_cast<std::size_t>(config_.k);
    std::vector<double> c(m * n, 0.0), s(n, 0.0);
    for (std::size_t i = 0; i < m; ++i)
        for (std::size_t t = 0; t < k; ++t) {
            const double a = host_a_[i * k + t];
            const float* brow = &host_b_[t * n];
            double* crow = &c[i * n];
            for (std::size_t j = 0; j < n; ++j) crow[j] += a * brow[j];
        }
    for (std::size_t i = 0; i < m; ++i)
        for (std::size_t j = 0; j < n; ++j) s[j] += c[i * n + j];
    double sum = 0.0, magnitude = 0.0;
    for (std::size_t i = 0; i < m; ++i)
        for (std::size_t j = 0; j < n; ++j) {
            const double o = std::max(c[i * n + j], 0.0) * s[j] + 0.5 * c[i * n + j];
            sum += o;
            magnitude += std::abs(o);
        }
    const double got = loss();
    // Float sums in another order: errors grow with the magnitude of the terms.
    const double tolerance = 1e-4 * magnitude + 1e-3;
    if (std::abs(got - sum) <= tolerance) return "";
    return "demo loss is " + std::to_string(got) + ", the CPU computes " + std::to_string(sum) + " (tolerance " +
           std::to_string(tolerance) + ")";
}

}  // namespace braid::demo
