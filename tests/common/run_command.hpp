// Runs a shell command, as the tests of the command-line tools do: its exit
// status and everything it printed, stderr joined to stdout.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace braid::testing {

struct CommandRun {
    int status = -1;     // the exit status; -1 when it did not exit (a signal)
    std::string output;  // stdout and stderr
};

inline CommandRun run_command(const std::string& command) {
    FILE* pipe = popen((command + " 2>&1").c_str(), "r");
    if (pipe == nullptr) throw std::runtime_error("cannot start: " + command);
    CommandRun run;
    std::array<char, 4096> buffer{};
    std::size_t n = 0;
    while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) run.output.append(buffer.data(), n);
    const int raw = pclose(pipe);
    run.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    return run;
}

}  // namespace braid::testing
