// braid's occupancy model against cudaOccupancyMaxActiveBlocksPerMultiprocessor
// for compiled kernels, on the live device's DeviceSpec.
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include "braid/cuda/device.hpp"
#include "braid/cuda/error.hpp"
#include "braid/model/occupancy.hpp"
#include "occupancy_kernels.h"

using namespace braid;

TEST_CASE("occupancy model equals the runtime's occupancy API") {
    const DeviceSpec dev = cuda::device_spec_from_cuda(0);
    MESSAGE("device: " << dev.name << " (" << dev.sm_count << " SMs, cc " << dev.cc_major << "." << dev.cc_minor << ")");
    struct Case {
        OccupancyTestKernel which;
        const char* name;
        int block;
        std::size_t dynamic_smem;
    };
    const Case cases[] = {
        {OccupancyTestKernel::light, "light", 128, 0},
        {OccupancyTestKernel::light, "light", 1024, 0},
        {OccupancyTestKernel::heavy_registers, "heavy_registers", 256, 0},
        {OccupancyTestKernel::heavy_registers, "heavy_registers", 96, 0},
        {OccupancyTestKernel::static_smem, "static_smem", 256, 0},
        {OccupancyTestKernel::dynamic_smem, "dynamic_smem", 256, 40 * 1024},
        {OccupancyTestKernel::dynamic_smem, "dynamic_smem", 128, 96 * 1024},
    };
    for (const Case& c : cases) {
        CAPTURE(c.name);
        CAPTURE(c.block);
        const void* fn = occupancy_test_kernel(c.which);
        if (c.dynamic_smem > 48 * 1024)
            cuda::check(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(c.dynamic_smem)),
                        "cudaFuncSetAttribute");
        cudaFuncAttributes attr{};
        cuda::check(cudaFuncGetAttributes(&attr, fn), "cudaFuncGetAttributes");
        int runtime_blocks = 0;
        cuda::check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&runtime_blocks, fn, c.block, c.dynamic_smem),
                    "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
        KernelShape k;
        k.name = c.name;
        k.block = {static_cast<std::uint32_t>(c.block), 1, 1};
        k.regs_per_thread = static_cast<std::uint32_t>(attr.numRegs);
        k.static_smem_bytes = static_cast<std::uint32_t>(attr.sharedSizeBytes);
        k.dynamic_smem_bytes = static_cast<std::uint32_t>(c.dynamic_smem);
        Occupancy o = occupancy(dev, k);
        MESSAGE(c.name << " block " << c.block << ": " << attr.numRegs << " regs, " << attr.sharedSizeBytes
                       << " B static smem -> runtime " << runtime_blocks << ", braid " << o.blocks_per_sm
                       << " (" << to_string(o.limiter) << ")");
        CHECK(o.blocks_per_sm == runtime_blocks);
    }
}
