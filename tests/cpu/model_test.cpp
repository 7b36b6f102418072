#include <doctest/doctest.h>

#include <climits>
#include <limits>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <cuda_occupancy.h>

#include "braid/model/conv_engine.hpp"
#include "braid/model/device_json.hpp"
#include "braid/model/device_table.hpp"
#include "braid/model/estimate.hpp"
#include "braid/model/occupancy.hpp"
#include "braid/model/sm_resources.hpp"

#include "error_of.hpp"

using namespace braid;
using braid::testing::error_of;

namespace {

KernelShape kernel(std::uint32_t threads, std::uint32_t regs, std::uint32_t static_smem = 0,
                   std::uint32_t dynamic_smem = 0, std::uint32_t grid = 1) {
    KernelShape k;
    k.name = "k" + std::to_string(threads) + "x" + std::to_string(regs);
    k.grid = {grid, 1, 1};
    k.block = {threads, 1, 1};
    k.regs_per_thread = regs;
    k.static_smem_bytes = static_smem;
    k.dynamic_smem_bytes = dynamic_smem;
    return k;
}

const DeviceSpec& a100() { return find_device("a100"); }
const DeviceSpec& h100() { return find_device("h100"); }
const DeviceSpec& l40s() { return find_device("l40s"); }

}  // namespace

// Per-SM limits used below (CUDA C++ Programming Guide, compute capability
// table): sm_80 and sm_90: 64 warps, 32 blocks, 65536 registers in 4
// sub-partitions of 16384, allocated per warp in units of 256; shared memory
// 164 KiB (sm_80) / 228 KiB (sm_90) per SM, 1 KiB reserved per block,
// allocated in units of 128 bytes. sm_89: 48 warps, 24 blocks, 100 KiB.
TEST_CASE("occupancy: hand-computed cases on sm_80, sm_89 and sm_90") {
    struct Case {
        const char* what;
        const DeviceSpec* dev;
        KernelShape k;
        int blocks;
        OccupancyLimiter limiter;
    };
    const Case cases[] = {
        // 512 threads = 16 warps: 64/16 = 4 blocks; registers 16*32=512/warp -> 32 warps per sub-partition -> 8 blocks
        {"threads-limited sm_80", &a100(), kernel(512, 16), 4, OccupancyLimiter::warps},
        // 768 threads = 24 warps: 64/24 = 2; registers 512/warp -> 128 warps -> 5 blocks
        {"threads-limited sm_90", &h100(), kernel(768, 16), 2, OccupancyLimiter::warps},
        // 128 regs*32 = 4096/warp: 16384/4096 = 4 warps per sub-partition = 16 warps; 256 threads = 8 warps -> 2 blocks
        {"registers-limited sm_80", &a100(), kernel(256, 128), 2, OccupancyLimiter::registers},
        // 33 regs*32 = 1056, rounded up to 1280: 16384/1280 = 12 warps per sub-partition = 48 warps -> 6 blocks of 8 warps
        {"registers-limited sm_90 (allocation granularity)", &h100(), kernel(256, 33), 6, OccupancyLimiter::registers},
        // 64 regs*32 = 2048/warp: 8 warps per sub-partition = 32 warps -> 4 blocks of 8 (warps would allow 48/8 = 6)
        {"registers-limited sm_89", &l40s(), kernel(256, 64), 4, OccupancyLimiter::registers},
        // 48 KiB static + 1 KiB reserved = 50176 bytes: 167936/50176 = 3 blocks
        {"shared-memory-limited sm_80", &a100(), kernel(128, 32, 48 * 1024), 3, OccupancyLimiter::shared_memory},
        // 100 KiB dynamic + 1 KiB reserved = 103424 bytes: 233472/103424 = 2 blocks
        {"shared-memory-limited sm_90", &h100(), kernel(256, 32, 0, 100 * 1024), 2, OccupancyLimiter::shared_memory},
        // 32276 static + 1024 reserved = 33300, rounded up to 33408: 233472/33408 = 6 (33300 alone would give 7)
        {"shared-memory granularity sm_90", &h100(), kernel(128, 16, 32276), 6, OccupancyLimiter::shared_memory},
        // one warp, 16 regs: warps allow 64, registers 128, shared memory 164: the 32 block slots bind
        {"blocks-limited sm_80", &a100(), kernel(32, 16), 32, OccupancyLimiter::blocks},
        // one warp, 8 regs: warps 64, registers 256, shared memory 228: 32 block slots bind
        {"blocks-limited sm_90", &h100(), kernel(32, 8), 32, OccupancyLimiter::blocks},
        // sm_89 has 24 block slots
        {"blocks-limited sm_89", &l40s(), kernel(32, 8), 24, OccupancyLimiter::blocks},
    };
    for (const Case& c : cases) {
        CAPTURE(c.what);
        Occupancy o = occupancy(*c.dev, c.k);
        CHECK(o.blocks_per_sm == c.blocks);
        CHECK(o.limiter == c.limiter);
        CHECK(o.warps_per_sm == c.blocks * o.warps_per_block);
        CHECK(o.fraction == doctest::Approx(static_cast<double>(o.warps_per_sm) / c.dev->max_warps_per_sm()));
    }
}

