// The integration guide shows the compiled examples verbatim (the host
// example and the CUDA profiling one), so the docs cannot drift from code
// that builds and passes.
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

// Every line between `// [tag]` and `// [tag end]` of the example (less
// `indent` spaces) is in the guide; returns how many.
int check_example_in_guide(const std::string& example, const std::string& tag, std::size_t indent) {
    const std::string src = read(BRAID_SOURCE_DIR "/docs/examples/" + example);
    const std::string doc = read(BRAID_SOURCE_DIR "/docs/integration.md");
    const std::string pad(indent, ' ');
    const std::string begin = pad + "// [" + tag + "]\n", end = pad + "// [" + tag + " end]";
    const auto b = src.find(begin), e = src.find(end);
    REQUIRE(b != std::string::npos);
    REQUIRE(e != std::string::npos);
    std::istringstream lines(src.substr(b + begin.size(), e - b - begin.size()));
    int checked = 0;
    for (std::string line; std::getline(lines, line);) {
        const std::string dedented = line.rfind(pad, 0) == 0 ? line.substr(indent) : line;
        CAPTURE(dedented);
        CHECK(doc.find(dedented) != std::string::npos);
        ++checked;
    }
    return checked;
}

}  // namespace

TEST_CASE("docs/integration.md contains the compiled example's code") {
    CHECK(check_example_in_guide("integration.cpp", "integration", 4) >= 25);
}

TEST_CASE("docs/integration.md contains the compiled profiling example's code") {
    CHECK(check_example_in_guide("profile_step.cpp", "profile", 8) >= 12);
}
