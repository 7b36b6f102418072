// libFuzzer entry point of one target; BRAID_FUZZ_TARGET names it. A
// braid::Error is the expected answer to bad input; anything else escapes,
// and libFuzzer reports it as a crash with the input that caused it.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    (void)braid::fuzz::run(BRAID_FUZZ_TARGET, std::string_view(reinterpret_cast<const char*>(data), size));
    return 0;
}