TEST_CASE("occupancy: allocated resources per block") {
    Occupancy o = occupancy(h100(), kernel(256, 33, 32276));
    CHECK(o.regs_per_warp == 1280);
    CHECK(o.regs_per_block == 1280 * 8);
    CHECK(o.smem_per_block_bytes == 33408);
}

TEST_CASE("occupancy counts a launch's registers: at least 16 a thread, so CUPTI's count and the compiled one agree") {
    CHECK(launch_registers_per_thread(0) == 0);  // a pseudo-kernel holds none
    CHECK(launch_registers_per_thread(8) == 16);
    CHECK(launch_registers_per_thread(14) == 16);
    CHECK(launch_registers_per_thread(16) == 16);
    CHECK(launch_registers_per_thread(22) == 22);  // from 16 up the compiled count (H200: 20, 22, 31, 47, ...)
    CHECK(launch_registers_per_thread(255) == 255);
    // On the H200 a 14-register kernel appears in CUPTI with 16: same occupancy, same SM demand.
    for (const std::uint32_t compiled : {8u, 14u}) {
        CAPTURE(compiled);
        const Occupancy from_attributes = occupancy(h100(), kernel(256, compiled));
        const Occupancy from_cupti = occupancy(h100(), kernel(256, 16));
        CHECK(from_attributes.regs_per_warp == 512);  // 16 x 32, a multiple of the 256-register unit
        CHECK(from_attributes.regs_per_warp == from_cupti.regs_per_warp);
        CHECK(from_attributes.blocks_per_sm == from_cupti.blocks_per_sm);
        CHECK(BlockDemand::of(from_attributes).regs_per_warp == BlockDemand::of(from_cupti).regs_per_warp);
    }
    CHECK(occupancy(h100(), kernel(256, 22)).regs_per_warp == 768);  // 704 rounded up to the 256-register unit
    CHECK(occupancy(h100(), kernel(32, 0)).regs_per_warp == 0);
}

TEST_CASE("occupancy: a block that cannot fit names the resource") {
    auto msg = error_of([] { (void)occupancy(h100(), kernel(1024, 128)); });
    CHECK(msg.find("registers") != std::string::npos);
    CHECK(msg.find("'k1024x128'") != std::string::npos);
    msg = error_of([] { (void)occupancy(h100(), kernel(128, 32, 0, 300 * 1024)); });
    CHECK(msg.find("shared memory") != std::string::npos);
    msg = error_of([] { (void)occupancy(a100(), kernel(2048, 16)); });
    CHECK(msg.find("threads") != std::string::npos);
    msg = error_of([] { (void)occupancy(a100(), kernel(64, 300)); });
    CHECK(msg.find("registers per thread") != std::string::npos);
    msg = error_of([] { (void)occupancy(a100(), kernel(0, 16)); });
    CHECK(msg.find("0 threads") != std::string::npos);
}

