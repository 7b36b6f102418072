// Fuzz targets: one per loader braid offers for files users and tools
// write. Each takes arbitrary bytes the way the loader takes a file. The
// expected answer to bad input is a braid::Error; anything else is a
// finding: another exception, a crash or sanitizer report, a hang, or a
// document that does not read back unchanged after writing it out.
//
// The libFuzzer programs (fuzz_main.cpp, built with -Dfuzz=enabled and
// clang) and the corpus test (tests/cpu/fuzz_corpus_test.cpp, every build)
// call the same functions, so a crashing input kept under
// tools/fuzz/regressions stays a test.
#pragma once

#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace braid::fuzz {

// What a target did with an input.
enum class Outcome { accepted, refused };

// A property a target checks did not hold (never a braid::Error).
class Finding : public std::logic_error {
public:
    using std::logic_error::logic_error;
};

std::span<const std::string_view> target_names();

// Runs target `name` on `bytes`: accepted, refused (a braid::Error), or a
// Finding / other exception that escapes. Unknown name: std::invalid_argument.
Outcome run(std::string_view name, std::string_view bytes);

struct Seed {
    std::string name;
    std::string bytes;
};

// Valid documents for target `name`, written by braid's own writers: the
// starting corpus, and proof that every loader reads what braid writes.
std::vector<Seed> seeds(std::string_view name);

}  // namespace braid::fuzz
