// Executor on the CUDA backend (exit 77 without a device): random graphs of
// small kernels give exactly the serial bits in eager and graph mode; graph
// replays equal eager runs; per-lane cuBLAS and cuDNN handles work side by
// side; a CUDA error or an exception in a body is an ExecutionError naming
// the op and the CUDA error, and the next run works; an error pending before
// run() is not blamed on an op.
#include <doctest/doctest.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstdint>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "braid/cuda/backend.hpp"
#include "braid/exec/executor.hpp"
#include "executor_kernels.h"
#include "random_case.hpp"

using namespace braid;
using braid::testing::make_random_case;
using braid::testing::random_plan;
using braid::testing::RandomCase;
using braid::testing::serial_reference;

std::size_t cuda_backend_lanes_from_other_tu(const CudaBackend& backend);  // executor_gpu_link.cpp

namespace {

using CudaExecutor = Executor<CudaBackend>;

struct DeviceArena {
    cuda::DeviceBuffer memory;
    std::uint8_t* get() const { return static_cast<std::uint8_t*>(memory.get()); }
    void upload(const std::vector<std::uint8_t>& bytes, cudaStream_t s) const {
        cuda::check(cudaMemcpyAsync(memory.get(), bytes.data(), bytes.size(), cudaMemcpyHostToDevice, s),
                    "cudaMemcpyAsync");
    }
    std::vector<std::uint8_t> download(std::size_t n, cudaStream_t s) const {
        std::vector<std::uint8_t> out(n);
        cuda::check(cudaMemcpyAsync(out.data(), memory.get(), n, cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync");
        cuda::check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
        return out;
    }
};

std::vector<CudaExecutor::Body> hash_bodies(const RandomCase& c, std::uint8_t* const* arena) {
    std::vector<CudaExecutor::Body> bodies;
    for (std::size_t i = 0; i < c.ops.size(); ++i)
        bodies.emplace_back([&c, arena](CudaLane& lane, const OpContext& ctx) {
            const hashop::OpDesc& d = c.ops[ctx.op];
            const long long delay = static_cast<long long>(hashop::mix(d.op) % 20000);
            // The launch status is left for the backend's cudaGetLastError.
            (void)launch_hash_op(d, ctx.batch_begin, ctx.batch_end, *arena, delay, lane.stream);
        });
    return bodies;
}

}  // namespace

TEST_CASE("random graphs on CUDA streams give the serial bits, eager and graph; graph replay equals eager") {
    // Two backends for every graph: lanes, handles and events are reused
    // across executors, as a trainer with several plans would.
    CudaBackend eager;
    CudaBackend graph(CudaBackendOptions{.mode = LaunchMode::graph});
    int graphs = 0;
    for (std::uint64_t seed = 1; seed <= 60; ++seed) {
        const RandomCase c = make_random_case(seed);
        const std::vector<std::uint8_t> once = serial_reference(c, 1), twice = serial_reference(c, 2);
        std::mt19937_64 rng(seed * 31);
        const Plan plan = random_plan(c.graph, rng, static_cast<std::uint32_t>(seed % 8) + 1);
        INFO("seed " << seed << ", " << plan.stream_count() << " streams, " << plan.waits.size() << " waits");
        DeviceArena arena{cuda::DeviceBuffer(c.initial.size())};
        std::uint8_t* base = arena.get();

        CudaExecutor ex(c.graph, plan, eager, hash_bodies(c, &base));
        arena.upload(c.initial, eager.stream());
        ex.run();
        const std::vector<std::uint8_t> eager_once = arena.download(once.size(), eager.stream());
        REQUIRE(eager_once == once);
        ex.run();
        const std::vector<std::uint8_t> eager_twice = arena.download(once.size(), eager.stream());
        REQUIRE(eager_twice == twice);

        const CudaBackend::Counters before = graph.counters();
        CudaExecutor gx(c.graph, plan, graph, hash_bodies(c, &base));
        arena.upload(c.initial, graph.stream());
        gx.run();  // captured, instantiated, launched
        REQUIRE(arena.download(once.size(), graph.stream()) == eager_once);
        gx.run();  // replayed
        REQUIRE(arena.download(once.size(), graph.stream()) == eager_twice);
        CHECK(graph.counters().captures == before.captures + 1);
        CHECK(graph.counters().instantiations == before.instantiations + 1);
        CHECK(graph.counters().replays == before.replays + 1);
        ++graphs;
    }
    CHECK(graphs == 60);
    CHECK(eager.counters().eager_iterations == 120);
}

TEST_CASE("graph mode records again when the bodies change, updating the executable graph in place") {
    const RandomCase c = make_random_case(4242, {.min_ops = 20, .max_ops = 30});
    std::mt19937_64 rng(9);
    const Plan plan = random_plan(c.graph, rng, 4);
    const std::vector<std::uint8_t> once = serial_reference(c, 1);
    DeviceArena a{cuda::DeviceBuffer(c.initial.size())}, b{cuda::DeviceBuffer(c.initial.size())};
    std::uint8_t* base = a.get();
    CudaBackend backend(CudaBackendOptions{.mode = LaunchMode::graph});
    CudaExecutor ex(c.graph, plan, backend, hash_bodies(c, &base));
    a.upload(c.initial, backend.stream());
    ex.run();
    REQUIRE(a.download(once.size(), backend.stream()) == once);

    // Same topology, other arena: cudaGraphExecUpdate takes it.
    base = b.get();
    ex.invalidate();
    b.upload(c.initial, backend.stream());
    ex.run();
    CHECK(b.download(once.size(), backend.stream()) == once);
    CHECK(backend.counters().captures == 2);
    CHECK(backend.counters().updates == 1);
    CHECK(backend.counters().instantiations == 1);

    // A body that launches twice changes the topology: instantiated afresh.
    const OpId op = plan.steps.front().op;
    ex.set_body(op, [&c, &base, op](CudaLane& lane, const OpContext& ctx) {
        (void)launch_hash_op(c.ops[op], ctx.batch_begin, ctx.batch_end, base, 0, lane.stream);
        (void)launch_empty(lane.stream);
    });
    b.upload(c.initial, backend.stream());
    ex.run();
    CHECK(b.download(once.size(), backend.stream()) == once);
    CHECK(backend.counters().captures == 3);
    CHECK(backend.counters().instantiations == 2);
}

TEST_CASE("lanes: priorities in the device's range, and per-lane cuBLAS and cuDNN handles used side by side") {
    // Eight independent ops, one per lane: each multiplies its own matrices
    // with the lane's cuBLAS handle and applies ReLU with the lane's cuDNN
    // handle. Integer-valued inputs keep every result exact.
    constexpr int n = 64, lanes = 8;
    OpGraphBuilder gb;
    std::vector<BufferId> outs;
    for (int i = 0; i < lanes; ++i) outs.push_back(gb.add_buffer("c" + std::to_string(i), n * n * sizeof(float)));
    for (int i = 0; i < lanes; ++i) gb.add_op({.name = "gemm_relu" + std::to_string(i), .writes = {outs[i]}});
    const OpGraph g = gb.finalize();
    Plan plan;
    plan.strategy = "test";
    plan.graph_fingerprint = g.fingerprint();
    for (int i = 0; i < lanes; ++i) {
        plan.stream_priorities.push_back(-i);
        plan.steps.push_back(PlanStep{static_cast<OpId>(i), 0, 1, static_cast<std::uint32_t>(i)});
    }

    std::vector<float> ha(n * n), hb(n * n);
    std::mt19937 rng(1);
    for (float& v : ha) v = static_cast<float>(static_cast<int>(rng() % 9) - 4);
    for (float& v : hb) v = static_cast<float>(static_cast<int>(rng() % 9) - 4);
    cuda::DeviceBuffer da(n * n * sizeof(float)), db(n * n * sizeof(float));
    cuda::check(cudaMemcpy(da.get(), ha.data(), da.bytes(), cudaMemcpyHostToDevice), "cudaMemcpy");
    cuda::check(cudaMemcpy(db.get(), hb.data(), db.bytes(), cudaMemcpyHostToDevice), "cudaMemcpy");
    std::vector<cuda::DeviceBuffer> dc;
    for (int i = 0; i < lanes; ++i) dc.emplace_back(n * n * sizeof(float));

    // Expected: relu((i + 1) * A * B), column-major as cuBLAS sees it.
    std::vector<std::vector<float>> expected(lanes, std::vector<float>(n * n));
    for (int i = 0; i < lanes; ++i)
        for (int col = 0; col < n; ++col)
            for (int row = 0; row < n; ++row) {
                float sum = 0;
                for (int k = 0; k < n; ++k) sum += ha[k * n + row] * hb[col * n + k];
                sum *= static_cast<float>(i + 1);
                expected[i][col * n + row] = sum > 0 ? sum : 0;
            }

    cudnnTensorDescriptor_t desc = nullptr;
    cuda::check(cudnnCreateTensorDescriptor(&desc), "cudnnCreateTensorDescriptor");
    cuda::check(cudnnSetTensor4dDescriptor(desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 1, n, n),
                "cudnnSetTensor4dDescriptor");
    cudnnActivationDescriptor_t relu = nullptr;
    cuda::check(cudnnCreateActivationDescriptor(&relu), "cudnnCreateActivationDescriptor");
    cuda::check(cudnnSetActivationDescriptor(relu, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0),
                "cudnnSetActivationDescriptor");

    std::vector<CudaExecutor::Body> bodies;
    for (int i = 0; i < lanes; ++i)
        bodies.emplace_back([&, i](CudaLane& lane, const OpContext&) {
            const float alpha = static_cast<float>(i + 1), beta = 0.0f, one = 1.0f, zero = 0.0f;
            float* c = static_cast<float*>(dc[i].get());
            cuda::check(cublasSgemm(lane.cublas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha,
                                    static_cast<const float*>(da.get()), n, static_cast<const float*>(db.get()), n,
                                    &beta, c, n),
                        "cublasSgemm");
            cuda::check(cudnnActivationForward(lane.cudnn, relu, &one, desc, c, &zero, desc, c),
                        "cudnnActivationForward");
        });

    for (LaunchMode mode : {LaunchMode::eager, LaunchMode::graph}) {
        INFO("mode " << to_string(mode));
        CudaBackend backend(CudaBackendOptions{.mode = mode});
        CudaExecutor ex(g, plan, backend, bodies);
        for (int it = 0; it < 3; ++it) {
            for (auto& c : dc) cuda::check(cudaMemsetAsync(c.get(), 0xff, c.bytes(), backend.stream()), "cudaMemsetAsync");
            ex.run();
            backend.synchronize();
            for (int i = 0; i < lanes; ++i) {
                std::vector<float> got(n * n);
                cuda::check(cudaMemcpy(got.data(), dc[i].get(), dc[i].bytes(), cudaMemcpyDeviceToHost), "cudaMemcpy");
                CHECK(got == expected[i]);
            }
        }
        REQUIRE(backend.lane_count() == lanes);
        CHECK(cuda_backend_lanes_from_other_tu(backend) == lanes);
        const std::vector<int> mapped =
            map_stream_priorities(plan.stream_priorities, backend.least_priority(), backend.greatest_priority());
        std::set<cudaStream_t> streams;
        std::set<cublasHandle_t> blas;
        std::set<cudnnHandle_t> dnn;
        std::set<void*> workspaces;
        for (std::uint32_t i = 0; i < lanes; ++i) {
            CudaLane& lane = backend.lane(i);
            int priority = 0;
            cuda::check(cudaStreamGetPriority(lane.stream, &priority), "cudaStreamGetPriority");
            CHECK(priority == mapped[i]);
            CHECK(priority >= backend.greatest_priority());
            CHECK(priority <= backend.least_priority());
            unsigned flags = 0;
            cuda::check(cudaStreamGetFlags(lane.stream, &flags), "cudaStreamGetFlags");
            CHECK((flags & cudaStreamNonBlocking) != 0);
            cudaStream_t bound = nullptr;
            cuda::check(cublasGetStream(lane.cublas, &bound), "cublasGetStream");
            CHECK(bound == lane.stream);
            cuda::check(cudnnGetStream(lane.cudnn, &bound), "cudnnGetStream");
            CHECK(bound == lane.stream);
            streams.insert(lane.stream);
            blas.insert(lane.cublas);
            dnn.insert(lane.cudnn);
            workspaces.insert(lane.cublas_workspace);
            workspaces.insert(lane.cudnn_workspace);
        }
        CHECK(streams.size() == lanes);
        CHECK(blas.size() == lanes);
        CHECK(dnn.size() == lanes);
        CHECK(workspaces.size() == 2 * lanes);
    }
    cuda::check(cudnnDestroyActivationDescriptor(relu), "cudnnDestroyActivationDescriptor");
    cuda::check(cudnnDestroyTensorDescriptor(desc), "cudnnDestroyTensorDescriptor");
}

TEST_CASE("a CUDA error or an exception in a body is an ExecutionError naming the op; the next run works") {
    const RandomCase c = make_random_case(99, {.min_ops = 12, .max_ops = 20});
    std::mt19937_64 rng(2);
    const Plan plan = random_plan(c.graph, rng, 4);
    const std::vector<std::uint8_t> once = serial_reference(c, 1);
    DeviceArena arena{cuda::DeviceBuffer(c.initial.size())};
    std::uint8_t* base = arena.get();
    const OpId victim = plan.steps[plan.steps.size() / 2].op;
    const std::string name = c.graph.op(victim).name;

    for (LaunchMode mode : {LaunchMode::eager, LaunchMode::graph}) {
        for (const char* kind : {"invalid launch", "exception", "exception after an invalid launch"}) {
            INFO("mode " << to_string(mode) << ", " << kind);
            CudaBackend backend(CudaBackendOptions{.mode = mode});
            std::vector<CudaExecutor::Body> bodies = hash_bodies(c, &base);
            bool fail = true;
            const bool launch = std::string(kind) != "exception";
            const bool exception = std::string(kind) != "invalid launch";
            cudaError_t launched = cudaSuccess;  // what the failing launch itself returned
            bodies[victim] = [&, inner = bodies[victim], launch, exception](CudaLane& lane, const OpContext& ctx) {
                if (fail && launch) launched = launch_invalid_configuration(lane.stream);
                if (fail && exception) throw std::runtime_error("cannot run " + name);
                inner(lane, ctx);
            };
            CudaExecutor ex(c.graph, plan, backend, std::move(bodies));
            arena.upload(c.initial, backend.stream());
            try {
                ex.run();
                FAIL("no error");
            } catch (const ExecutionError& e) {
                CHECK(e.op() == name);
                const std::string what = e.what();
                CAPTURE(what);
                if (launch) {
                    // The runtime documents this launch as cudaErrorInvalidConfiguration; the
                    // message must name whatever it returned (H200, CUDA 13.0: not that name).
                    REQUIRE(launched != cudaSuccess);
                    if (launched != cudaErrorInvalidConfiguration)
                        WARN_MESSAGE(false, "the 1056-thread launch returned " << cudaGetErrorName(launched));
                    const bool named = what.find(cudaGetErrorName(launched)) != std::string::npos;
                    if (mode == LaunchMode::eager) {
                        CHECK(named);
                    } else {
                        // In capture, the failed launch may invalidate the capture: the body's next
                        // launch then overwrites CUDA's last error, and the message says how to see the first.
                        CHECK((named || (what.find("cudaErrorStreamCaptureInvalidated") != std::string::npos &&
                                         what.find("eager mode") != std::string::npos)));
                    }
                    CHECK(what.find("cudaGetLastError") != std::string::npos);
                }
                if (exception) CHECK(what.find("cannot run " + name) != std::string::npos);
            }
            backend.synchronize();
            CHECK(cudaGetLastError() == cudaSuccess);
            fail = false;
            arena.upload(c.initial, backend.stream());
            ex.run();
            CHECK(arena.download(once.size(), backend.stream()) == once);
            CHECK(backend.counters().failed_iterations == 1);
        }
    }
}

TEST_CASE("a CUDA error pending before run() is reported as such, not blamed on an op") {
    const RandomCase c = make_random_case(7, {.min_ops = 4, .max_ops = 8});
    std::mt19937_64 rng(3);
    const Plan plan = random_plan(c.graph, rng, 2);
    const std::vector<std::uint8_t> once = serial_reference(c, 1);
    DeviceArena arena{cuda::DeviceBuffer(c.initial.size())};
    std::uint8_t* base = arena.get();
    CudaBackend backend;
    CudaExecutor ex(c.graph, plan, backend, hash_bodies(c, &base));
    arena.upload(c.initial, backend.stream());
    const cudaError_t left = launch_invalid_configuration(backend.stream());  // the caller's own failed launch
    REQUIRE(left != cudaSuccess);
    try {
        ex.run();
        FAIL("no error");
    } catch (const ExecutionError& e) {
        FAIL("blamed on op '" << e.op() << "': " << e.what());
    } catch (const cuda::CudaError& e) {
        CHECK(e.code() == left);
        CHECK(std::string(e.what()).find(std::string("pending before the iteration began: ") +
                                         cudaGetErrorName(left)) != std::string::npos);
    }
    CHECK(cudaGetLastError() == cudaSuccess);
    ex.run();
    CHECK(arena.download(once.size(), backend.stream()) == once);
}

TEST_CASE("lane scratch: grows in eager mode, refuses to grow during capture, reserve makes room") {
    OpGraphBuilder gb;
    const BufferId x = gb.add_buffer("x", 64);
    gb.add_op({.name = "scratchy", .writes = {x}});
    const OpGraph g = gb.finalize();
    Plan plan;
    plan.strategy = "test";
    plan.graph_fingerprint = g.fingerprint();
    plan.stream_priorities = {0};
    plan.steps = {{0, 0, 1, 0}};
    std::size_t want = 1 << 20;
    std::vector<CudaExecutor::Body> bodies{[&](CudaLane& lane, const OpContext&) {
        void* p = lane.scratch.allocate(want);
        cuda::check(cudaMemsetAsync(p, 0, want, lane.stream), "cudaMemsetAsync");
    }};
    {
        CudaBackend backend;
        CudaExecutor ex(g, plan, backend, bodies);
        ex.run();
        CHECK(backend.lane(0).scratch.capacity_bytes() >= want);
        const std::uint64_t epoch = backend.lane(0).scratch.epoch();
        ex.run();
        CHECK(backend.lane(0).scratch.epoch() == epoch);  // no growth when it fits
        backend.synchronize();
    }
    {
        CudaBackend backend(CudaBackendOptions{.mode = LaunchMode::graph});
        CudaExecutor ex(g, plan, backend, bodies);
        CHECK_THROWS_AS(ex.run(), ExecutionError);
        backend.reserve_scratch(want);
        ex.run();
        backend.synchronize();
        CHECK(backend.counters().captures == 1);
    }
}