TEST_CASE("occupancy equals direct cuda_occupancy.h calls over a sweep of shapes") {
    for (const DeviceSpec& dev : builtin_devices()) {
        // Filled here field by field, independently of braid's own conversion.
        cudaOccDeviceProp prop;
        prop.computeMajor = dev.cc_major;
        prop.computeMinor = dev.cc_minor;
        prop.maxThreadsPerBlock = dev.max_threads_per_block;
        prop.maxThreadsPerMultiprocessor = dev.max_threads_per_sm;
        prop.regsPerBlock = dev.regs_per_block;
        prop.regsPerMultiprocessor = dev.regs_per_sm;
        prop.warpSize = 32;
        prop.sharedMemPerBlock = dev.shared_mem_per_block_bytes;
        prop.sharedMemPerMultiprocessor = dev.shared_mem_per_sm_bytes;
        prop.numSms = dev.sm_count;
        prop.sharedMemPerBlockOptin = dev.shared_mem_per_block_optin_bytes;
        prop.reservedSharedMemPerBlock = dev.reserved_shared_mem_per_block_bytes;
        int compared = 0;
        for (std::uint32_t threads : {32u, 64u, 96u, 128u, 192u, 256u, 384u, 512u, 640u, 1024u})
            for (std::uint32_t regs : {0u, 8u, 16u, 24u, 32u, 40u, 48u, 64u, 72u, 96u, 128u, 168u, 255u})
                for (std::uint32_t smem : {0u, 1000u, 4096u, 16384u, 40000u, 49152u, 65536u, 100000u, 160000u}) {
                    cudaOccFuncAttributes attr;
                    attr.maxThreadsPerBlock = INT_MAX;
                    attr.numRegs = static_cast<int>(regs);
                    attr.sharedSizeBytes = 0;
                    attr.shmemLimitConfig = FUNC_SHMEM_LIMIT_OPTIN;
                    attr.maxDynamicSharedSizeBytes = dev.shared_mem_per_block_optin_bytes;
                    attr.numBlockBarriers = 1;
                    cudaOccDeviceState state;
                    cudaOccResult r{};
                    REQUIRE(cudaOccMaxActiveBlocksPerMultiprocessor(&r, &prop, &attr, &state, static_cast<int>(threads),
                                                                    smem) == CUDA_OCC_SUCCESS);
                    KernelShape k = kernel(threads, regs, 0, smem);
                    if (r.activeBlocksPerMultiprocessor == 0) {
                        CHECK_THROWS_AS((void)occupancy(dev, k), ModelError);
                        continue;
                    }
                    Occupancy o = occupancy(dev, k);
                    CHECK(o.blocks_per_sm == r.activeBlocksPerMultiprocessor);
                    // The SM resource model packs exactly as many blocks onto an empty SM.
                    SmState sm(dev);
                    CHECK(sm.fits(BlockDemand::of(o)) == static_cast<std::uint32_t>(o.blocks_per_sm));
                    ++compared;
                }
        CHECK(compared > 500);
    }
}

TEST_CASE("waves and footprint") {
    const DeviceSpec& dev = h100();
    Occupancy o = occupancy(dev, kernel(256, 32, 0, 0));  // 8 blocks per SM -> 1056 per wave on 132 SMs
    REQUIRE(o.blocks_per_sm == 8);
    CHECK(waves(dev, o, 1) == 1);
    CHECK(waves(dev, o, 1056) == 1);
    CHECK(waves(dev, o, 1057) == 2);
    CHECK(waves(dev, o, 10000) == 10);
    SmFootprint small = footprint(dev, o, 50);
    CHECK(small.sms == 50);
    CHECK(small.fraction == doctest::Approx(50.0 / 1056.0));
    SmFootprint big = footprint(dev, o, 5000);
    CHECK(big.sms == 132);
    CHECK(big.fraction == 1.0);
}

