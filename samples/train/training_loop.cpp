#include "train/training_loop.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>

#include "braid/error.hpp"

namespace braid::samples {

int run_training_loop(const TrainingLoop& loop) {
    if (!loop.iterate_ms || !loop.loss) throw braid::Error("run_training_loop: iterate_ms and loss are required");
    const std::uint32_t n = loop.iterations;
    const int digits = loop.ms_decimals;
    double steady_ms = 0.0;
    for (std::uint32_t it = 1; it <= n; ++it) {
        const double ms = loop.iterate_ms();
        if (it > 1 || n == 1) steady_ms += ms;
        const double loss = loop.loss();
        fmt::print("iteration {:>{}}/{}  loss {:.6f}  {:.{}f} ms  {:.1f} images/s\n", it, std::to_string(n).size(), n,
                   loss, ms, digits, loop.batch / (ms * 1e-3));
        std::fflush(stdout);
        if (!std::isfinite(loss)) {
            fmt::print(stderr,
                       "training diverged: the loss of iteration {} is {}; every later step would train on it. A "
                       "smaller --lr, or finite, smaller constants in the net (loss weights, LRN, batch norm eps), "
                       "keep it finite\n",
                       it, loss);
            return 1;
        }
    }
    const std::uint32_t timed = n > 1 ? n - 1 : 1;
    fmt::print("mean over iteration{} {}: {:.{}f} ms per iteration, {:.1f} images/s{}\n", timed > 1 ? "s" : "",
               n > 1 ? fmt::format("2..{}", n) : std::string("1"), steady_ms / timed, digits,
               loop.batch * timed / (steady_ms * 1e-3), loop.mean_note ? loop.mean_note() : std::string());
    if (!loop.check) return 0;
    const WeightComparison cmp = loop.check();
    fmt::print("check against a serial run: {}\n", cmp.describe());
    std::fflush(stdout);
    return cmp.identical ? 0 : 1;
}

}  // namespace braid::samples
