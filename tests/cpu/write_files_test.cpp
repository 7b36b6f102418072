// Outputs written all or none (braid::detail::write_files), and the check
// tools make before long work (braid::cli::output_path_problem), which must
// leave nothing behind.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "braid/detail/write_files.hpp"
#include "braid/error.hpp"
#include "vocabulary.hpp"

namespace fs = std::filesystem;

namespace {

std::string read(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
}

// A fresh, empty folder for one test case, removed at its end.
struct Scratch {
    fs::path dir = fs::temp_directory_path() / ("braid-write-files-" + std::to_string(getpid()));
    Scratch() {
        fs::remove_all(dir);
        fs::create_directories(dir);
    }
    ~Scratch() { fs::remove_all(dir); }
    // Every file and folder under dir, for "nothing was left behind".
    std::size_t entries() const {
        std::size_t n = 0;
        for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator(); ++it) ++n;
        return n;
    }
};

std::string error_of(const auto& f) {
    try {
        f();
    } catch (const braid::Error& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("write_files writes every output, making missing folders, and leaves no temporary file") {
    Scratch s;
    braid::detail::write_files({{"--a", s.dir / "a.json", "A\n"}, {"--b", s.dir / "x/y/b.svg", "<svg/>"}});
    CHECK(read(s.dir / "a.json") == "A\n");
    CHECK(read(s.dir / "x/y/b.svg") == "<svg/>");
    CHECK(s.entries() == 4);  // a.json, x, x/y, x/y/b.svg
}

TEST_CASE("write_files writes none when one output fails: old files stay, new folders and temporaries go") {
    Scratch s;
    std::ofstream(s.dir / "plan.json") << "old plan";
    std::ofstream(s.dir / "file") << "a file, not a folder";
    const std::string error = error_of([&] {
        braid::detail::write_files({{"--out", s.dir / "plan.json", "new plan"},
                                    {"--trace-out", s.dir / "new/deeper/trace.json", "new trace"},
                                    {"--svg-out", s.dir / "file/timeline.svg", "new svg"}});
    });
    CHECK(error.find("--svg-out: cannot write '" + (s.dir / "file/timeline.svg").string() + "': ") == 0);
    CHECK(read(s.dir / "plan.json") == "old plan");
    CHECK(!fs::exists(s.dir / "new"));
    CHECK(s.entries() == 2);  // plan.json and file, nothing else
}

TEST_CASE("write_files replaces a file keeping its permissions, writes through links, and writes devices in place") {
    Scratch s;
    std::ofstream(s.dir / "p.json") << "old";
    fs::permissions(s.dir / "p.json", fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
    std::ofstream(s.dir / "target.json") << "old target";
    fs::create_symlink("target.json", s.dir / "link.json");
    braid::detail::write_files({{"--out", s.dir / "p.json", "new"},
                                {"--link", s.dir / "link.json", "through the link"},
                                {"--null", "/dev/null", "discarded"}});
    CHECK(read(s.dir / "p.json") == "new");
    CHECK(fs::status(s.dir / "p.json").permissions() ==
          (fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read));
    CHECK(fs::is_symlink(s.dir / "link.json"));
    CHECK(read(s.dir / "target.json") == "through the link");
    CHECK(fs::is_character_file("/dev/null"));
    CHECK(s.entries() == 3);
    CHECK(error_of([&] { braid::detail::write_file("--out", s.dir, "x"); }) ==
          "--out: cannot write '" + s.dir.string() + "': it is a folder");
}

TEST_CASE("write_files follows a link to a file not there yet, keeps hard links, and leaves nothing when a device fails") {
    Scratch s;
    fs::create_symlink("later.json", s.dir / "dangling.json");
    std::ofstream(s.dir / "one.json") << "old";
    fs::create_hard_link(s.dir / "one.json", s.dir / "two.json");
    const std::string long_name(250, 'n');  // room for no suffix: the temporary file has a short name of its own
    braid::detail::write_files({{"--a", s.dir / "dangling.json", "made through the link"},
                                {"--b", s.dir / "one.json", "both links"},
                                {"--c", s.dir / long_name, "long"}});
    CHECK(fs::is_symlink(s.dir / "dangling.json"));
    CHECK(read(s.dir / "later.json") == "made through the link");
    CHECK(read(s.dir / "two.json") == "both links");
    CHECK(read(s.dir / long_name) == "long");
    const std::size_t before = s.entries();
    if (fs::exists("/dev/full")) {  // a device that is always full: the write fails after the files are ready
        CHECK(error_of([&] {
                  braid::detail::write_files({{"--out", s.dir / "new/plan.json", "plan"}, {"--trace-out", "/dev/full", "x"}});
              }).find("--trace-out: cannot write '/dev/full': ") == 0);
        CHECK(!fs::exists(s.dir / "new"));
        CHECK(s.entries() == before);
    }
}

TEST_CASE("same_file_problem: links to files not there yet clash, devices take several outputs") {
    Scratch s;
    fs::create_symlink("p.json", s.dir / "link.json");
    CHECK(braid::cli::same_file_problem({{"--plan-out", (s.dir / "p.json").string()},
                                         {"--trace-out", (s.dir / "link.json").string()}}) ==
          "--plan-out and --trace-out are the same file ('" + (s.dir / "link.json").string() + "'): give each its own");
    CHECK(braid::cli::same_file_problem({{"--trace-out", "/dev/null"}, {"--svg-out", "/dev/null"}}) == "");
}

TEST_CASE("numbers on the command line are decimal: leading zeros are not octal, hex and nan are refused") {
    const auto read_as = [](std::string text, bool whole) {
        const std::string problem = braid::cli::decimal_problem(text, whole);
        return problem.empty() ? text : problem;
    };
    CHECK(read_as("017", true) == "17");
    CHECK(read_as("000", true) == "0");
    CHECK(read_as("-0", true) == "0");
    CHECK(read_as("-007", true) == "-7");
    CHECK(read_as("0x10", true) == "expected a whole number, got '0x10'");
    CHECK(read_as(" 5", true) == "expected a whole number, got ' 5'");
    CHECK(read_as("1.5", true) == "expected a whole number, got '1.5'");
    CHECK(read_as("1e3", true) == "expected a whole number, got '1e3'");
    CHECK(read_as("2.5e-3", false) == "2.5e-3");
    CHECK(read_as(".5", false) == ".5");
    CHECK(read_as("nan", false) == "expected a number, got 'nan'");
    CHECK(read_as("0x1p3", false) == "expected a number, got '0x1p3'");
    CHECK(read_as("1e", false) == "expected a number, got '1e'");
}

TEST_CASE("output_path_problem sees that missing folders can be made, and leaves none made") {
    Scratch s;
    CHECK(braid::cli::output_path_problem("--out", (s.dir / "a/b/plan.json").string(), true) == "");
    CHECK(!fs::exists(s.dir / "a"));
    std::ofstream(s.dir / "file") << "x";
    const std::string under_file = braid::cli::output_path_problem("--out", (s.dir / "file/a/plan.json").string(), true);
    CHECK(under_file.find("--out: cannot write '" + (s.dir / "file/a/plan.json").string() + "': ") == 0);
    CHECK(under_file.find("cannot make folder '" + (s.dir / "file/a").string() + "'") != std::string::npos);
    // Without makes_folders the folder must be there.
    CHECK(braid::cli::output_path_problem("--out", (s.dir / "a/plan.json").string()) ==
          "--out: cannot write '" + (s.dir / "a/plan.json").string() + "': folder '" + (s.dir / "a").string() +
              "' does not exist");
    CHECK(braid::cli::output_path_problem("--out", s.dir.string()) ==
          "--out: '" + s.dir.string() + "' is a folder; give a file name");
    CHECK(s.entries() == 1);
}
