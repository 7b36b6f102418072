// What tuning measures: braid's best plans by the simulator, the model's
// choice first (the favourite), and the baselines braid weighed (serial,
// nimble, glp4nn, ooo, opara; ios with BraidOptions::weigh_ios), so that
// the tuned plan is never slower than what the baselines measure (those the
// timing source did not decline: they come last, so a GPU without room for
// every candidate declines them first).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "braid/planner/strategies/braid.hpp"
#include "braid/planner/tune.hpp"

namespace braid {

// `top` of braid's candidates (BraidOptions::complete_top should be at
// least that, or fewer were simulated to the end) plus the baselines that
// are not among them; each plan only once.
inline std::vector<TuneCandidate> tune_candidates(const strategy::BraidResult& result, std::size_t top) {
    std::vector<TuneCandidate> out;
    std::vector<std::size_t> taken;
    auto add = [&](std::size_t i, std::string name) {
        const strategy::BraidCandidate& c = result.candidates.at(i);
        for (std::size_t j : taken) {
            const Plan& p = result.candidates[j].plan;
            if (p.steps == c.plan.steps && p.waits == c.plan.waits && p.stream_priorities == c.plan.stream_priorities)
                return;
        }
        taken.push_back(i);
        out.push_back(TuneCandidate{std::move(name), result.plan_of(i), c.simulated_ns});
    };
    std::size_t rank = 0;
    for (std::size_t i : result.ranked(top)) add(i, "model #" + std::to_string(++rank) + ": " + result.candidates[i].describe());
    for (const std::string& base : baseline_strategies())
        // As its strategy makes it: nimble takes as many streams as its chains, whatever the cap.
        if (const strategy::BraidCandidate* b = result.find_baseline(base))
            add(static_cast<std::size_t>(b - result.candidates.data()), b->describe());
    return out;
}

}  // namespace braid
