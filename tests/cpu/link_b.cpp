#include "braid/braid.hpp"

std::string fingerprint_from_b() {
    braid::OpGraphBuilder b;
    b.add_op({.name = "only", .kind = braid::OpKind::forward});
    return b.finalize().fingerprint();
}
