// The op every executor test runs: it folds the bytes it reads into a hash
// and writes bytes derived from that hash, exactly over its access sets. Any
// ordering bug (a read too early, a write too late) changes the bits. Shared
// by the host tests (g++) and the CUDA test kernels (nvcc), so no Boost here.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define HASHOP_HD __host__ __device__
#else
#define HASHOP_HD
#endif

namespace hashop {

inline constexpr int max_reads = 4;
inline constexpr int max_writes = 3;

// A buffer view as arena byte addresses: `chunks` ranges of `bytes`, `stride`
// apart, the first at `offset` (all roots live in one arena).
struct View {
    std::uint64_t offset = 0;
    std::uint64_t bytes = 0;
    std::uint64_t chunks = 1;
    std::uint64_t stride = 0;
};

struct OpDesc {
    std::uint32_t op = 0;
    std::uint32_t batch = 0;  // > 1: splittable over this many images; 0: one unit of work
    std::uint32_t reads = 0;
    std::uint32_t writes = 0;
    View read[max_reads];
    View write[max_writes];
};

HASHOP_HD inline std::uint64_t mix(std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

HASHOP_HD inline std::uint64_t total_bytes(const View& v) { return v.bytes * v.chunks; }

// Arena address of logical byte k of the view.
HASHOP_HD inline std::uint64_t address(const View& v, std::uint64_t k) {
    return v.offset + (k / v.bytes) * v.stride + k % v.bytes;
}

// Logical bytes [lo, hi) of image `image` when the view is split over `batch`
// images (the whole view when batch is 0), spread like braid::split_range.
HASHOP_HD inline void slice(const View& v, std::uint32_t batch, std::uint32_t image, std::uint64_t& lo,
                            std::uint64_t& hi) {
    const std::uint64_t n = total_bytes(v);
    if (batch == 0) {
        lo = 0;
        hi = n;
        return;
    }
    const std::uint64_t base = n / batch, extra = n % batch;
    lo = image * base + (image < extra ? image : extra);
    hi = lo + base + (image < extra ? 1 : 0);
}

HASHOP_HD inline std::uint64_t seed(const OpDesc& d, std::uint32_t image) {
    return mix(0x100000001b3ull * (d.op + 1) + image);
}

HASHOP_HD inline std::uint64_t absorb(std::uint64_t h, std::uint8_t byte) { return mix(h ^ byte); }

HASHOP_HD inline std::uint8_t out_byte(std::uint64_t h, std::uint32_t write, std::uint64_t k) {
    return static_cast<std::uint8_t>(mix(h + 0x51afd7ed558ccdull * (write + 1) + k) >> 56);
}

// Image `image` of the op (its only unit when d.batch is 0), on the host.
inline void run_unit(const OpDesc& d, std::uint32_t image, std::uint8_t* arena) {
    std::uint64_t h = seed(d, image), lo = 0, hi = 0;
    for (std::uint32_t r = 0; r < d.reads; ++r) {
        slice(d.read[r], d.batch, image, lo, hi);
        for (std::uint64_t k = lo; k < hi; ++k) h = absorb(h, arena[address(d.read[r], k)]);
    }
    for (std::uint32_t w = 0; w < d.writes; ++w) {
        slice(d.write[w], d.batch, image, lo, hi);
        for (std::uint64_t k = lo; k < hi; ++k) arena[address(d.write[w], k)] = out_byte(h, w, k);
    }
}

// The images [begin, end) an op body covers; an op that is not splittable
// has one unit of work, image 0.
inline void run_images(const OpDesc& d, std::uint32_t begin, std::uint32_t end, std::uint8_t* arena) {
    if (d.batch == 0) {
        run_unit(d, 0, arena);
        return;
    }
    for (std::uint32_t i = begin; i < end; ++i) run_unit(d, i, arena);
}

}  // namespace hashop
