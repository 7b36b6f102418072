// The progress bar braid's tools draw on stderr while they profile: one line
// per phase ("warm-up", "measured"), redrawn in place on a terminal and
// written once, when the phase is complete, anywhere else (logs, pipes).
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include <fmt/core.h>

namespace braid::cli {

class ProgressBar {
public:
    ProgressBar() : tty_(::isatty(::fileno(stderr)) != 0) {}
    void operator()(std::string_view phase, std::uint32_t done, std::uint32_t total) const {
        if (!tty_ && done != total) return;
        constexpr std::uint32_t width = 30;
        const std::uint32_t filled = total ? done * width / total : width;
        fmt::print(stderr, "{}  {:<9} [{}{}] {}/{}{}", tty_ ? "\r" : "", phase, std::string(filled, '#'),
                   std::string(width - filled, '.'), done, total, done == total ? "\n" : "");
        std::fflush(stderr);
    }

private:
    bool tty_;
};

}  // namespace braid::cli
