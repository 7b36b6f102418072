// Every fuzz target on its seeds (braid's own documents, which must load)
// and on every input kept under tools/fuzz: the corpus (valid documents
// from elsewhere, which must load) and the regressions (inputs that once
// crashed or hung a target, which must now load or be refused with a
// braid::Error).
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "targets.hpp"

namespace fs = std::filesystem;
using braid::fuzz::Outcome;

namespace {

std::vector<fs::path> kept_inputs(const std::string& target) {
    std::vector<fs::path> out;
    for (const char* kind : {"corpus", "regressions"}) {
        const fs::path dir = fs::path(BRAID_SOURCE_DIR) / "tools/fuzz" / kind / target;
        if (!fs::is_directory(dir)) continue;
        for (const auto& e : fs::directory_iterator(dir))
            if (e.is_regular_file()) out.push_back(e.path());
    }
    std::sort(out.begin(), out.end());
    return out;
}

std::string read(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

}  // namespace

TEST_CASE("every fuzz target loads the documents braid writes") {
    REQUIRE(braid::fuzz::target_names().size() == 6);
    for (std::string_view t : braid::fuzz::target_names()) {
        CAPTURE(t);
        const auto seeds = braid::fuzz::seeds(t);
        CHECK(seeds.size() >= 2);
        for (const auto& s : seeds) {
            CAPTURE(s.name);
            CHECK(braid::fuzz::run(t, s.bytes) == Outcome::accepted);
            // Cut short, the same document is refused, never a crash.
            CHECK(braid::fuzz::run(t, s.bytes.substr(0, s.bytes.size() / 2)) == Outcome::refused);
        }
    }
    CHECK_THROWS_AS((void)braid::fuzz::run("caffe", "{}"), std::invalid_argument);
}

TEST_CASE("every kept fuzz input loads or is refused with a braid::Error") {
    std::size_t inputs = 0;
    for (std::string_view t : braid::fuzz::target_names()) {
        for (const fs::path& p : kept_inputs(std::string(t))) {
            CAPTURE(p.string());
            ++inputs;
            const std::string bytes = read(p);
            Outcome o = Outcome::refused;
            CHECK_NOTHROW(o = braid::fuzz::run(t, bytes));
            // The corpus holds valid documents (measured on the H200, say);
            // a regression may be either.
            if (p.parent_path().parent_path().filename() == "corpus") CHECK(o == Outcome::accepted);
        }
    }
    MESSAGE(inputs << " kept fuzz inputs");
    CHECK(inputs > 0);
}
