// Helpers of the samples' GPU tests: a lane made by hand
// (cuda/standalone_lane.hpp), device copies of host vectors, and
// comparisons with a stated tolerance.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "braid/cuda/backend.hpp"
#include "cuda/standalone_lane.hpp"
#include "nn/tensor.hpp"

namespace gpu_test {

using namespace braid::samples;

using TestLane = cuda::StandaloneLane;

template <class T>
class DeviceVector {
public:
    explicit DeviceVector(const std::vector<T>& host) : size_(host.size()), memory_(std::max<std::size_t>(1, host.size()) * sizeof(T)) {
        braid::cuda::check(cudaMemcpy(memory_.get(), host.data(), size_ * sizeof(T), cudaMemcpyHostToDevice),
                           "cudaMemcpy");
    }
    explicit DeviceVector(std::size_t n, T fill = T{}) : DeviceVector(std::vector<T>(n, fill)) {}

    T* get() const { return static_cast<T*>(memory_.get()); }
    std::size_t size() const { return size_; }
    std::vector<T> host() const {
        braid::cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
        std::vector<T> out(size_);
        braid::cuda::check(cudaMemcpy(out.data(), memory_.get(), size_ * sizeof(T), cudaMemcpyDeviceToHost),
                           "cudaMemcpy");
        return out;
    }
    // A dense NCHW view of the device data.
    TensorView<T> view(Shape4 s) const {
        REQUIRE(s.elements() <= size_);
        return TensorView<T>::dense(get(), s);
    }

private:
    std::size_t size_;
    braid::cuda::DeviceBuffer memory_;
};

template <class T>
std::vector<float> to_float(const std::vector<T>& v) {
    return std::vector<float>(v.begin(), v.end());
}
inline std::vector<double> to_double(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

// |gpu - ref| <= tol * max(1, |ref|) for every element; names the first misses.
template <class R>
void check_close(const std::vector<float>& gpu, const std::vector<R>& ref, double tol, const std::string& what) {
    REQUIRE(gpu.size() == ref.size());
    std::size_t bad = 0;
    double worst = 0.0;
    for (std::size_t i = 0; i < gpu.size(); ++i) {
        const double r = static_cast<double>(ref[i]);
        const double d = std::abs(static_cast<double>(gpu[i]) - r);
        worst = std::max(worst, d / std::max(1.0, std::abs(r)));
        if (!(d <= tol * std::max(1.0, std::abs(r))) && bad++ < 3)
            FAIL_CHECK(what << "[" << i << "]: gpu " << gpu[i] << " vs reference " << r);
    }
    CHECK_MESSAGE(bad == 0, what << ": " << bad << " of " << gpu.size() << " elements outside " << tol
                                << " (worst scaled difference " << worst << ")");
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Bit for bit; names the first difference.
inline void check_bitwise(const std::vector<float>& gpu, const std::vector<float>& ref, const std::string& what) {
    REQUIRE(gpu.size() == ref.size());
    for (std::size_t i = 0; i < gpu.size(); ++i)
        if (std::memcmp(&gpu[i], &ref[i], sizeof(float)) != 0) {
            FAIL_CHECK(what << ": first difference at " << i << ": gpu " << gpu[i] << " vs reference " << ref[i]);
            return;
        }
    CHECK(true);
}

// Channels [first, first + count) of every image of a wide NCHW buffer, in
// order: what a layer wrote into (or reads from) a concat slice.
template <class T>
std::vector<T> channel_slice(const std::vector<T>& wide, Shape4 shape, std::uint32_t first, std::uint32_t count) {
    const std::uint64_t plane = shape.plane_elements();
    std::vector<T> out;
    for (std::uint32_t n = 0; n < shape.n; ++n)
        for (std::uint32_t c = first; c < first + count; ++c) {
            const auto from = wide.begin() + static_cast<std::ptrdiff_t>((std::uint64_t{n} * shape.c + c) * plane);
            out.insert(out.end(), from, from + static_cast<std::ptrdiff_t>(plane));
        }
    return out;
}

// braid::samples::transposed for a whole vector.
template <class T>
std::vector<T> transposed(const std::vector<T>& v, Shape4 s, bool to_nhwc) {
    return braid::samples::transposed(std::span<const T>(v), s, to_nhwc);
}

// How many values outside channels [first, first + count) still equal
// `fill`: a layer writing a slice must leave the rest of the buffer alone.
inline std::uint64_t untouched_outside(const std::vector<float>& wide, Shape4 shape, std::uint32_t first,
                                       std::uint32_t count, float fill) {
    const std::uint64_t plane = shape.plane_elements();
    std::uint64_t n = 0;
    for (std::uint64_t i = 0; i < wide.size(); ++i) {
        const std::uint64_t c = i / plane % shape.c;
        n += (c < first || c >= first + count) && wide[i] == fill ? 1 : 0;
    }
    return n;
}

}  // namespace gpu_test
