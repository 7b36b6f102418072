// nimble (Kwon et al., NeurIPS 2020): streams from a minimum chain cover.
// First a maximum matching on the edges of the transitive reduction (Nimble's
// own assignment: consecutive ops of a stream are directly dependent, so
// stream order replaces their synchronisation), then augmenting paths over the
// transitive closure merge those paths into a minimum chain cover, whose size
// is the graph's width (Dilworth). Waits go on the remaining cross-stream edges.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "braid/detail/bit_matrix.hpp"
#include "braid/graph/op_graph.hpp"
#include "braid/model/cost.hpp"
#include "braid/plan/plan.hpp"
#include "braid/planner/strategies/assemble.hpp"

namespace braid::strategy {

struct ChainCover {
    std::vector<std::uint32_t> chain_of;  // op -> chain index; chains numbered by their first op's topological position
    std::uint32_t chains = 0;
};

namespace detail_nimble {

inline constexpr std::uint32_t unmatched = ~std::uint32_t{0};

// Kuhn's augmenting paths. `next_neighbour(u, from, dead)` yields u's
// right-side neighbours >= from that are not in `dead`. Vertices visited by
// a failed search stay dead for the rest of the pass: the matching did not
// change, so they cannot lead to an augmenting path either.
template <class Neighbours>
void augment(std::size_t n, std::vector<std::uint32_t>& match_left, std::vector<std::uint32_t>& match_right,
             Neighbours&& next_neighbour) {
    std::vector<std::uint64_t> dead((n + 63) / 64);
    auto is_dead = [&](std::uint32_t v) { return (dead[v / 64] >> (v % 64)) & 1u; };
    // Iterative depth-first search: stack of (left vertex, next neighbour to try).
    std::vector<std::pair<std::uint32_t, std::uint32_t>> stack;
    std::vector<std::uint32_t> via;  // right vertex taken at each stack level
    bool progress = true;
    while (progress) {
        progress = false;
        std::fill(dead.begin(), dead.end(), 0);
        for (std::uint32_t root = 0; root < n; ++root) {
            if (match_left[root] != unmatched) continue;
            stack.assign(1, {root, 0});
            via.clear();
            bool found = false;
            while (!stack.empty() && !found) {
                auto& [u, from] = stack.back();
                const std::uint32_t v = next_neighbour(u, from, dead.data());
                if (v >= n) {
                    stack.pop_back();
                    if (!via.empty()) via.pop_back();
                    continue;
                }
                from = v + 1;
                if (is_dead(v)) continue;
                dead[v / 64] |= std::uint64_t{1} << (v % 64);
                via.push_back(v);
                if (match_right[v] == unmatched) {
                    found = true;
                } else {
                    stack.emplace_back(match_right[v], 0);
                }
            }
            if (!found) continue;
            // Flip the path: stack[i].first is matched to via[i].
            for (std::size_t i = 0; i < via.size(); ++i) {
                match_left[stack[i].first] = via[i];
                match_right[via[i]] = stack[i].first;
            }
            std::fill(dead.begin(), dead.end(), 0);
            progress = true;
        }
    }
}

}  // namespace detail_nimble

inline ChainCover minimum_chain_cover(const OpGraph& graph) {
    using detail_nimble::unmatched;
    const std::size_t n = graph.op_count();
    std::vector<std::uint32_t> match_left(n, unmatched), match_right(n, unmatched);

    // Phase 1: maximum matching on the transitive reduction (sparse).
    std::vector<std::vector<OpId>> reduced(n);
    for (const Edge& e : graph.transitive_reduction()) reduced[e.from].push_back(e.to);
    for (auto& succ : reduced) std::sort(succ.begin(), succ.end());
    for (OpId u : graph.topological_order())  // greedy start: the first free successor
        for (OpId v : reduced[u])
            if (match_right[v] == unmatched) {
                match_left[u] = v;
                match_right[v] = u;
                break;
            }
    detail_nimble::augment(n, match_left, match_right,
                           [&](std::uint32_t u, std::uint32_t from, const std::uint64_t*) -> std::uint32_t {
                               auto it = std::lower_bound(reduced[u].begin(), reduced[u].end(), from);
                               return it == reduced[u].end() ? static_cast<std::uint32_t>(n) : *it;
                           });

    // Phase 2: the same matching grown to a maximum one on the closure.
    const detail::BitMatrix closure = graph.descendants();
    detail_nimble::augment(n, match_left, match_right,
                           [&](std::uint32_t u, std::uint32_t from, const std::uint64_t* dead) -> std::uint32_t {
                               return static_cast<std::uint32_t>(closure.find_next(u, from, dead));
                           });

    ChainCover cover;
    cover.chain_of.assign(n, unmatched);
    for (OpId head : graph.topological_order()) {
        if (match_right[head] != unmatched) continue;
        for (std::uint32_t v = head; v != unmatched; v = match_left[v]) cover.chain_of[v] = cover.chains;
        ++cover.chains;
    }
    return cover;
}

inline Plan nimble(const OpGraph& graph, std::string device = {}) {
    const ChainCover cover = minimum_chain_cover(graph);
    std::vector<Placement> order;
    order.reserve(graph.op_count());
    for (OpId op : graph.topological_order()) order.push_back(Placement{op, {cover.chain_of[op]}});
    return assemble(graph, "nimble", StrategyOptions{.chains = cover.chains}, std::move(device),
                    std::vector<int>(cover.chains, 0), order);
}

// Nimble's chains, with every chain that carries an op of the critical
// path (by the ops' summed kernel times in `costs`) one priority more
// urgent (-1) than the others (0): the candidate the braid planner weighs
// as "nimble chains with critical-path priorities", and a measured row of
// a fresh data set beside plain nimble (braid-measure).
inline Plan nimble_critical_path(const OpGraph& graph, std::span<const OpCost> costs, std::string device = {}) {
    require_costs_for<PlanError>(graph.op_count(), costs.size(), "nimble_critical_path");
    Plan p = nimble(graph, std::move(device));
    std::vector<bool> critical(graph.op_count(), false);
    for (OpId op : graph.critical_path(op_durations_ns(costs)).ops) critical[op] = true;
    for (const PlanStep& s : p.steps)
        if (critical[s.op]) p.stream_priorities[s.stream] = -1;
    return p;
}

}  // namespace braid::strategy
