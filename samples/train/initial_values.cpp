#include "train/initial_values.hpp"

#include <algorithm>

#include "nn/counter_hash.hpp"

namespace braid::samples {

void fill_initial_parameter(const ParamSpec& p, std::uint64_t seed, std::uint64_t ordinal, float* out) {
    const std::uint64_t n = p.elements();
    std::fill(out, out + n, 0.0f);
    if (p.init == InitRule::ones) std::fill(out, out + n, 1.0f);
    if (p.init == InitRule::constant) std::fill(out, out + n, p.value);
    const float bound = static_cast<float>(uniform_bound(p.init, p.fan_in));
    if (bound == 0.0f) return;
    const std::uint64_t tag = stream_tag(RandomStream::parameter_init, ordinal);
    for (std::uint64_t e = 0; e < n; ++e) out[e] = (2.0f * uniform01(counter_hash(seed, tag, 0, e)) - 1.0f) * bound;
}

void fill_initial_aux(const AuxBufferSpec& a, float* out) {
    std::fill(out, out + a.elements(), a.init == InitRule::ones ? 1.0f : 0.0f);
}

}  // namespace braid::samples
