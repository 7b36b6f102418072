// How a backend issues an iteration: every call every time, or recorded once
// as a graph and replayed. Shared by the CUDA and simulator backends.
#pragma once

#include <cstdint>
#include <string_view>

namespace braid {

enum class LaunchMode : std::uint8_t {
    eager,  // every launch, wait and record is issued each iteration
    graph,  // the iteration is captured once as a CUDA graph and replayed
};

constexpr std::string_view to_string(LaunchMode mode) noexcept {
    return mode == LaunchMode::graph ? "graph" : "eager";
}

}  // namespace braid
