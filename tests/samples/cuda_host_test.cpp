// Host logic of the CUDA samples, run without a device (suite 'cpu'): how
// much cuDNN workspace an algorithm may ask for, and the process-wide
// algorithm cache that keeps two models' choices the same.
#include <doctest/doctest.h>

#include <cstddef>
#include <string>

#include "cuda/algorithms.hpp"

using namespace braid::samples::cuda;

namespace {

constexpr std::size_t mib = std::size_t{1} << 20;
constexpr std::size_t gib = std::size_t{1} << 30;

}  // namespace

TEST_SUITE("cpu") {

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

}  // TEST_SUITE