TEST_CASE("co-residency of blocks from several kernels on one SM") {
    const DeviceSpec& dev = a100();
    // 512 threads, 16 regs: 16 warps a block; two blocks of it and two of another such kernel fill 64 warps
    KernelShape half = kernel(512, 16);
    std::vector<Residency> fits{{half, 2}, {kernel(512, 16, 1024), 2}};
    CHECK(co_resident(dev, fits));
    std::vector<Residency> too_many{{half, 2}, {kernel(512, 16, 1024), 3}};
    CHECK_FALSE(co_resident(dev, too_many));

    // 2 blocks of the 128-register kernel take all registers; any kernel using registers no longer fits
    std::vector<Residency> regs_full{{kernel(256, 128), 2}, {kernel(32, 8), 1}};
    CHECK_FALSE(co_resident(dev, regs_full));
    std::vector<Residency> regs_free{{kernel(256, 128), 1}, {kernel(32, 8), 20}};
    CHECK(co_resident(dev, regs_free));

    // shared memory (1 KiB reserved per block): 3 x 49 KiB + 18 KiB = 165 KiB exceed 164 KiB, 3 x 49 + 16 fit
    std::vector<Residency> smem{{kernel(128, 32, 48 * 1024), 3}, {kernel(64, 16, 17 * 1024), 1}};
    CHECK_FALSE(co_resident(dev, smem));
    std::vector<Residency> smem_exact{{kernel(128, 32, 48 * 1024), 3}, {kernel(64, 16, 15 * 1024), 1}};
    CHECK(co_resident(dev, smem_exact));
    std::vector<Residency> smem_ok{{kernel(128, 32, 48 * 1024), 2}, {kernel(64, 16, 17 * 1024), 3}};
    CHECK(co_resident(dev, smem_ok));

    // block slots: 32 single-warp blocks fill the slots even though warps remain
    std::vector<Residency> slots{{kernel(32, 8), 30}, {kernel(32, 16), 3}};
    CHECK_FALSE(co_resident(dev, slots));

    std::vector<Residency> impossible{{kernel(1024, 128), 1}};
    CHECK_THROWS_AS(co_resident(dev, impossible), ModelError);
}

TEST_CASE("SM state gives back exactly what it took") {
    const DeviceSpec& dev = h100();
    SmState sm(dev);
    const SmState empty = sm;
    BlockDemand a = BlockDemand::of(occupancy(dev, kernel(256, 33, 1000)));
    BlockDemand b = BlockDemand::of(occupancy(dev, kernel(96, 72, 0, 20000)));
    auto wa = sm.place(a, 3);
    auto wb = sm.place(b, sm.fits(b));
    CHECK(sm.fits(b) == 0);
    sm.release(a, 3, wa);
    sm.release(b, static_cast<std::uint32_t>(wb[0] + wb[1] + wb[2] + wb[3]) / b.warps, wb);
    CHECK(sm.free_warps() == empty.free_warps());
    CHECK(sm.free_blocks() == empty.free_blocks());
    CHECK(sm.free_smem_bytes() == empty.free_smem_bytes());
    CHECK(sm.free_registers() == empty.free_registers());
}

TEST_CASE("device table: every entry is valid, keys are unique, limits agree with cuda_occupancy.h") {
    std::set<std::string> keys;
    for (const DeviceSpec& d : builtin_devices()) {
        CAPTURE(d.key);
        CHECK_NOTHROW(validate(d));
        CHECK(keys.insert(d.key).second);
        // A one-warp kernel without registers or shared memory is limited by block slots only.
        KernelShape tiny = kernel(32, 0);
        CHECK(occupancy(d, tiny).block_limit_blocks == d.max_blocks_per_sm);
    }
    CHECK(keys == std::set<std::string>{"a100", "h100", "h200", "l40s", "rtx4090"});
    CHECK(find_device("H200").sm_count == 132);
    CHECK(find_device("NVIDIA H200-SXM-141GB").key == "h200");
    CHECK(find_device("h200-sxm-141gb").key == "h200");
    CHECK(find_device("a100").dram_bandwidth_gbps == 2039);
    auto msg = error_of([] { (void)find_device("v100"); });
    CHECK(msg == "unknown device 'v100'; known devices: a100, h100, h200, l40s, rtx4090");
    // Punctuation is ignored, invisible characters are not: they would make another key read as "h200".
    // The error prints them as '?', never raw to the terminal.
    CHECK(error_of([] { (void)find_device("h\u202e200"); }) ==
          "unknown device 'h???200'; known devices: a100, h100, h200, l40s, rtx4090");
    CHECK(error_of([] { (void)find_device("h200\u200b"); }).find("unknown device 'h200???'") == 0);
    CHECK(error_of([] { (void)find_device("zz\x1b[31m"); }) ==
          "unknown device 'zz?[31m'; known devices: a100, h100, h200, l40s, rtx4090");
}

