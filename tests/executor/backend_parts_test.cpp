// Pieces of the backends that need no GPU: the stream priority mapping and
// the owning-handle template the CUDA backend builds on. This file and
// executor_host_test.cpp both include the host and sim backends and link
// into one program (no ODR surprises).
#include <doctest/doctest.h>

#include <vector>

#include "braid/cuda/handle.hpp"
#include "braid/exec/executor.hpp"
#include "braid/exec/host.hpp"
#include "braid/exec/sim.hpp"
#include "braid/exec/stream_priorities.hpp"

static_assert(braid::ExecutionBackend<braid::HostBackend>);
static_assert(braid::ExecutionBackend<braid::SimBackend>);

using braid::map_stream_priorities;

TEST_CASE("plan priorities map into the device's range, keeping their order") {
    using V = std::vector<int>;
    // In range: unchanged (CUDA's convention on both sides).
    CHECK(map_stream_priorities(V{0, -1, -5, 0}, 0, -5) == V{0, -1, -5, 0});
    // The range may be given either way round.
    CHECK(map_stream_priorities(V{0, -2}, -5, 0) == V{0, -2});
    // Out of range but clamping keeps them distinct: clamped, as CUDA would.
    CHECK(map_stream_priorities(V{0, -1, -10}, 0, -5) == V{0, -1, -5});
    // Clamping would merge them: ranked from the least urgent down.
    CHECK(map_stream_priorities(V{0, -8, -10, -12}, 0, -5) == V{0, -1, -2, -3});
    CHECK(map_stream_priorities(V{3, 2, 1, 0}, 0, -5) == V{0, -1, -2, -3});
    // More distinct priorities than the device has: the most urgent share the top one.
    CHECK(map_stream_priorities(V{0, -1, -2, -3, -4, -5, -6, -7}, 0, -5) == V{0, -1, -2, -3, -4, -5, -5, -5});
    // A device without priorities (range [0, 0]).
    CHECK(map_stream_priorities(V{0, -3}, 0, 0) == V{0, 0});
    CHECK(map_stream_priorities(V{}, 0, -5).empty());
}

namespace {
int destroyed = 0;
struct FakeTraits {
    using handle_type = int*;
    static void destroy(int* h) noexcept {
        ++destroyed;
        delete h;
    }
};
using FakeHandle = braid::cuda::UniqueHandle<FakeTraits>;
}  // namespace

TEST_CASE("UniqueHandle owns one handle: move, release, reset") {
    destroyed = 0;
    {
        FakeHandle a(new int(1));
        CHECK(static_cast<bool>(a));
        FakeHandle b(std::move(a));
        CHECK_FALSE(static_cast<bool>(a));
        CHECK(*b.get() == 1);
        FakeHandle c;
        c = std::move(b);
        CHECK(destroyed == 0);
        c.reset(new int(2));
        CHECK(destroyed == 1);
        int* raw = c.release();
        CHECK_FALSE(static_cast<bool>(c));
        delete raw;
        c = FakeHandle(new int(3));
    }
    CHECK(destroyed == 2);
}
