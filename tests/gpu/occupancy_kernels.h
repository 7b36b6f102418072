#pragma once

enum class OccupancyTestKernel { light, heavy_registers, static_smem, dynamic_smem };

// The kernel's address, for cudaFuncGetAttributes and the occupancy API.
const void* occupancy_test_kernel(OccupancyTestKernel which);
