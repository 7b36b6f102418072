// A plan's stream priorities (CUDA's convention: lower = more urgent, 0 =
// default) mapped into the range a device offers, [greatest, least] as
// cudaDeviceGetStreamPriorityRange reports it (greatest <= least, e.g. -5
// and 0). Pure arithmetic, so it is tested without a GPU.
#pragma once

#include <algorithm>
#include <span>
#include <vector>

namespace braid {

// Plans whose priorities all lie in the range keep them. Otherwise clamping
// (what CUDA itself does) is used when it keeps distinct priorities
// distinct; when it would merge two of them, the distinct priorities are
// ranked instead: the least urgent gets `least`, each more urgent one a step
// more urgent, down to `greatest`. Order is always preserved.
inline std::vector<int> map_stream_priorities(std::span<const int> plan, int least, int greatest) {
    if (greatest > least) std::swap(greatest, least);
    std::vector<int> out(plan.begin(), plan.end());
    auto count_distinct = [](std::vector<int> v) {
        std::sort(v.begin(), v.end());
        return static_cast<int>(std::unique(v.begin(), v.end()) - v.begin());
    };
    std::vector<int> clamped(out);
    for (int& p : clamped) p = std::clamp(p, greatest, least);
    if (clamped == out || count_distinct(clamped) == count_distinct(out)) return clamped;

    std::vector<int> distinct(out);
    std::sort(distinct.begin(), distinct.end(), std::greater<>());  // least urgent first
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    for (int& p : out) {
        const auto rank = static_cast<int>(std::find(distinct.begin(), distinct.end(), p) - distinct.begin());
        p = std::max(least - rank, greatest);
    }
    return out;
}

}  // namespace braid
