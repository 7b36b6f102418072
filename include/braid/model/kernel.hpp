// A kernel launch as the resource model sees it: launch shape and the
// per-thread and per-block resources the compiled kernel uses.
#pragma once

#include <cstdint>
#include <string>

namespace braid {

struct Dim3 {
    std::uint32_t x = 1;
    std::uint32_t y = 1;
    std::uint32_t z = 1;

    std::uint64_t count() const noexcept { return std::uint64_t{x} * y * z; }
    friend bool operator==(const Dim3&, const Dim3&) = default;
};

struct KernelShape {
    std::string name;
    Dim3 grid;
    Dim3 block;
    std::uint32_t regs_per_thread = 0;
    std::uint32_t static_smem_bytes = 0;
    std::uint32_t dynamic_smem_bytes = 0;

    std::uint64_t blocks() const noexcept { return grid.count(); }
    std::uint64_t threads_per_block() const noexcept { return block.count(); }
    friend bool operator==(const KernelShape&, const KernelShape&) = default;
};

}  // namespace braid
