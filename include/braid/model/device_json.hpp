// DeviceSpec <-> JSON. The same object appears inside profiles and plans, and
// as a file of its own for devices that are not in the built-in table.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "braid/config.hpp"
#include "braid/detail/json_reader.hpp"
#include "braid/model/device_spec.hpp"
#include "braid/model/device_table.hpp"
#if BRAID_HAS_OCCUPANCY_HEADER
#include "braid/model/occupancy.hpp"
#endif

namespace braid {

inline nlohmann::json to_json(const DeviceSpec& d) {
    return nlohmann::json{
        {"key", d.key},
        {"name", d.name},
        {"compute_capability", std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor)},
        {"sm_count", d.sm_count},
        {"warp_size", d.warp_size},
        {"max_threads_per_sm", d.max_threads_per_sm},
        {"max_threads_per_block", d.max_threads_per_block},
        {"max_blocks_per_sm", d.max_blocks_per_sm},
        {"regs_per_sm", d.regs_per_sm},
        {"regs_per_block", d.regs_per_block},
        {"max_regs_per_thread", d.max_regs_per_thread},
        {"shared_mem_per_sm_bytes", d.shared_mem_per_sm_bytes},
        {"shared_mem_per_block_bytes", d.shared_mem_per_block_bytes},
        {"shared_mem_per_block_optin_bytes", d.shared_mem_per_block_optin_bytes},
        {"reserved_shared_mem_per_block_bytes", d.reserved_shared_mem_per_block_bytes},
        {"max_resident_grids", d.max_resident_grids},
        {"boost_clock_mhz", d.boost_clock_mhz},
        {"dram_bandwidth_gbps", d.dram_bandwidth_gbps},
        {"dram_bytes", d.dram_bytes},
        {"l2_bytes", d.l2_bytes},
        {"peak_fp32_tflops", d.peak_fp32_tflops},
        {"peak_tf32_tflops", d.peak_tf32_tflops},
        {"peak_fp16_tflops", d.peak_fp16_tflops},
        {"peak_bf16_tflops", d.peak_bf16_tflops},
    };
}

// Reads and validates; errors carry the JSON path of the field.
inline DeviceSpec device_from_json(const detail::JsonReader& r) {
    r.expect_object();
    if (auto f = r.find("format"); f && f->json().is_string())
        r.fail("this is a " + f->get<std::string>() + ", not a device description (docs/formats.md)");
    r.allow_only({"key", "name", "compute_capability", "sm_count", "warp_size", "max_threads_per_sm",
                  "max_threads_per_block", "max_blocks_per_sm", "regs_per_sm", "regs_per_block", "max_regs_per_thread",
                  "shared_mem_per_sm_bytes", "shared_mem_per_block_bytes", "shared_mem_per_block_optin_bytes",
                  "reserved_shared_mem_per_block_bytes", "max_resident_grids", "boost_clock_mhz", "dram_bandwidth_gbps",
                  "dram_bytes", "l2_bytes", "peak_fp32_tflops", "peak_tf32_tflops", "peak_fp16_tflops",
                  "peak_bf16_tflops"});
    DeviceSpec d;
    d.key = r.get_or<std::string>("key", "");
    d.name = r.get_or<std::string>("name", "");
    {
        auto cc = r.at("compute_capability");
        std::string text = cc.get<std::string>();
        // "major.minor", both whole numbers, nothing else.
        const auto dot = text.find('.');
        const auto digits = [](std::string_view t) {
            return !t.empty() && t.size() <= 3 && t.find_first_not_of("0123456789") == std::string_view::npos;
        };
        if (dot == std::string::npos || !digits(std::string_view(text).substr(0, dot)) ||
            !digits(std::string_view(text).substr(dot + 1)))
            cc.fail("expected \"major.minor\" such as \"9.0\", got \"" + text + "\"");
        d.cc_major = std::stoi(text.substr(0, dot));
        d.cc_minor = std::stoi(text.substr(dot + 1));
    }
    d.sm_count = r.get<int>("sm_count");
    d.warp_size = r.get_or<int>("warp_size", 32);
    d.max_threads_per_sm = r.get<int>("max_threads_per_sm");
    d.max_threads_per_block = r.get<int>("max_threads_per_block");
    d.max_blocks_per_sm = r.get<int>("max_blocks_per_sm");
    d.regs_per_sm = r.get<int>("regs_per_sm");
    d.regs_per_block = r.get<int>("regs_per_block");
    d.max_regs_per_thread = r.get_or<int>("max_regs_per_thread", 255);
    d.shared_mem_per_sm_bytes = r.get<std::uint64_t>("shared_mem_per_sm_bytes");
    d.shared_mem_per_block_bytes = r.get<std::uint64_t>("shared_mem_per_block_bytes");
    d.shared_mem_per_block_optin_bytes = r.get<std::uint64_t>("shared_mem_per_block_optin_bytes");
    d.reserved_shared_mem_per_block_bytes = r.get<std::uint64_t>("reserved_shared_mem_per_block_bytes");
    d.max_resident_grids = r.get<int>("max_resident_grids");
    d.boost_clock_mhz = r.get<double>("boost_clock_mhz");
    d.dram_bandwidth_gbps = r.get<double>("dram_bandwidth_gbps");
    d.dram_bytes = r.get_or<std::uint64_t>("dram_bytes", 0);
    d.l2_bytes = r.get_or<std::uint64_t>("l2_bytes", 0);
    d.peak_fp32_tflops = r.get<double>("peak_fp32_tflops");
    d.peak_tf32_tflops = r.get_or<double>("peak_tf32_tflops", 0.0);
    d.peak_fp16_tflops = r.get_or<double>("peak_fp16_tflops", 0.0);
    d.peak_bf16_tflops = r.get_or<double>("peak_bf16_tflops", 0.0);
    const auto field_error = [&](const DeviceFieldError& e) {
        return FormatError(r.has(e.field()) ? r.at(e.field()).path() : r.path(), e.what());
    };
    try {
        validate(d);
    } catch (const DeviceFieldError& e) {
        throw field_error(e);
    }
#if BRAID_HAS_OCCUPANCY_HEADER
    // Sizes the occupancy model cannot use fail here, naming the field, not at a network's first kernel.
    if (const std::optional<DeviceFieldError> problem = occupancy_problem(d)) throw field_error(*problem);
#endif
    return d;
}

inline DeviceSpec device_from_json(const nlohmann::json& j) { return device_from_json(detail::JsonReader(j, "$")); }

// A device as a command line names it: a built-in key or name ("h200"), or
// a device JSON file (a path ending in .json, containing a '/', or naming an
// existing file). Errors name the file and field, or list the known keys.
inline DeviceSpec load_device(const std::string& key_or_file) {
    const bool file = std::string_view(key_or_file).ends_with(".json") || key_or_file.find('/') != std::string::npos ||
                      std::filesystem::is_regular_file(key_or_file);
    if (!file) return find_device(key_or_file);
    return device_from_json(detail::JsonReader(detail::load_json_file(key_or_file), key_or_file + ": $"));
}

}  // namespace braid