TEST_CASE("device JSON: round trip and errors that name the field") {
    for (const DeviceSpec& d : builtin_devices()) CHECK(device_from_json(to_json(d)) == d);

    nlohmann::json j = to_json(find_device("h100"));
    j.erase("sm_count");
    CHECK(error_of([&] { (void)device_from_json(j); }) == "$.sm_count: required field is missing");

    j = to_json(find_device("h100"));
    j["regs_per_sm"] = "lots";
    CHECK(error_of([&] { (void)device_from_json(j); }) == "$.regs_per_sm: expected an integer, got a string");

    j = to_json(find_device("h100"));
    j["compute_capability"] = "nine";
    CHECK(error_of([&] { (void)device_from_json(j); }).find("$.compute_capability: expected \"major.minor\"") == 0);

    j = to_json(find_device("h100"));
    j["compute_capability"] = "9.0abc";
    CHECK(error_of([&] { (void)device_from_json(j); }).find("$.compute_capability: expected \"major.minor\"") == 0);

    j = to_json(find_device("h100"));
    j["sm_cout"] = 132;
    CHECK(error_of([&] { (void)device_from_json(j); }).find("$.sm_cout: unknown field") == 0);

    j = to_json(find_device("h100"));
    j["sm_count"] = 0;
    CHECK(error_of([&] { (void)device_from_json(j); }) == "$.sm_count: device 'h100': sm_count must be > 0");
    // Beyond any GPU: refused before the simulator sizes per-SM state by it.
    j["sm_count"] = 2147483647;
    CHECK(error_of([&] { (void)device_from_json(j); }) ==
          "$.sm_count: device 'h100': sm_count must be <= 4096 (far above any GPU)");
    DeviceSpec inf = find_device("h100");
    inf.dram_bandwidth_gbps = std::numeric_limits<double>::infinity();
    CHECK(error_of([&] { validate(inf); }) == "device 'h100': dram_bandwidth_gbps must be a finite number");

    // Finite but absurd: a typo by a factor of a million is refused, naming the field.
    j = to_json(find_device("h100"));
    j["boost_clock_mhz"] = 1e308;
    CHECK(error_of([&] { (void)device_from_json(j); }) ==
          "$.boost_clock_mhz: device 'h100': boost_clock_mhz must be <= 100000 (far above any GPU)");
    j = to_json(find_device("h100"));
    j["peak_fp32_tflops"] = 6.7e7;
    CHECK(error_of([&] { (void)device_from_json(j); }) ==
          "$.peak_fp32_tflops: device 'h100': peak_fp32_tflops must be <= 1000000 (far above any GPU)");

    // Near zero is as broken as near infinity: every kernel would take ages in the model.
    j = to_json(find_device("h100"));
    j["peak_fp32_tflops"] = 1e-300;
    CHECK(error_of([&] { (void)device_from_json(j); }) ==
          "$.peak_fp32_tflops: device 'h100': peak_fp32_tflops must be >= 0.01 (far below any GPU)");
    j = to_json(find_device("h100"));
    j["dram_bandwidth_gbps"] = 1e-300;
    CHECK(error_of([&] { (void)device_from_json(j); }) ==
          "$.dram_bandwidth_gbps: device 'h100': dram_bandwidth_gbps must be >= 1 (far below any GPU)");
    j = to_json(find_device("h100"));
    j["peak_bf16_tflops"] = 1e-9;
    CHECK(error_of([&] { (void)device_from_json(j); }) ==
          "$.peak_bf16_tflops: device 'h100': peak_bf16_tflops must be 0 (no such tensor cores) or >= 0.01 (far below "
          "any GPU)");
    // Names are printed: control characters (an escape sequence, a newline) are refused, unprinted.
    const std::string unprintable =
        "must be printable text of at most 256 bytes, not blank, without control or invisible formatting characters";
    j = to_json(find_device("h100"));
    j["name"] = "H100\u001b[2J\nrm -rf";
    CHECK(error_of([&] { (void)device_from_json(j); }) == "$.name: device name: " + unprintable);
    j["name"] = "H100 \u009b2J";  // CSI, a C1 control
    CHECK(error_of([&] { (void)device_from_json(j); }) == "$.name: device name: " + unprintable);
    // Invisible formatting characters, which make one name read as another: a direction override, a zero-width
    // space, a direction isolate, a byte order mark.
    for (const char* sly : {"H100\u202e001H", "H1\u200b00", "H100 \u2067x\u2069", "\ufeffH100", "H1\u00ad00",
                            "H100\ufe0f", "H100\U000e0068", "\u3164", "\u00a0\u3000 "}) {
        j["name"] = sly;
        CHECK(error_of([&] { (void)device_from_json(j); }) == "$.name: device name: " + unprintable);
    }
    j["name"] = "NVIDIA\u00a0H100";  // a no-break space is printable
    CHECK(device_from_json(j).name == "NVIDIA\u00a0H100");
    j["name"] = std::string(257, 'x');
    CHECK(error_of([&] { (void)device_from_json(j); }).rfind("$.name: device name: must be printable", 0) == 0);
    j["name"] = "NVIDIA H100 80GB HBM3 — ünïcode is text";
    CHECK(device_from_json(j).name == "NVIDIA H100 80GB HBM3 — ünïcode is text");
    j = to_json(find_device("h100"));
    j["key"] = "h\t100";
    CHECK(error_of([&] { (void)device_from_json(j); }) == "$.key: device key: " + unprintable);
    j["key"] = "\u00a0 ";
    CHECK(error_of([&] { (void)device_from_json(j); }) == "$.key: device key: " + unprintable);
    j = to_json(find_device("h100"));
    j["max_threads_per_block"] = 1000;
    CHECK(error_of([&] { (void)device_from_json(j); }) ==
          "$.max_threads_per_block: device 'h100': max_threads_per_block must be a whole number of warps");

    // Sizes the occupancy calculator cannot use are refused at load, naming
    // the field, not later at a network's first kernel.
    j = to_json(find_device("h100"));
    j["shared_mem_per_sm_bytes"] = 240000;  // no carveout of compute capability 9.0
    CHECK(error_of([&] { (void)device_from_json(j); })
              .starts_with("$.shared_mem_per_sm_bytes: device 'h100': cuda_occupancy.h cannot model an SM of compute "
                           "capability 9.0 with 240000 bytes of shared memory"));
    j = to_json(find_device("h100"));
    j["reserved_shared_mem_per_block_bytes"] = 1 << 29;
    CHECK(error_of([&] { (void)device_from_json(j); })
              .starts_with("$.reserved_shared_mem_per_block_bytes: device 'h100': reserved_shared_mem_per_block_bytes "
                           "536870912 leaves no room for a block on an SM"));
    j = to_json(find_device("h100"));
    j["reserved_shared_mem_per_block_bytes"] = 8192;  // beside 227 KiB of opt-in, more than the SM's 228 KiB
    CHECK(error_of([&] { (void)device_from_json(j); })
              .starts_with("$.shared_mem_per_block_optin_bytes: device 'h100': a block using all 232448 bytes of "
                           "shared_mem_per_block_optin_bytes does not fit on an SM beside the reservation"));
    j = to_json(find_device("h100"));
    j["compute_capability"] = "10.5";  // cuda_occupancy.h knows 10.0, 10.1 and 10.3
    CHECK(error_of([&] { (void)device_from_json(j); }) ==
          "$.compute_capability: device 'h100': compute capability 10.5 is unknown to this toolkit's cuda_occupancy.h");
    for (const DeviceSpec& d : builtin_devices()) CHECK_FALSE(occupancy_problem(d));  // every built-in device is usable

    j = to_json(find_device("h100"));
    j["shared_mem_per_sm_bytes"] = -5;
    CHECK(error_of([&] { (void)device_from_json(j); }) ==
          "$.shared_mem_per_sm_bytes: integer -5 is out of range (must be >= 0)");

    CHECK(error_of([] { (void)detail::parse_json("{\n  \"a\": [1, 2,\n}", "dev.json"); }).find("dev.json:3:1") == 0);
}

