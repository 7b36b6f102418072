#include "nn/layer.hpp"

#include <cmath>

namespace braid::samples {

double uniform_bound(InitRule rule, std::uint64_t fan_in) {
    const double n = static_cast<double>(fan_in == 0 ? 1 : fan_in);
    switch (rule) {
        case InitRule::he_uniform: return std::sqrt(6.0 / n);
        case InitRule::fan_in_uniform: return std::sqrt(1.0 / n);
        case InitRule::xavier_uniform: return std::sqrt(3.0 / n);
        default: return 0.0;
    }
}

}  // namespace braid::samples
