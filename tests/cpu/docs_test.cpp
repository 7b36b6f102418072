// The integration guide shows the compiled example verbatim, so the docs
// cannot drift from code that builds and passes.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <string>

namespace {

std::string read(const std::string& path) {
    std::ifstream in(path);
    REQUIRE_MESSAGE(in.good(), "cannot read " << path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

}  // namespace

TEST_CASE("docs/integration.md contains the compiled example's code") {
    const std::string src = read(BRAID_SOURCE_DIR "/docs/examples/integration.cpp");
    const std::string doc = read(BRAID_SOURCE_DIR "/docs/integration.md");
    const std::string begin = "    // [integration]\n", end = "    // [integration end]";
    const auto b = src.find(begin), e = src.find(end);
    REQUIRE(b != std::string::npos);
    REQUIRE(e != std::string::npos);
    std::istringstream lines(src.substr(b + begin.size(), e - b - begin.size()));
    int checked = 0;
    for (std::string line; std::getline(lines, line);) {
        const std::string dedented = line.rfind("    ", 0) == 0 ? line.substr(4) : line;
        CAPTURE(dedented);
        CHECK(doc.find(dedented) != std::string::npos);
        ++checked;
    }
    CHECK(checked >= 25);
}
