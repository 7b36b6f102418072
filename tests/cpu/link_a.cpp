// Two translation units include the whole umbrella header and link into one
// program: a header-only library must not define anything twice.
#include <doctest/doctest.h>

#include "braid/braid.hpp"

std::string fingerprint_from_b();

std::string fingerprint_from_a() {
    braid::OpGraphBuilder b;
    b.add_op({.name = "only", .kind = braid::OpKind::forward});
    return b.finalize().fingerprint();
}

TEST_CASE("two translation units that include braid/braid.hpp link and agree") {
    CHECK(fingerprint_from_a() == fingerprint_from_b());
    CHECK(&braid::builtin_devices()[0] == &braid::find_device("a100"));
}
