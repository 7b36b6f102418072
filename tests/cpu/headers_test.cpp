// The build compiles every public header alone in its own translation unit
// (tests/meson.build). This checks that list is complete: a header added
// since the last configure would otherwise escape the check.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

TEST_CASE("every public header was compiled alone") {
    namespace fs = std::filesystem;
    int found = 0;
    for (const auto& e : fs::recursive_directory_iterator(BRAID_INCLUDE_DIR "/braid"))
        if (e.is_regular_file() && e.path().extension() == ".hpp") ++found;
    CAPTURE(found);
    CHECK(found == BRAID_HEADERS_LISTED);
    CHECK(BRAID_HEADERS_COMPILED + BRAID_HEADERS_SKIPPED == BRAID_HEADERS_LISTED);
    MESSAGE(BRAID_HEADERS_COMPILED << " headers compiled alone, " << BRAID_HEADERS_SKIPPED
                                   << " CUDA headers skipped (no CUDA in this build)");
}
