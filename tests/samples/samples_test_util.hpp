// Helpers of the samples tests: reproducible random tensors and
// finite-difference gradients in double.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "nn/counter_hash.hpp"
#include "nn/tensor.hpp"

namespace samples_test {

using namespace braid::samples;

// Values in [lo, hi), the same on every platform.
template <class T>
std::vector<T> random_values(std::size_t count, std::uint64_t seed, double lo = -1.0, double hi = 1.0) {
    std::vector<T> v(count);
    for (std::size_t i = 0; i < count; ++i)
        v[i] = static_cast<T>(lo + (hi - lo) * static_cast<double>(uniform01(counter_hash(seed, 77, 0, i))));
    return v;
}

template <class T>
TensorView<T> view(std::vector<T>& v, Shape4 s) {
    REQUIRE(v.size() == s.elements());
    return TensorView<T>::dense(v.data(), s);
}
template <class T>
TensorView<const T> cview(const std::vector<T>& v, Shape4 s) {
    REQUIRE(v.size() == s.elements());
    return TensorView<const T>::dense(v.data(), s);
}

// d loss / d values[i] by central differences, for every i.
inline std::vector<double> numeric_gradient(std::vector<double>& values, const std::function<double()>& loss,
                                            double h = 1e-6) {
    std::vector<double> g(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) {
        const double old = values[i];
        values[i] = old + h;
        const double plus = loss();
        values[i] = old - h;
        const double minus = loss();
        values[i] = old;
        g[i] = (plus - minus) / (2 * h);
    }
    return g;
}

// Analytic against numeric, element by element: |a - n| <= tol * max(1, |n|).
inline void check_gradient(const std::vector<double>& analytic, const std::vector<double>& numeric, const char* what,
                           double tol = 1e-6) {
    REQUIRE(analytic.size() == numeric.size());
    std::size_t bad = 0;
    for (std::size_t i = 0; i < analytic.size(); ++i) {
        const double scale = std::max(1.0, std::abs(numeric[i]));
        if (std::abs(analytic[i] - numeric[i]) > tol * scale) {
            if (bad++ < 3)
                FAIL_CHECK(what << "[" << i << "]: analytic " << analytic[i] << " vs numeric " << numeric[i]);
        }
    }
    CHECK_MESSAGE(bad == 0, what << ": " << bad << " of " << analytic.size() << " elements differ");
}

// sum(y * r): the loss whose gradient with respect to y is r.
inline double dot(const std::vector<double>& y, const std::vector<double>& r) {
    double s = 0.0;
    for (std::size_t i = 0; i < y.size(); ++i) s += y[i] * r[i];
    return s;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

}  // namespace samples_test
