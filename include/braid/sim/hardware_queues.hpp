// How many hardware work queues a CUDA process's eager launches get: the
// number its environment asks the driver for (CUDA_DEVICE_MAX_CONNECTIONS,
// read when the process creates its CUDA context), so that a plan for an
// eager run in this process is simulated with the queues it will have
// (sim::Params::eager_hardware_queues, docs/simulator.md).
#pragma once

#include <charconv>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "braid/error.hpp"
#include "braid/sim/program.hpp"

namespace braid::sim {

inline constexpr const char* max_connections_variable = "CUDA_DEVICE_MAX_CONNECTIONS";

// `value` of CUDA_DEVICE_MAX_CONNECTIONS (nullptr: not set) as a queue
// count: none when not set, else a whole number from 1 to 32. Anything else
// is refused, naming the variable: the driver's treatment of it is not
// documented, so no plan can say how many queues it would give.
inline std::optional<int> requested_hardware_queues(const char* value) {
    if (value == nullptr) return std::nullopt;
    const std::string_view text(value);
    int n = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || n < 1 || n > max_hardware_queues)
        throw Error(std::string(max_connections_variable) + "='" + std::string(text) +
                    "': expected a whole number from 1 to " + std::to_string(max_hardware_queues) +
                    " (hardware work queues per CUDA context)");
    return n;
}

// What this process's environment asks for (requested_hardware_queues of
// the variable as it is now).
inline std::optional<int> process_hardware_queues() {
    return requested_hardware_queues(std::getenv(max_connections_variable));
}

// `p` with eager launches spread over `queues` hardware queues when given;
// `p` as it is otherwise (the calibration's or the default 8).
inline Params with_eager_hardware_queues(Params p, std::optional<int> queues) {
    if (queues) p.eager_hardware_queues = *queues;
    return p;
}

}  // namespace braid::sim
