// The trace parses as Trace Event Format with one track per stream and one
// slice per kernel, at the simulated times.
#include <doctest/doctest.h>

#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "braid/sim/chrome_trace.hpp"
#include "braid/sim/simulator.hpp"
#include "sim_fixtures.hpp"

using namespace braid;
using namespace braid::sim;
using namespace braid::sim::test;

TEST_CASE("chrome trace: a track per stream, a slice per kernel, a busy-SM counter") {
    const DeviceSpec& dev = h200();
    ProgramBuilder b({0, -1, 0});
    b.launch(0, kernel_cost("gemm", 300, 256, 64, 20000), "conv1", 0);
    b.record(0, 0);
    b.launch(1, kernel_cost("bn", 2000, 256, 32, 5000, 1e6), "bn1", 1);
    b.wait(2, 0);
    b.launch(2, kernel_cost("relu", 500, 128, 16, 3000), "relu1", 2);
    b.launch(0, kernel_cost("gemm", 40, 256, 64, 8000), "conv2", 3);
    b.launch(1, kernel_cost("wgrad", 12, 128, 64, 9000), "", 4);
    const Result r = simulate(dev, b.p);

    const std::string text = chrome_trace(b.p, r, "H200 (simulated)").dump();
    const nlohmann::json trace = nlohmann::json::parse(text);
    REQUIRE(trace.contains("traceEvents"));
    std::map<int, std::string> tracks;
    std::set<int> slice_tracks;
    int slices = 0, counters = 0;
    std::string process;
    for (const auto& e : trace["traceEvents"]) {
        const std::string ph = e.at("ph");
        if (ph == "M" && e.at("name") == "thread_name") tracks[e.at("tid").get<int>()] = e.at("args").at("name");
        if (ph == "M" && e.at("name") == "process_name") process = e.at("args").at("name");
        if (ph == "C") {
            ++counters;
            CHECK(e.at("name") == "busy SMs");
            CHECK(e.at("args").contains("busy_sms"));
        }
        if (ph != "X") continue;
        ++slices;
        const int tid = e.at("tid");
        slice_tracks.insert(tid);
        const std::string name = e.at("name");
        std::size_t k = 0;
        while (k < b.p.kernels.size() && (b.p.kernels[k].label.empty() ? b.p.kernels[k].cost.shape.name : b.p.kernels[k].label) != name) ++k;
        REQUIRE(k < b.p.kernels.size());
        CHECK(tid == static_cast<int>(r.kernels[k].stream) + 1);
        CHECK(e.at("ts").get<double>() == doctest::Approx(r.kernels[k].start_ns / 1000));
        CHECK(e.at("dur").get<double>() == doctest::Approx((r.kernels[k].end_ns - r.kernels[k].start_ns) / 1000));
        CHECK(e.at("args").at("kernel") == b.p.kernels[k].cost.shape.name);
        CHECK(e.at("args").at("grid")[0] == b.p.kernels[k].cost.shape.grid.x);
        CHECK(e.at("args").at("block")[0] == b.p.kernels[k].cost.shape.block.x);
        CHECK(e.at("args").at("sms_used") == r.kernels[k].sms_used);
    }
    CHECK(process == "H200 (simulated)");
    CHECK(slices == static_cast<int>(b.p.kernels.size()));
    CHECK(counters == static_cast<int>(r.utilisation.size()));
    REQUIRE(tracks.size() == 3);
    CHECK(tracks[1] == "stream 0 (priority 0)");
    CHECK(tracks[2] == "stream 1 (priority -1)");
    CHECK(tracks[3] == "stream 2 (priority 0)");
    CHECK(slice_tracks == std::set<int>{1, 2, 3});
}

TEST_CASE("chrome trace refuses a result of another program") {
    ProgramBuilder b({0});
    b.launch(0, kernel_cost("k", 1, 32, 16, 100));
    const Result r = simulate(h200(), b.p);
    b.launch(0, kernel_cost("k2", 1, 32, 16, 100));
    CHECK(error_of([&] { (void)chrome_trace(b.p, r); }).find("1 kernel records but the program has 2") != std::string::npos);
}
