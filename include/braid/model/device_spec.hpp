// DeviceSpec: what braid needs to know about one GPU model — the per-SM
// limits the occupancy calculator uses, plus SM count, clock, DRAM bandwidth,
// peak throughputs and the limit on concurrently resident kernels.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "braid/error.hpp"

namespace braid {

struct DeviceSpec {
    std::string key;   // short table key: "h200"
    std::string name;  // marketing name: "NVIDIA H200 SXM 141GB"
    int cc_major = 0;  // compute capability
    int cc_minor = 0;

    int sm_count = 0;
    int warp_size = 32;
    int max_threads_per_sm = 0;
    int max_threads_per_block = 0;
    int max_blocks_per_sm = 0;
    int regs_per_sm = 0;
    int regs_per_block = 0;
    int max_regs_per_thread = 255;
    std::uint64_t shared_mem_per_sm_bytes = 0;           // largest carveout
    std::uint64_t shared_mem_per_block_bytes = 0;        // without opt-in (48 KiB)
    std::uint64_t shared_mem_per_block_optin_bytes = 0;  // with cudaFuncSetAttribute
    std::uint64_t reserved_shared_mem_per_block_bytes = 0;
    int max_resident_grids = 0;  // concurrent kernels the device keeps resident

    double boost_clock_mhz = 0.0;
    double dram_bandwidth_gbps = 0.0;  // GB/s, 1e9 bytes per second
    std::uint64_t dram_bytes = 0;
    std::uint64_t l2_bytes = 0;
    // Dense peak throughput in TFLOP/s (tensor cores with FP32 accumulate for
    // TF32/FP16/BF16).
    double peak_fp32_tflops = 0.0;
    double peak_tf32_tflops = 0.0;
    double peak_fp16_tflops = 0.0;
    double peak_bf16_tflops = 0.0;

    int max_warps_per_sm() const noexcept { return max_threads_per_sm / warp_size; }
    // Bytes per nanosecond, the unit the simulator works in.
    double dram_bytes_per_ns() const noexcept { return dram_bandwidth_gbps; }

