// Main of every GPU test program: without a CUDA device it says so and exits
// 77, which Meson reports as SKIP.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "braid/cuda/error.hpp"

int main(int argc, char** argv) {
    const std::string reason = braid::cuda::no_device_reason();
    if (!reason.empty()) {
        std::printf("%s: skipping the GPU tests\n", reason.c_str());
        return 77;
    }
    doctest::Context context(argc, argv);
    return context.run();
}
