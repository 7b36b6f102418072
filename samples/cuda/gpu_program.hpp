// The frame of a sample GPU program's main(): the command line is parsed in
// full first and `check` looks at the input files, so a mistyped option or a
// bad file says so on any machine; without a usable GPU the program then
// prints "<reason>: skipping <what>" and exits 77 (Meson's SKIP); otherwise
// it returns what `run` returns. An exception is printed as
// "<program>: error: <message>" with exit status 1.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <string>
#include <utility>

#include "cuda/cuda_trainer.hpp"
#include "vocabulary.hpp"

namespace braid::samples {

template <class Check, class Run>
int gpu_program_main(CLI::App& app, int argc, char** argv, const std::string& skipping, Check&& check, Run&& run) {
    braid::cli::refuse_empty_values(app);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }
    try {
        check();
        const std::string reason = cuda_unavailable_reason();
        if (!reason.empty()) {
            std::printf("%s: skipping %s\n", reason.c_str(), skipping.c_str());
            return 77;
        }
        return run();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: error: %s\n", app.get_name().c_str(), e.what());
        return 1;
    }
}

template <class Run>
int gpu_program_main(CLI::App& app, int argc, char** argv, const std::string& skipping, Run&& run) {
    return gpu_program_main(app, argc, argv, skipping, [] {}, std::forward<Run>(run));
}

}  // namespace braid::samples
