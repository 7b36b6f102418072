// The built-in device table. Every number has its public source in
// docs/devices.md; per-SM limits follow the CUDA C++ Programming Guide's
// "Technical Specifications per Compute Capability" table.
#pragma once

#include <algorithm>
#include <cctype>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "braid/error.hpp"
#include "braid/model/device_spec.hpp"

namespace braid {

namespace detail {

inline DeviceSpec sm80_limits() {
    DeviceSpec d;
    d.cc_major = 8;
    d.cc_minor = 0;
    d.max_threads_per_sm = 2048;
    d.max_threads_per_block = 1024;
    d.max_blocks_per_sm = 32;
    d.regs_per_sm = 65536;
    d.regs_per_block = 65536;
    d.max_regs_per_thread = 255;
    d.shared_mem_per_sm_bytes = 164 * 1024;
    d.shared_mem_per_block_bytes = 48 * 1024;
    d.shared_mem_per_block_optin_bytes = 163 * 1024;
    d.reserved_shared_mem_per_block_bytes = 1024;
    d.max_resident_grids = 128;
    return d;
}

inline DeviceSpec sm89_limits() {
    DeviceSpec d = sm80_limits();
    d.cc_minor = 9;
    d.max_threads_per_sm = 1536;
    d.max_blocks_per_sm = 24;
    d.shared_mem_per_sm_bytes = 100 * 1024;
    d.shared_mem_per_block_optin_bytes = 99 * 1024;
    return d;
}

inline DeviceSpec sm90_limits() {
    DeviceSpec d = sm80_limits();
    d.cc_major = 9;
    d.cc_minor = 0;
    d.shared_mem_per_sm_bytes = 228 * 1024;
    d.shared_mem_per_block_optin_bytes = 227 * 1024;
    return d;
}

inline std::vector<DeviceSpec> make_builtin_devices() {
    constexpr std::uint64_t GB = 1000ull * 1000ull * 1000ull;
    constexpr std::uint64_t MiB = 1024ull * 1024ull;
    std::vector<DeviceSpec> t;

    DeviceSpec a100 = sm80_limits();
    a100.key = "a100";
    a100.name = "NVIDIA A100-SXM4-80GB";
    a100.sm_count = 108;
    a100.boost_clock_mhz = 1410;
    a100.dram_bandwidth_gbps = 2039;
    a100.dram_bytes = 80 * GB;
    a100.l2_bytes = 40 * MiB;
    a100.peak_fp32_tflops = 19.5;
    a100.peak_tf32_tflops = 156;
    a100.peak_fp16_tflops = 312;
    a100.peak_bf16_tflops = 312;
    t.push_back(a100);

    DeviceSpec h100 = sm90_limits();
    h100.key = "h100";
    h100.name = "NVIDIA H100-SXM5-80GB";
    h100.sm_count = 132;
    h100.boost_clock_mhz = 1980;
    h100.dram_bandwidth_gbps = 3350;
    h100.dram_bytes = 80 * GB;
    h100.l2_bytes = 50 * MiB;
    h100.peak_fp32_tflops = 67;
    h100.peak_tf32_tflops = 494.5;
    h100.peak_fp16_tflops = 989.5;
    h100.peak_bf16_tflops = 989.5;
    t.push_back(h100);

    DeviceSpec h200 = h100;
    h200.key = "h200";
    h200.name = "NVIDIA H200-SXM-141GB";
    h200.dram_bandwidth_gbps = 4800;
    h200.dram_bytes = 141 * GB;
    h200.l2_bytes = 60 * MiB;
    t.push_back(h200);

    DeviceSpec l40s = sm89_limits();
    l40s.key = "l40s";
    l40s.name = "NVIDIA L40S";
    l40s.sm_count = 142;
    l40s.boost_clock_mhz = 2520;
    l40s.dram_bandwidth_gbps = 864;
    l40s.dram_bytes = 48 * GB;
    l40s.l2_bytes = 96 * MiB;
    l40s.peak_fp32_tflops = 91.6;
    l40s.peak_tf32_tflops = 183;
    l40s.peak_fp16_tflops = 362;
    l40s.peak_bf16_tflops = 362;
    t.push_back(l40s);

    DeviceSpec rtx4090 = sm89_limits();
    rtx4090.key = "rtx4090";
    rtx4090.name = "NVIDIA GeForce RTX 4090";
    rtx4090.sm_count = 128;
    rtx4090.boost_clock_mhz = 2520;
    rtx4090.dram_bandwidth_gbps = 1008;
    rtx4090.dram_bytes = 24 * GB;
    rtx4090.l2_bytes = 72 * MiB;
    rtx4090.peak_fp32_tflops = 82.6;
    rtx4090.peak_tf32_tflops = 82.6;
    rtx4090.peak_fp16_tflops = 165.2;
    rtx4090.peak_bf16_tflops = 165.2;
    t.push_back(rtx4090);
    return t;
}

// `s` lowercased without ASCII spaces and punctuation, for matching names.
// Any other byte (a control, a non-ASCII character such as a direction
// override or a zero-width space) is kept, so that it matches nothing.
inline std::string lowercase_alnum(std::string_view s) {
    std::string out;
    for (char c : s) {
        const auto u = static_cast<unsigned char>(c);
        if (std::isalnum(u)) out += static_cast<char>(std::tolower(u));
        else if (u < 0x20 || u >= 0x7f) out += c;
    }
    return out;
}

// `s` safe to print: controls and non-ASCII bytes as '?'.
inline std::string printable_ascii(std::string_view s) {
    std::string out(s);
    for (char& c : out)
        if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
    return out;
}

}  // namespace detail

inline std::span<const DeviceSpec> builtin_devices() {
    static const std::vector<DeviceSpec> table = detail::make_builtin_devices();
    return table;
}

// By key ("h200"), or by name ignoring case and punctuation
// ("NVIDIA H200-SXM-141GB", "h200sxm141gb"). The error lists the known keys.
inline const DeviceSpec& find_device(std::string_view key_or_name) {
    const std::string wanted = detail::lowercase_alnum(key_or_name);
    for (const DeviceSpec& d : builtin_devices())
        if (d.key == wanted || detail::lowercase_alnum(d.name) == wanted ||
            detail::lowercase_alnum(d.name) == "nvidia" + wanted)
            return d;
    std::string known;
    for (const DeviceSpec& d : builtin_devices()) known += (known.empty() ? "" : ", ") + d.key;
    throw ModelError("unknown device '" + detail::printable_ascii(key_or_name) + "'; known devices: " + known);
}

}  // namespace braid
