#include "train/split_granule.hpp"

#include <numeric>

#include "braid/model/batch_split.hpp"
#include "braid/model/cost.hpp"

namespace braid::samples {

std::uint32_t split_granule(const braid::Plan& plan, const braid::OpGraph& graph) {
    std::uint32_t g = 0;
    for (const braid::PlanStep& s : plan.steps) {
        if (s.parts <= 1) continue;
        const braid::BatchRange r = braid::split_range(graph.op(s.op).split_batch, s.parts, s.part);
        g = std::gcd(g, std::gcd(r.begin, r.end));
    }
    return g;
}

}  // namespace braid::samples
