// The one vocabulary of braid's command-line tools (docs/cli.md): the same
// option name for the same thing in braid-plan, braid-train, braid-profile
// and braid-devices, and old spellings that keep working for one release
// while saying what replaced them.
#pragma once

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>
#include <system_error>
#include <type_traits>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include "braid/detail/write_files.hpp"

namespace braid::cli {

// What --device means in every tool that plans or models a GPU.
inline constexpr const char* device_help =
    "GPU model: a built-in key (braid-devices lists them) or a device JSON file (docs/formats.md)";

// What --calibration means in every tool that predicts a plan's time.
inline constexpr const char* calibration_help =
    "a calibration file (braid-calibrate writes one; docs/calibration.md), or none; default: braid's built-in "
    "calibration for the device when it ships one";

// The largest values the tools take for a bundled net's size and for the
// streams a plan may use: beyond them a step would not fit any GPU, or a
// plan would take minutes to make, instead of a clear refusal.
inline constexpr std::uint32_t max_batch = 1u << 20;
inline constexpr std::uint32_t max_image = 8192;
inline constexpr std::uint32_t max_classes = 1u << 24;
inline constexpr double min_width_scale = 1e-6;
inline constexpr double max_width_scale = 64.0;
inline constexpr std::uint32_t max_streams = 128;

// A finite number that `fits`, else "must be <what>, got 'TEXT'": plain
// words instead of CLI11's range text with DBL_MAX in it, and no NaN or
// infinity slipping past a comparison (CLI::Range lets "nan" through: every
// comparison with NaN is false, so it is never out of range).
inline CLI::Validator finite_number(std::function<bool(double)> fits, const std::string& what, const std::string& name) {
    return CLI::Validator(
        [fits, what](std::string& text) -> std::string {
            try {
                std::size_t used = 0;
                const double v = std::stod(text, &used);
                if (used == text.size() && std::isfinite(v) && fits(v)) return {};
            } catch (const std::exception&) {
            }
            return "must be " + what + ", got '" + text + "'";
        },
        name);
}

inline CLI::Validator at_least(double lowest) {
    return finite_number([lowest](double v) { return v >= lowest; }, fmt::format("a number of at least {}", lowest),
                         fmt::format(">={}", lowest));
}

inline CLI::Validator between(double lowest, double highest) {
    return finite_number([lowest, highest](double v) { return v >= lowest && v <= highest; },
                         fmt::format("a number from {} to {}", lowest, highest),
                         fmt::format("[{} - {}]", lowest, highest));
}

inline CLI::Validator positive() {
    return finite_number([](double v) { return v > 0.0; }, "a positive number", ">0");
}

// A whole number from 0 to 2^64 - 1 written in digits: CLI11 turns "-1"
// and numbers past the top into 18446744073709551615 without a word.
inline CLI::Validator unsigned_64() {
    return CLI::Validator(
        [](std::string& text) -> std::string {
            const bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
            try {
                if (digits) (void)std::stoull(text);
                if (digits) return {};
            } catch (const std::exception&) {
            }
            return "must be a whole number from 0 to 18446744073709551615, got '" + text + "'";
        },
        "UINT64");
}

// 0 or 1, for the benchmarks' switches (`--tf32 1`): CLI11 reads a bool
// from many spellings ("2" among them), which would make a typo a setting.
inline CLI::Validator zero_or_one() {
    return CLI::Validator(
        [](std::string& text) -> std::string {
            return text == "0" || text == "1" ? std::string() : "must be 0 or 1, got '" + text + "'";
        },
        "0|1");
}

// The modes, and the default every tool shares.
inline constexpr const char* default_mode = "graph";

// A bad value of an option, its message naming the option. CLI11 names a
// hidden option (the old spellings below) with an empty string
// (": Value abc not in range"); this error is not one of CLI11's
// validation errors, so its message reaches the user as written, with the
// same exit code.
class OptionError : public CLI::ParseError {
public:
    explicit OptionError(std::string message)
        : CLI::ParseError("ValidationError", std::move(message), CLI::ExitCodes::ValidationError) {}
};

// How the command line spells `option`, hidden or not ("--streams").
inline std::string spelling(const CLI::Option& option) {
    if (!option.get_lnames().empty()) return "--" + option.get_lnames().front();
    if (!option.get_snames().empty()) return "-" + option.get_snames().front();
    return option.get_name(true);
}

// `old_name` (say "--streams") as a hidden spelling of `current_name`
// ("--max-streams"): it sets the same value and prints on stderr that it is
// deprecated. Given together with `current` (the option it replaced), the
// command line is refused. `check`, when given, is the current option's
// check: a value it refuses is refused naming `old_name` (a hidden option
// cannot take CLI11's ->check, whose errors would not name it).
template <class T>
CLI::Option* add_deprecated(CLI::App& app, const std::string& old_name, T& target, const std::string& current_name,
                            const CLI::Option* current, std::optional<CLI::Validator> check = std::nullopt) {
    return app.add_option(old_name, target, "deprecated: use " + current_name)
        ->group("")
        ->each([&app, old_name, current_name, current, check](const std::string& value) {
            if (current->count() > 0)
                throw OptionError(old_name + " is the old spelling of " + current->get_name() + "; give only one of them");
            if (value.empty()) throw OptionError(old_name + ": must not be empty");
            if (check) {
                std::string v = value;
                if (const std::string why = (*check)(v); !why.empty()) throw OptionError(old_name + ": " + why);
            }
            fmt::print(stderr, "{}: {} is deprecated and goes away in the next release; use {} (docs/cli.md)\n",
                       app.get_name(), old_name, current_name);
        });
}

// A number as the tools read it: decimal only. A whole number is digits
// with an optional minus sign, its leading zeros dropped ("017" is 17, not
// CLI11's octal 15); any other number is a decimal fraction with an
// optional exponent ("2.5e-3"). Hex, octal, spaces, "nan" and "inf" are
// refused. Returns "" with `input` rewritten as read, or the error.
inline std::string decimal_problem(std::string& input, bool whole) {
    const auto digits = [&](std::size_t& i) {
        const std::size_t from = i;
        while (i < input.size() && input[i] >= '0' && input[i] <= '9') ++i;
        return i > from;
    };
    std::size_t i = 0;
    const bool negative = !input.empty() && input[0] == '-';
    if (negative || (!whole && !input.empty() && input[0] == '+')) ++i;
    const std::size_t first = i;
    bool ok = digits(i);
    if (whole) {
        if (!ok || i != input.size()) return "expected a whole number, got '" + input + "'";
        const std::size_t lead = std::min(input.find_first_not_of('0', first), input.size() - 1);
        const std::string magnitude = input.substr(lead);
        input = (negative && magnitude != "0" ? "-" : "") + magnitude;
        return "";
    }
    if (i < input.size() && input[i] == '.') {
        ++i;
        ok = digits(i) || ok;
    }
    if (ok && i < input.size() && (input[i] == 'e' || input[i] == 'E')) {
        ++i;
        if (i < input.size() && (input[i] == '+' || input[i] == '-')) ++i;
        ok = digits(i);
    }
    if (!ok || i != input.size()) return "expected a number, got '" + input + "'";
    return "";
}

// Makes every option of `app` that takes a value refuse an empty one
// ("--profile: must not be empty"), so that an unset shell variable
// (`--profile "$P"`) is an error, not the option left out, and no path
// becomes the current folder or the root; and every numeric option read
// its value as decimal (decimal_problem: "--seed 010" is 10, "--iters 1.5"
// an error saying a whole number was expected, not CLI11's "Could not
// convert"). Call it after adding the options.
inline void refuse_empty_values(CLI::App& app) {
    for (CLI::Option* option : app.get_options()) {
        if (option->get_type_size() == 0) continue;
        option->check(CLI::Validator(
            [name = spelling(*option)](std::string& value) {
                if (value.empty()) throw OptionError(name + ": must not be empty");
                return std::string();
            },
            ""));
        const std::string type = option->get_type_name().substr(0, option->get_type_name().find(':'));
        if (type == "INT" || type == "UINT" || type == "FLOAT")
            option->transform(CLI::Validator(
                [name = spelling(*option), whole = type != "FLOAT"](std::string& value) {
                    // Thrown with the name: CLI11 leaves it out for a hidden (deprecated) option.
                    if (const std::string why = value.empty() ? "" : decimal_problem(value, whole); !why.empty())
                        throw OptionError(name + ": " + why);
                    return std::string();
                },
                ""));
    }
}

// CLI::Range's check, with an error that says the rule and the value given:
// "--warmup: expected a whole number from 0 to 100000, got '200000'".
// (CLI11's own says "Value 1e3 not in range 0 to 100000", also of a value
// in range that is not a whole number, and of an empty one; and it lets
// "nan" pass.)
// Numbers are read as decimal_problem reads them. The help text is
// CLI::Range's.
template <class T>
CLI::Validator range(T least, T most) {
    CLI::Validator v = CLI::Range(least, most);
    v.operation([least, most](std::string& given) {
        if (given.empty()) return std::string("must not be empty");
        std::string input = given;
        T value{};
        if (decimal_problem(input, std::is_integral_v<T>).empty() && CLI::detail::lexical_cast(input, value) &&
            value >= least && value <= most)
            return std::string();
        return fmt::format("expected {} from {} to {}, got '{}'", std::is_integral_v<T> ? "a whole number" : "a number",
                           least, most, given);
    });
    return v;
}

// Why `path`, given to `option`, cannot be written, or "" when it can be as
// far as can be told before writing: the path is not a folder, and its
// folder exists and is a writable folder. With `makes_folders` (the writer,
// braid::detail::write_files, creates missing folders) the missing folders
// are made to see that they can be, then removed again, so that a run
// refused later leaves no empty folders behind. Tools ask before work that
// takes long, so that a mistyped output path does not cost a fit or a GPU
// run.
inline std::string output_path_problem(const std::string& option, const std::string& path, bool makes_folders = false) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const std::string cannot = option + ": cannot write '" + path + "': ";
    const fs::path given(path);
    if (fs::is_directory(given, ec) || !given.has_filename() || given.filename() == "." || given.filename() == "..")
        return option + ": '" + path + "' is a folder; give a file name";
    // A stream, device or pipe is written where it is (detail::write_files).
    if (detail::is_process_stream(given)) return "";
    if (fs::exists(given, ec) && !fs::is_regular_file(given, ec))
        return ::access(path.c_str(), W_OK) == 0 ? "" : cannot + "it is not writable";
    fs::path p;
    try {
        p = detail::follow_links(given);
    } catch (const std::exception& e) {
        return cannot + e.what();
    }
    const fs::path folder = p.has_parent_path() ? p.parent_path() : fs::path(".");
    std::vector<fs::path> made;
    if (makes_folders)
        if (const std::string why = detail::make_folders(folder, made); !why.empty()) {
            detail::remove_folders(made);
            return cannot + why;
        }
    std::string problem;
    if (!fs::exists(folder, ec))
        problem = cannot + "folder '" + folder.string() + "' does not exist";
    else if (!fs::is_directory(folder, ec))
        problem = cannot + "'" + folder.string() + "' is not a folder";
    else if (::access(folder.c_str(), W_OK) != 0)
        problem = cannot + "folder '" + folder.string() + "' is not writable";
    detail::remove_folders(made);
    return problem;
}

