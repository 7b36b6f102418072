// Writing a tool's outputs all or none: a run that fails part way (a full
// disk, a folder that cannot be written) leaves no half-written file and no
// mix of new and old outputs behind.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <string_view>
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
    const fs::path normal = folder.lexically_normal();  // "a/b/../c" is "a/c", as mkdir -p takes it
    for (fs::path f = normal; !f.empty() && f != "." && !fs::exists(f, ec) && f != f.parent_path(); f = f.parent_path())
        missing.insert(missing.begin(), f);
    for (const fs::path& m : missing) {
        if (!fs::create_directory(m, ec))
            return "cannot make folder '" + m.string() + "': " +
                   (ec ? ec.message() : std::string("something that is not a folder is there"));
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

// `path` with every symbolic link at its end followed, also to where a
// link points at nothing yet (which a plain write would create); folders
// above are left as they are. Throws Error on a loop of links.
inline std::filesystem::path follow_links(const std::filesystem::path& path) {
    namespace fs = std::filesystem;
    fs::path p = path;
    for (int hops = 0; hops < 40; ++hops) {
        std::error_code ec;
        if (!fs::is_symlink(p, ec)) return p;
        const fs::path target = fs::read_symlink(p, ec);
        if (ec) return p;
        p = target.is_absolute() ? target : (p.parent_path() / target);
    }
    throw Error("'" + path.string() + "': too many levels of symbolic links");
}

// The process's own streams (/dev/stdout, /proc/self/fd/1): written where
// they are, appended to, never replaced.
inline bool is_process_stream(const std::filesystem::path& path) {
    const std::string p = path.lexically_normal().string();
    for (std::string_view prefix : {"/dev/stdout", "/dev/stderr", "/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/"})
        if (p.rfind(prefix, 0) == 0) return true;
    return false;
}

// One output: `label` starts its errors ("--trace-out", "profile").
struct FileToWrite {
    std::string label;
    std::filesystem::path path;
    std::string text;
};

// Writes all of `text` to `fd`; false with errno set when it cannot.
inline bool write_all(int fd, const std::string& text) {
    std::size_t done = 0;
    while (done < text.size()) {
        const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        done += static_cast<std::size_t>(n);
    }
    return true;
}

// Writes every file or none. Each text goes to a temporary file in its
// destination's folder (so that a reader never sees half of it, and two
// writers do not mix their bytes), which takes the replaced file's
// permissions and owner; only when all are written are they renamed into
// place. Files that are not replaced but written where they are come
// between the two: the process's streams (/dev/stdout) and devices and
// pipes (/dev/null) are appended to, a file with hard links is written
// over so that every link sees the new text. On a failure before the
// renames the temporary files, and the folders made for them, are
// removed, and Error names the output and the reason. A symbolic link is
// written where it points, as a plain write would. (Only a failing
// rename, which the checks before make unlikely, could leave the earlier
// outputs renamed; a device written to cannot be unwritten.)
inline void write_files(const std::vector<FileToWrite>& files) {
    namespace fs = std::filesystem;
    enum class How { replace, in_place, append };
    struct Pending {
        const FileToWrite* file;
        How how;
        fs::path destination;
        fs::path temporary;  // How::replace only
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
        if (!f.path.has_filename() || f.path.filename() == "." || f.path.filename() == "..")
            fail(f, "it names a folder; give a file name");
        if (is_process_stream(f.path)) {
            pending.push_back({&f, How::append, f.path, {}});
            continue;
        }
        fs::path dest;
        try {
            dest = follow_links(f.path);
        } catch (const Error& e) {
            fail(f, e.what());
        }
        struct ::stat old {};
        const bool exists = ::stat(dest.c_str(), &old) == 0;
        if (exists && S_ISDIR(old.st_mode)) fail(f, "it is a folder");
        if (exists && ::access(dest.c_str(), W_OK) != 0) fail(f, std::strerror(errno));
        if (exists && !S_ISREG(old.st_mode)) {
            pending.push_back({&f, How::append, dest, {}});
            continue;
        }
        if (exists && old.st_nlink > 1) {
            pending.push_back({&f, How::in_place, dest, {}});
            continue;
        }
        const fs::path folder = dest.has_parent_path() ? dest.parent_path() : fs::path(".");
        if (dest.has_parent_path())
            if (const std::string why = make_folders(folder, made_folders); !why.empty()) fail(f, why);
        // A short name of its own: a destination name near the 255-byte limit still has room beside it.
        int fd = -1;
        fs::path tmp;
        for (int attempt = 0; fd < 0 && attempt < 100; ++attempt) {
            tmp = folder / (".braid-" + std::to_string(std::random_device{}() % 100000000u) + ".tmp");
            fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
            if (fd < 0 && errno != EEXIST) break;
        }
        if (fd < 0) fail(f, std::strerror(errno));
        pending.push_back({&f, How::replace, dest, tmp});
        if (exists) {  // the replaced file's mode before any byte is written, and its owner where allowed
            (void)::fchmod(fd, old.st_mode & 07777);
            (void)::fchown(fd, old.st_uid, old.st_gid);
        }
        const bool written = write_all(fd, f.text);
        const int write_errno = errno;
        if (::close(fd) != 0 || !written) fail(f, std::strerror(written ? errno : write_errno));
    }
    for (const Pending& p : pending) {
        if (p.how == How::replace) continue;
        const int fd = ::open(p.destination.c_str(),
                              O_WRONLY | O_CLOEXEC | (p.how == How::append ? O_APPEND : O_TRUNC));
        if (fd < 0) fail(*p.file, std::strerror(errno));
        const bool written = write_all(fd, p.file->text);
        const int write_errno = errno;
        if (::close(fd) != 0 || !written) fail(*p.file, std::strerror(written ? errno : write_errno));
    }
    for (const Pending& p : pending) {
        if (p.how != How::replace) continue;
        std::error_code ec;
        fs::rename(p.temporary, p.destination, ec);
        if (ec) fail(*p.file, ec.message());
    }
}

inline void write_file(const std::string& label, const std::filesystem::path& path, const std::string& text) {
    write_files({{label, path, text}});
}

}  // namespace braid::detail
