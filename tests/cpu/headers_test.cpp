// The build compiles every public header alone in its own translation unit
// (tests/meson.build). This checks that list is complete (a header added
// since the last configure would otherwise escape the check) and that the
// folders keep the pipeline's order: no header includes one of a later stage,
// and only the CUDA folders include CUDA headers.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

// Stage of a header path relative to include/ ("braid/plan/plan.hpp").
// Headers at the top of braid/ and in detail/ serve every stage.
int stage_of(const std::string& rel) {
    static const std::vector<std::pair<std::string, int>> stages{
        {"braid/detail/", 0}, {"braid/graph/", 1}, {"braid/model/", 2},  {"braid/sim/", 3},
        {"braid/plan/", 4},   {"braid/planner/", 5}, {"braid/exec/", 6}, {"braid/cuda/", 7},
        {"braid/profiler/", 8},
    };
    if (rel == "braid/braid.hpp") return 100;  // the umbrella includes everything
    for (const auto& [prefix, stage] : stages)
        if (rel.rfind(prefix, 0) == 0) return stage;
    return 0;  // config.hpp, error.hpp
}

bool is_cuda_header(const std::string& rel) {
    return rel.rfind("braid/cuda/", 0) == 0 || rel.rfind("braid/profiler/cuda/", 0) == 0;
}

struct Header {
    std::string rel;
    std::vector<std::string> braid_includes;
    std::vector<std::string> system_includes;
};

std::vector<Header> read_headers() {
    const fs::path root = BRAID_INCLUDE_DIR;
    const std::regex braid_include(R"re(^\s*#\s*include\s+"(braid/[^"]+)")re");
    const std::regex system_include(R"re(^\s*#\s*include\s+<([^>]+)>)re");
    std::vector<Header> out;
    for (const auto& e : fs::recursive_directory_iterator(root / "braid")) {
        if (!e.is_regular_file() || e.path().extension() != ".hpp") continue;
        Header h{fs::relative(e.path(), root).generic_string(), {}, {}};
        std::ifstream in(e.path());
        std::string line;
        std::smatch m;
        while (std::getline(in, line)) {
            if (std::regex_search(line, m, braid_include)) h.braid_includes.push_back(m[1]);
            else if (std::regex_search(line, m, system_include)) h.system_includes.push_back(m[1]);
        }
        out.push_back(std::move(h));
    }
    return out;
}

}  // namespace

TEST_CASE("every public header was compiled alone") {
    const std::size_t found = read_headers().size();
    CAPTURE(found);
    CHECK(found == BRAID_HEADERS_LISTED);
    CHECK(BRAID_HEADERS_COMPILED + BRAID_HEADERS_SKIPPED == BRAID_HEADERS_LISTED);
    MESSAGE(BRAID_HEADERS_COMPILED << " headers compiled alone, " << BRAID_HEADERS_SKIPPED
                                   << " skipped (CUDA headers without CUDA; all in sanitizer builds)");
}

TEST_CASE("no header includes one of a later pipeline stage") {
    int checked = 0;
    for (const Header& h : read_headers())
        for (const std::string& inc : h.braid_includes) {
            CAPTURE(h.rel);
            CAPTURE(inc);
            CHECK(fs::exists(fs::path(BRAID_INCLUDE_DIR) / inc));
            CHECK(stage_of(inc) <= stage_of(h.rel));
            ++checked;
        }
    CHECK(checked > 100);
}

TEST_CASE("only the CUDA folders include CUDA headers, and host headers never include them") {
    const std::regex cuda_system(R"((^|/)(cuda|cupti|cublas|cudnn|nvtx3|cuda_runtime)[^/]*\.h$)");
    int host = 0, cuda = 0;
    for (const Header& h : read_headers()) {
        CAPTURE(h.rel);
        if (is_cuda_header(h.rel)) {
            ++cuda;
            continue;
        }
        ++host;
        for (const std::string& inc : h.braid_includes) {
            CAPTURE(inc);
            CHECK_FALSE(is_cuda_header(inc));
        }
        // cuda_occupancy.h is a host-only calculator of the toolkit; the
        // model wraps it (config.hpp asks for it with __has_include).
        for (const std::string& inc : h.system_includes) {
            CAPTURE(inc);
            CHECK((inc == "cuda_occupancy.h" || !std::regex_search(inc, cuda_system)));
        }
    }
    CHECK(host > 40);
    CHECK(cuda >= 10);
}
