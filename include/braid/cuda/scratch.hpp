// LaneScratch: device memory a body may use while it runs, one per lane, so
// ops that run concurrently never share scratch. A bump allocator over one
// block, reset before every body: what a body allocates is valid until it
// returns (its kernels on the lane's stream finish before the next body's
// kernels on that stream start). When a request does not fit, the block is
// replaced by a bigger one and the old one is freed at the end of the
// iteration, once the lane's stream has finished with it. During graph
// capture the block cannot change (the graph would point at freed memory),
// so a request that does not fit is an error: reserve first, or run one
// eager iteration.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "braid/cuda/error.hpp"
#include "braid/cuda/resources.hpp"

namespace braid::cuda {

class LaneScratch {
public:
    static constexpr std::size_t default_alignment = 256;

    // `bytes` of device memory for the running body.
    void* allocate(std::size_t bytes, std::size_t alignment = default_alignment) {
        if (alignment == 0 || (alignment & (alignment - 1)) != 0)
            throw Error("LaneScratch::allocate: alignment " + std::to_string(alignment) + " is not a power of two");
        const std::size_t start = (used_ + alignment - 1) / alignment * alignment;
        if (start + bytes > block_.bytes()) {
            if (capturing_)
                throw Error("lane " + std::to_string(lane_) + " scratch holds " + std::to_string(block_.bytes()) +
                            " bytes but the op asked for " + std::to_string(start + bytes) +
                            " during CUDA graph capture; reserve it first (CudaBackend::reserve_scratch) or run "
                            "one iteration in eager mode");
            grow(start + bytes, std::max(start + bytes, 2 * block_.bytes()));
            return allocate(bytes, alignment);
        }
        used_ = start + bytes;
        high_water_ = std::max(high_water_, used_);
        return static_cast<char*>(block_.get()) + start;
    }

    std::size_t capacity_bytes() const noexcept { return block_.bytes(); }
    std::size_t used_bytes() const noexcept { return used_; }
    std::size_t high_water_bytes() const noexcept { return high_water_; }
    // Counts block replacements; a recorded graph made before a change is stale.
    std::uint64_t epoch() const noexcept { return epoch_; }

    // ---- for the backend
    void set_lane(std::uint32_t lane) noexcept { lane_ = lane; }
    void begin_body(bool capturing) noexcept {
        used_ = 0;
        capturing_ = capturing;
    }
    // Outside an iteration: a block of at least `bytes`. `stream` is the
    // lane's stream, which may still use the old block.
    void reserve(std::size_t bytes, cudaStream_t stream) {
        if (bytes <= block_.bytes()) return;
        check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
        retired_.clear();
        block_ = DeviceBuffer(bytes);
        ++epoch_;
    }
    bool has_retired() const noexcept { return !retired_.empty(); }
    // After the lane's stream has finished everything issued so far.
    void free_retired() noexcept { retired_.clear(); }

private:
    // A block of `preferred` bytes (room for the next requests), or of just
    // `needed` when the device cannot give that much.
    void grow(std::size_t needed, std::size_t preferred) {
        DeviceBuffer bigger;
        try {
            bigger = DeviceBuffer(preferred);
        } catch (const CudaError& e) {
            if (e.code() != cudaErrorMemoryAllocation) throw;
            (void)cudaGetLastError();
            try {
                bigger = DeviceBuffer(needed);
            } catch (const CudaError& again) {
                (void)cudaGetLastError();
                throw CudaError(again.code(), again.api(),
                                "lane " + std::to_string(lane_) + " scratch cannot grow from " +
                                    std::to_string(block_.bytes()) + " to " + std::to_string(needed) +
                                    " bytes: " + again.what());
            }
        }
        if (block_) retired_.push_back(std::move(block_));
        block_ = std::move(bigger);
        used_ = 0;  // earlier allocations of this body stay valid in the retired block
        ++epoch_;
    }

    DeviceBuffer block_;
    std::vector<DeviceBuffer> retired_;
    std::size_t used_ = 0;
    std::size_t high_water_ = 0;
    std::uint64_t epoch_ = 0;
    std::uint32_t lane_ = 0;
    bool capturing_ = false;
};

}  // namespace braid::cuda
