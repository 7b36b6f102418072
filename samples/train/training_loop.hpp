// The loop braid-train runs on every backend: a line per iteration (loss,
// time, throughput), the steady-state mean (iteration 1, which warms caches
// and starts workers, left out), and with --check a serial reference
// trained as many iterations and compared with the model bit for bit. A
// backend supplies only how to run an iteration and read its results.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "train/weights.hpp"

namespace braid::samples {

struct TrainingLoop {
    std::uint32_t iterations = 1;
    std::uint32_t batch = 0;  // images per iteration
    int ms_decimals = 1;      // digits of the per-iteration milliseconds
    // Runs one iteration; its time in milliseconds.
    std::function<double()> iterate_ms;
    // The last iteration's loss.
    std::function<double()> loss;
    // Appended to the mean line, e.g. " (graph: 1 captures, 4 replays, 8 lanes)"; may be null.
    std::function<std::string()> mean_note;
    // Null: no check. Else trains the serial reference as many iterations
    // and compares every weight with the model's.
    std::function<WeightComparison()> check;
};

// Prints the run as the header says; 0, or 1 when the check finds a
// difference or a loss is not finite (the run stops there: the weights
// are lost). Throws braid::Error when iterate_ms or loss is missing.
int run_training_loop(const TrainingLoop& loop);

}  // namespace braid::samples
