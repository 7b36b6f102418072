// A CMake project using an installed braid: builds a graph, asks the
// occupancy model a question, and checks both answers.
#include <cstdio>

#include <braid/braid.hpp>

int main() {
    braid::OpGraphBuilder b;
    auto x = b.add_buffer("x", 1024);
    b.add_op({.name = "produce", .kind = braid::OpKind::forward, .writes = {x}});
    b.add_op({.name = "consume", .kind = braid::OpKind::forward, .reads = {x}});
    braid::OpGraph g = b.finalize();

    braid::KernelShape k{.name = "gemm", .grid = {264, 1, 1}, .block = {256, 1, 1}, .regs_per_thread = 64};
    braid::Occupancy o = braid::occupancy(braid::find_device("h200"), k);

    const bool ok = g.edge_count() == 1 && o.blocks_per_sm == 4;
    std::printf("consumer: %zu edge(s), %d blocks/SM, fingerprint %s: %s\n", g.edge_count(), o.blocks_per_sm,
                g.fingerprint().c_str(), ok ? "ok" : "WRONG");
    return ok ? 0 : 1;
}
