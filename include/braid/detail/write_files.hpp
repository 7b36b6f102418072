// Writing a tool's outputs all or none: a run that fails part way (a full
// disk, a folder that cannot be written) leaves no half-written file and no
// mix of new and old outputs behind.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <system_error>
#include <vector>

#include "braid/error.hpp"

namespace braid::detail {

// Makes `folder` and the folders above it that are missing, outermost
// first, adding each to `made`. Returns "" or why one could not be made.
inline std::string make_folders(const std::filesystem::path& folder, std::vector<std::filesystem::path>& made) {
    namespace fs = std::filesystem;
    std::error_code ec;
    std::vector<fs::path> missing;
    for (fs::path f = folder; !f.empty() && !fs::exists(f, ec) && f != f.parent_path(); f = f.parent_path())
        missing.insert(missing.begin(), f);
    for (const fs::path& m : missing) {
        if (!fs::create_directory(m, ec))
            return "cannot make folder '" + m.string() + "': " + (ec ? ec.message() : std::string("something else is there"));
        made.push_back(m);
    }
    return "";
}

// Removes the folders make_folders made, innermost first; those no longer
// empty stay.
inline void remove_folders(std::vector<std::filesystem::path>& made) {
    std::error_code ignored;
    for (auto it = made.rbegin(); it != made.rend(); ++it) std::filesystem::remove(*it, ignored);
    made.clear();
}

// One output: `label` starts its errors ("--trace-out", "profile").
struct FileToWrite {
    std::string label;
    std::filesystem::path path;
    std::string text;
};

// Writes every file or none. Each text goes to a temporary file beside its
// destination (so that a reader never sees half of it, and two writers do
// not mix their bytes); only when all are written are they renamed into
// place. On a failure the temporary files, and the folders made for them,
// are removed, and Error names the output and the reason. A destination
// that is a symbolic link is written where the link points, as a plain
// write would; an existing file that may not be written is refused, as a
// plain write would refuse it; a device or a pipe (/dev/null, /dev/stdout)
// is written directly, after the others. (Once the renames start, only a
// failing rename, which the checks before make unlikely, or a failing
// device could leave the earlier outputs in place.)
inline void write_files(const std::vector<FileToWrite>& files) {
    namespace fs = std::filesystem;
    struct Pending {
        const FileToWrite* file;
        fs::path temporary;  // empty: written directly
        fs::path destination;
    };
    std::vector<fs::path> made_folders;
    std::vector<Pending> pending;
    const auto fail = [&](const FileToWrite& f, const std::string& why) {
        std::error_code ignored;
        for (const Pending& p : pending)
            if (!p.temporary.empty()) fs::remove(p.temporary, ignored);
        remove_folders(made_folders);
        throw Error(f.label + ": cannot write '" + f.path.string() + "': " + why);
    };
    for (const FileToWrite& f : files) {
        std::error_code ec;
        const fs::file_status now = fs::status(f.path, ec);  // through links
        if (fs::is_directory(now)) fail(f, "it is a folder");
        if (fs::exists(now) && ::access(f.path.c_str(), W_OK) != 0) fail(f, std::strerror(errno));
        if (fs::exists(now) && !fs::is_regular_file(now)) {
            pending.push_back({&f, {}, f.path});
            continue;
        }
        fs::path dest = f.path;
        if (std::error_code absent; fs::is_symlink(f.path, absent)) {
            dest = fs::weakly_canonical(f.path, ec);
            if (ec) fail(f, "cannot follow the link: " + ec.message());
        }
        if (dest.has_parent_path())
            if (const std::string why = make_folders(dest.parent_path(), made_folders); !why.empty()) fail(f, why);
        const fs::path tmp = dest.string() + ".tmp" + std::to_string(std::random_device{}());
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) fail(f, std::strerror(errno));
        pending.push_back({&f, tmp, dest});
        out << f.text;
        out.close();
        if (!out) fail(f, "writing failed (is the disk full?)");
        if (fs::exists(now)) fs::permissions(tmp, now.permissions(), ec);  // a file written over keeps its permissions
    }
    for (const Pending& p : pending) {
        if (p.temporary.empty()) continue;
        std::error_code ec;
        fs::rename(p.temporary, p.destination, ec);
        if (ec) fail(*p.file, ec.message());
    }
    for (const Pending& p : pending) {
        if (!p.temporary.empty()) continue;
        std::ofstream out(p.destination, std::ios::binary);
        out << p.file->text;
        out.flush();
        if (!out) fail(*p.file, "writing failed");
    }
}

inline void write_file(const std::string& label, const std::filesystem::path& path, const std::string& text) {
    write_files({{label, path, text}});
}

}  // namespace braid::detail