TEST_CASE("roofline estimates: compute, memory, wave quantisation, floor") {
    const DeviceSpec& dev = h100();  // 132 SMs; 256 threads x 32 regs -> 8 blocks per SM = 1056 per wave
    RooflineParams p;
    KernelEstimate gemm;
    gemm.shape = kernel(256, 32, 0, 0, 1056);
    gemm.math = MathMode::tf32;
    gemm.flops = 494.5e3 * 0.8 * 1e6;  // one millisecond at 80% of the TF32 peak
    gemm.dram_bytes = 1e6;
    KernelCost c = estimate_kernel(dev, gemm, p);
    CHECK(c.duration_ns == doctest::Approx(1e6));
    CHECK(c.dram_bytes == 0.0);  // compute-bound: no bandwidth competition

    gemm.shape.grid.x = 1057;  // one block over a full wave: two waves for 1057/1056 of the work
    CHECK(estimate_kernel(dev, gemm, p).duration_ns == doctest::Approx(1e6 * 2.0 * 1056.0 / 1057.0));

    KernelEstimate copy;
    copy.shape = kernel(256, 16, 0, 0, 10560);
    copy.flops = 1e6;
    copy.dram_bytes = 3350.0 * 0.9 * 1e5;  // 100 us of DRAM traffic
    KernelCost m = estimate_kernel(dev, copy, p);
    CHECK(m.duration_ns == doctest::Approx(1e5));
    CHECK(m.dram_bytes == copy.dram_bytes);

    KernelEstimate tiny;
    tiny.shape = kernel(32, 8, 0, 0, 1);
    tiny.flops = 10;
    CHECK(estimate_kernel(dev, tiny, p).duration_ns == p.min_kernel_ns);

    DeviceSpec no_tensor = dev;
    no_tensor.peak_bf16_tflops = 0;
    CHECK(peak_flops_per_ns(no_tensor, MathMode::bf16) == doctest::Approx(67e3));

    tiny.flops = -1;
    CHECK_THROWS_AS(estimate_kernel(dev, tiny, p), ModelError);
}