// Two of `paths` (each a name for people, "--plan-out" or "input 'm.json'",
// and a path) that are one file, as an error naming both; "" when all
// differ. Compared as weakly canonical paths ("out/../p.json" is "p.json"),
// and, where both exist, as files (a hard link is the file it links), after
// following links (also one to a file not there yet); streams, devices and
// pipes are exempt. Writing one output over another, or over an input, loses a file without
// a word.
inline std::string same_file_problem(const std::vector<std::pair<std::string, std::string>>& paths) {
    namespace fs = std::filesystem;
    std::vector<std::pair<fs::path, const std::string*>> seen;  // canonical path, name
    for (const auto& [name, path] : paths) {
        std::error_code ec;
        // Streams, devices and pipes (/dev/null) may take several outputs.
        if (detail::is_process_stream(path) || (fs::exists(path, ec) && !fs::is_regular_file(path, ec))) continue;
        fs::path followed = path;
        try {
            followed = detail::follow_links(path);  // also a link to a file not there yet
        } catch (const std::exception&) {
        }
        fs::path p = fs::weakly_canonical(fs::absolute(followed), ec);
        if (ec) p = fs::absolute(followed).lexically_normal();
        for (const auto& [other, other_name] : seen) {
            std::error_code differs;
            if (other == p || fs::equivalent(other, p, differs))
                return *other_name + " and " + name + " are the same file ('" + path + "'): give each its own";
        }
        seen.emplace_back(std::move(p), &name);
    }
    return "";
}

}  // namespace braid::cli