    friend bool operator==(const DeviceSpec&, const DeviceSpec&) = default;
};

// Throws ModelError naming the first field that is missing or impossible.
// A device field validate() refuses; field() is its name in device JSON.
class DeviceFieldError : public ModelError {
public:
    DeviceFieldError(std::string field, const std::string& what) : ModelError(what), field_(std::move(field)) {}
    const std::string& field() const noexcept { return field_; }

private:
    std::string field_;
};

inline void validate(const DeviceSpec& d) {
    auto need = [&](bool ok, const char* field, const std::string& why) {
        if (!ok) throw DeviceFieldError(field, "device '" + (d.key.empty() ? d.name : d.key) + "': " + field + " " + why);
    };
    need(!d.key.empty() || !d.name.empty(), "key", "or name must be set");
    // Key and name are printed in tables and errors: valid UTF-8 without
    // control characters (which could rewrite a terminal: C0, DEL, C1) or
    // characters that print as nothing (Unicode's default ignorable code
    // points: soft hyphen, zero-width and direction marks, direction
    // overrides and isolates, variation selectors, fillers, tags, the byte
    // order mark; and line and paragraph separators), which make one name
    // read as another; not blank (only spaces of any width), and not a page
    // long.
    const auto unprintable = [](const std::string& t) {
        static constexpr std::pair<char32_t, char32_t> invisible[] = {
            {0x00, 0x1f},       {0x7f, 0x9f},       {0xad, 0xad},       {0x34f, 0x34f},     {0x61c, 0x61c},
            {0x115f, 0x1160},   {0x17b4, 0x17b5},   {0x180b, 0x180f},   {0x200b, 0x200f},   {0x2028, 0x202e},
            {0x2060, 0x206f},   {0x3164, 0x3164},   {0xfe00, 0xfe0f},   {0xfeff, 0xfeff},   {0xffa0, 0xffa0},
            {0xfff0, 0xfffb},   {0xfffe, 0xffff},   {0x1bca0, 0x1bca3}, {0x1d173, 0x1d17a}, {0xe0000, 0xe0fff}};
        static constexpr std::pair<char32_t, char32_t> blank[] = {
            {0x20, 0x20}, {0xa0, 0xa0}, {0x1680, 0x1680}, {0x2000, 0x200a}, {0x202f, 0x202f},
            {0x205f, 0x205f}, {0x2800, 0x2800}, {0x3000, 0x3000}};
        const auto in = [](char32_t c, const auto& ranges) {
            for (const auto& [lo, hi] : ranges)
                if (c >= lo && c <= hi) return true;
            return false;
        };
        bool all_blank = true;
        for (std::size_t i = 0; i < t.size();) {
            const auto b = [&](std::size_t k) { return k < t.size() ? static_cast<unsigned char>(t[k]) : 0u; };
            const unsigned lead = b(i);
            const std::size_t n = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xe ? 3 : (lead >> 3) == 0x1e ? 4 : 0;
            if (n == 0 || i + n > t.size()) return true;
            char32_t c = n == 1 ? lead : lead & (0x7f >> n);
            for (std::size_t k = 1; k < n; ++k) {
                if ((b(i + k) & 0xc0) != 0x80) return true;
                c = (c << 6) | (b(i + k) & 0x3f);
            }
            const char32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
            if (c < least[n] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return true;  // overlong, surrogate
            if (in(c, invisible)) return true;
            all_blank = all_blank && in(c, blank);
            i += n;
        }
        return !t.empty() && all_blank;
    };
    for (const auto& [field, text] : {std::pair{"key", &d.key}, std::pair{"name", &d.name}})
        if (text->size() > 256 || unprintable(*text))
            throw DeviceFieldError(field, std::string("device ") + field +
                                              ": must be printable text of at most 256 bytes, not blank, without "
                                              "control or invisible formatting characters");
    // Upper bounds far above any GPU (the H200 has 132 SMs, 2048 threads,
    // 32 blocks, 64K registers and 228 KB of shared memory per SM, 128
    // resident grids): they keep a mistyped or hostile device file from
    // sizing the simulator's per-SM state or overflowing its arithmetic.
    constexpr int most_sms = 4096, most_threads = 1 << 16, most_blocks = 1024, most_regs = 1 << 24,
                  most_grids = 1 << 16;
    constexpr std::uint64_t most_smem = std::uint64_t{1} << 30;
    auto at_most = [](auto most) { return "must be <= " + std::to_string(most) + " (far above any GPU)"; };
    need(d.cc_major >= 7 && d.cc_major <= 99, "cc_major",
         "must be 7 or newer (Volta+) and below 100, got " + std::to_string(d.cc_major));
    need(d.cc_minor >= 0 && d.cc_minor <= 99, "cc_minor", "must be between 0 and 99");
    need(d.sm_count > 0, "sm_count", "must be > 0");
    need(d.sm_count <= most_sms, "sm_count", at_most(most_sms));
    need(d.max_threads_per_sm <= most_threads, "max_threads_per_sm", at_most(most_threads));
    need(d.max_blocks_per_sm <= most_blocks, "max_blocks_per_sm", at_most(most_blocks));
    need(d.regs_per_sm <= most_regs, "regs_per_sm", at_most(most_regs));
    need(d.max_regs_per_thread <= 1024, "max_regs_per_thread", at_most(1024));
    need(d.shared_mem_per_sm_bytes <= most_smem, "shared_mem_per_sm_bytes", at_most(most_smem));
    need(d.reserved_shared_mem_per_block_bytes <= most_smem, "reserved_shared_mem_per_block_bytes", at_most(most_smem));
    need(d.max_resident_grids <= most_grids, "max_resident_grids", at_most(most_grids));
    for (const auto& [value, field] : {std::pair{d.boost_clock_mhz, "boost_clock_mhz"},
                                       std::pair{d.dram_bandwidth_gbps, "dram_bandwidth_gbps"},
                                       std::pair{d.peak_fp32_tflops, "peak_fp32_tflops"},
                                       std::pair{d.peak_tf32_tflops, "peak_tf32_tflops"},
                                       std::pair{d.peak_fp16_tflops, "peak_fp16_tflops"},
                                       std::pair{d.peak_bf16_tflops, "peak_bf16_tflops"}})
        need(std::isfinite(value), field, "must be a finite number");
    // H200: 1980 MHz, 4.8 TB/s, 989.5 dense FP16 TFLOP/s; a thousand times more is a typo.
    need(d.boost_clock_mhz <= 1e5, "boost_clock_mhz", "must be <= 100000 (far above any GPU)");
    need(d.dram_bandwidth_gbps <= 1e6, "dram_bandwidth_gbps", "must be <= 1000000 (far above any GPU)");
    for (const auto& [value, field] : {std::pair{d.peak_fp32_tflops, "peak_fp32_tflops"},
                                       std::pair{d.peak_tf32_tflops, "peak_tf32_tflops"},
                                       std::pair{d.peak_fp16_tflops, "peak_fp16_tflops"},
                                       std::pair{d.peak_bf16_tflops, "peak_bf16_tflops"}})
        need(value <= 1e6, field, "must be <= 1000000 (far above any GPU)");
    need(d.warp_size == 32, "warp_size", "must be 32");
    need(d.max_threads_per_sm >= d.warp_size, "max_threads_per_sm", "must hold at least one warp");
    need(d.max_threads_per_block >= d.warp_size && d.max_threads_per_block <= d.max_threads_per_sm,
         "max_threads_per_block", "must be between a warp and max_threads_per_sm");
    need(d.max_threads_per_block % d.warp_size == 0, "max_threads_per_block", "must be a whole number of warps");
    need(d.max_blocks_per_sm > 0, "max_blocks_per_sm", "must be > 0");
    need(d.regs_per_sm > 0, "regs_per_sm", "must be > 0");
    need(d.regs_per_block > 0 && d.regs_per_block <= d.regs_per_sm, "regs_per_block",
         "must be > 0 and <= regs_per_sm");
    need(d.max_regs_per_thread > 0, "max_regs_per_thread", "must be > 0");
    need(d.shared_mem_per_sm_bytes > 0, "shared_mem_per_sm_bytes", "must be > 0");
    need(d.shared_mem_per_block_bytes > 0 && d.shared_mem_per_block_bytes <= d.shared_mem_per_block_optin_bytes,
         "shared_mem_per_block_bytes", "must be > 0 and <= shared_mem_per_block_optin_bytes");
    need(d.shared_mem_per_block_optin_bytes <= d.shared_mem_per_sm_bytes, "shared_mem_per_block_optin_bytes",
         "must be <= shared_mem_per_sm_bytes");
    need(d.max_resident_grids > 0, "max_resident_grids", "must be > 0");
    // Lower bounds far below any GPU (the smallest in braid's table has 1.0 TB/s and 82 TFLOP/s): a
    // value near 0 would make every kernel take ages in the model, and the plan's times absurd.
    need(d.boost_clock_mhz >= 10, "boost_clock_mhz", "must be >= 10 (far below any GPU)");
    need(d.dram_bandwidth_gbps >= 1, "dram_bandwidth_gbps", "must be >= 1 (far below any GPU)");
    need(d.peak_fp32_tflops >= 0.01, "peak_fp32_tflops", "must be >= 0.01 (far below any GPU)");
    for (const auto& [value, field] : {std::pair{d.peak_tf32_tflops, "peak_tf32_tflops"},
                                       std::pair{d.peak_fp16_tflops, "peak_fp16_tflops"},
                                       std::pair{d.peak_bf16_tflops, "peak_bf16_tflops"}})
        need(value == 0 || value >= 0.01, field, "must be 0 (no such tensor cores) or >= 0.01 (far below any GPU)");
}

}  // namespace braid
