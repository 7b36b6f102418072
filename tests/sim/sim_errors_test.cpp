// Bad input is an error that names what is wrong, found before simulating.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>

#include "braid/sim/simulator.hpp"
#include "sim_fixtures.hpp"

using namespace braid;
using namespace braid::sim;
using namespace braid::sim::test;

namespace {

std::string simulate_error(const Program& p, const Params& params = {}) {
    return error_of([&] { (void)simulate(h200(), p, params); });
}

template <class E>
bool throws_as(const Program& p) {
    try {
        (void)simulate(h200(), p);
    } catch (const E&) {
        return true;
    } catch (...) {
    }
    return false;
}

Program one_kernel(KernelCost k, std::string label = "conv2/fwd") {
    ProgramBuilder b({0});
    b.launch(0, std::move(k), std::move(label));
    return b.p;
}

}  // namespace

TEST_CASE("a block that fits on no SM names the kernel and the resource") {
    SUBCASE("registers") {
        // 1024 threads x 255 registers: far more than an SM's 65536.
        const Program p = one_kernel(kernel_cost("huge_regs", 10, 1024, 255, 1000));
        const std::string e = simulate_error(p);
        CHECK(e.find("kernel 0 'conv2/fwd' (huge_regs)") != std::string::npos);
        CHECK(e.find("registers") != std::string::npos);
        CHECK(throws_as<ModelError>(p));
    }
    SUBCASE("shared memory") {
        const Program p = one_kernel(kernel_cost("huge_smem", 10, 128, 32, 1000, 0, 300 * 1024));
        const std::string e = simulate_error(p);
        CHECK(e.find("'conv2/fwd'") != std::string::npos);
        CHECK(e.find("shared memory") != std::string::npos);
    }
    SUBCASE("threads") {
        const std::string e = simulate_error(one_kernel(kernel_cost("too_wide", 10, 2048, 32, 1000)));
        CHECK(e.find("'conv2/fwd'") != std::string::npos);
        CHECK(e.find("threads") != std::string::npos);
    }
}

TEST_CASE("durations must be finite and positive, bytes finite and non-negative") {
    for (double d : {0.0, -5.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
        CAPTURE(d);
        const Program p = one_kernel(kernel_cost("k", 10, 128, 32, d));
        const std::string e = simulate_error(p);
        CHECK(e.find("kernel 0 'conv2/fwd' (k)") != std::string::npos);
        CHECK(e.find("duration") != std::string::npos);
        CHECK(throws_as<ModelError>(p));
    }
    for (double bytes : {-1.0, std::nan("")}) {
        CAPTURE(bytes);
        const std::string e = simulate_error(one_kernel(kernel_cost("k", 10, 128, 32, 100, bytes)));
        CHECK(e.find("'conv2/fwd'") != std::string::npos);
        CHECK(e.find("dram_bytes") != std::string::npos);
    }
}

TEST_CASE("an empty grid names the kernel") {
    KernelCost k = kernel_cost("empty", 4, 128, 32, 100);
    k.shape.grid.y = 0;
    const std::string e = simulate_error(one_kernel(k, "bn1"));
    CHECK(e.find("kernel 0 'bn1' (empty)") != std::string::npos);
    CHECK(e.find("empty grid") != std::string::npos);
}

TEST_CASE("the second kernel is named when it is the bad one") {
    ProgramBuilder b({0});
    b.launch(0, kernel_cost("fine", 4, 128, 32, 100), "relu1");
    b.launch(0, kernel_cost("bad", 4, 128, 32, -1), "relu2");
    const std::string e = simulate_error(b.p);
    CHECK(e.find("kernel 1 'relu2' (bad)") != std::string::npos);
}

TEST_CASE("program structure errors name the stream, kernel or event") {
    SUBCASE("stream out of range") {
        ProgramBuilder b({0, 0});
        b.launch(3, kernel_cost("k", 1, 32, 16, 100), "fc");
        const std::string e = simulate_error(b.p);
        CHECK(e.find("stream 3 is out of range") != std::string::npos);
        CHECK(e.find("2 stream(s)") != std::string::npos);
        CHECK(e.find("'fc'") != std::string::npos);
        CHECK(throws_as<SimError>(b.p));
    }
    SUBCASE("no streams at all") {
        ProgramBuilder b({});
        b.launch(0, kernel_cost("k", 1, 32, 16, 100));
        CHECK(simulate_error(b.p).find("stream 0 is out of range") != std::string::npos);
    }
    SUBCASE("unknown kernel index") {
        ProgramBuilder b({0});
        b.p.actions.push_back(Action{ActionKind::launch, 0, 5});
        const std::string e = simulate_error(b.p);
        CHECK(e.find("unknown kernel index 5") != std::string::npos);
        CHECK(e.find("stream 0") != std::string::npos);
    }
    SUBCASE("unknown event index") {
        ProgramBuilder b({0, 0});
        b.record(0, 0);
        b.p.actions.push_back(Action{ActionKind::wait, 1, 4});
        const std::string e = simulate_error(b.p);
        CHECK(e.find("unknown event 4") != std::string::npos);
        CHECK(e.find("stream 1") != std::string::npos);
    }
    SUBCASE("a wait with no record anywhere") {
        ProgramBuilder b({0, 0});
        b.wait(1, 2);
        b.launch(1, kernel_cost("k", 1, 32, 16, 100));
        const std::string e = simulate_error(b.p);
        CHECK(e.find("stream 1 waits for event 2") != std::string::npos);
        CHECK(e.find("no earlier action records") != std::string::npos);
        CHECK(throws_as<SimError>(b.p));
    }
    SUBCASE("a wait whose only record comes later in host order") {
        ProgramBuilder b({0, 0});
        b.wait(1, 0);
        b.launch(1, kernel_cost("k", 1, 32, 16, 100));
        b.launch(0, kernel_cost("k", 1, 32, 16, 100));
        b.record(0, 0);
        const std::string e = simulate_error(b.p);
        CHECK(e.find("stream 1 waits for event 0") != std::string::npos);
    }
    SUBCASE("a kernel launched twice") {
        ProgramBuilder b({0, 0});
        const std::uint32_t k = b.launch(0, kernel_cost("k", 1, 32, 16, 100), "pool");
        b.p.actions.push_back(Action{ActionKind::launch, 1, k});
        const std::string e = simulate_error(b.p);
        CHECK(e.find("kernel 0 'pool' (k) is launched twice") != std::string::npos);
    }
    SUBCASE("a kernel never launched") {
        ProgramBuilder b({0});
        b.launch(0, kernel_cost("k", 1, 32, 16, 100));
        b.p.kernels.push_back(Kernel{kernel_cost("orphan", 1, 32, 16, 100), no_op, "lost"});
        CHECK(simulate_error(b.p).find("kernel 1 'lost' (orphan) is never launched") != std::string::npos);
    }
}

TEST_CASE("bad parameters name the parameter") {
    const Program p = one_kernel(kernel_cost("k", 1, 32, 16, 100));
    Params params;
    params.launch_latency_ns = -1;
    CHECK(simulate_error(p, params).find("launch_latency_ns") != std::string::npos);
    params = {};
    params.dispatch_latency_ns = std::nan("");
    CHECK(simulate_error(p, params).find("dispatch_latency_ns") != std::string::npos);
    params = {};
    params.max_resident_kernels = -2;
    CHECK(simulate_error(p, params).find("max_resident_kernels") != std::string::npos);
}