TEST_CASE("convolution engine families from kernel names") {
    using F = ConvEngineFamily;
    // Names as the H200 profiles recorded them (cuDNN 9.19, cuBLAS 13.1).
    const std::vector<std::pair<std::string_view, F>> names{
        {"void implicit_convolve_sgemm<float, float, 1024, 5, 5, 3, 3, 3, 1, false, false, true>", F::legacy},
        {"void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>", F::legacy},
        {"void wgrad_alg0_engine<float, 128, 5, 5, 3, 3, 3, false, 512>", F::legacy},
        {"void cudnn::cnn::wgrad_alg1_engine<float, float, 128, 5, 5, 3, 3, 3, false, false>", F::legacy},
        {"sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x32", F::tensor_core},
        {"void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x128_32x3_tn_align4>", F::tensor_core},
        {"_ZN17cutlass__5x_cudnn6KernelINS_4conv6kernel23ImplicitGemmConvolutionINS_10tfloat32_tE", F::tensor_core},
        {"void cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nn_align1>", F::simt},
        {"sm80_xmma_gemm_f32f32_f32f32_f32_nt_n_tilesize64x64x8_stage3_warpsize1x4x1_ffma_aligna4", F::simt},
        {"void fft2d_r2c_32x32<float, false, 0u, false>", F::fft},
        {"void cudnn::winograd_nonfused::winogradForwardData4x4<float, float>", F::winograd},
        {"void cudnn::engines_precompiled::nchwToNhwcKernel<float, float, float, false, true>", F::helper},
        {"void cudnn::engines_precompiled::scalePackedTensor_kernel<float, float>", F::helper},
        {"void cudnn::cnn::reduce_wgrad_nchw_helper<float, float>", F::helper},
        {"void flip_filter<float, float>", F::helper},
        {"braid::samples::cuda::(anonymous namespace)::bias_add_kernel(float*)", F::other},
        {"void cudnn::pooling_fw_4d_kernel<float, float, cudnn::maxpooling_func<float>>", F::other},
    };
    for (const auto& named : names) {
        CAPTURE(named.first);
        CHECK(kernel_engine_family(named.first) == named.second);
    }
    // An op: transforms around a tensor-core GEMM take longer than it, yet
    // the engine is the GEMM's; an FFT's complex GEMM (an FP32 "ffma" one)
    // does not make it SIMT; no engine kernel at all is `other`.
    const std::vector<NamedKernelTime> tc{{"nchwToNhwcKernel", 50.0}, {"cutlass_80_tensorop_s1688gemm", 40.0},
                                          {"nhwcToNchwKernel", 45.0}};
    CHECK(op_engine_family(tc) == F::tensor_core);
    const std::vector<NamedKernelTime> fft{{"sm80_xmma_gemm_cf32cf32_ffma", 90.0}, {"fft2d_r2c_32x32", 10.0}};
    CHECK(op_engine_family(fft) == F::fft);
    const std::vector<NamedKernelTime> own{{"braid::bias_grad", 5.0}, {"scalePackedTensor_kernel", 1.0}};
    CHECK(op_engine_family(own) == F::other);
    CHECK(op_engine_family(OpCost{}) == F::other);
    CHECK(to_string(F::tensor_core) == "tensor_core");
}
