// braid-fuzz-seeds TARGET DIR: writes the target's seed documents (valid
// files from braid's own writers) into DIR, which must exist.
#include <cstdio>
#include <exception>
#include <fstream>
#include <string>

#include "targets.hpp"

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: braid-fuzz-seeds TARGET DIR\n");
        return 2;
    }
    try {
        for (const braid::fuzz::Seed& s : braid::fuzz::seeds(argv[1])) {
            const std::string path = std::string(argv[2]) + "/seed-" + s.name;
            std::ofstream out(path, std::ios::binary | std::ios::trunc);
            out << s.bytes;
            if (!out) {
                std::fprintf(stderr, "braid-fuzz-seeds: cannot write '%s'\n", path.c_str());
                return 1;
            }
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "braid-fuzz-seeds: %s\n", e.what());
        return 1;
    }
    return 0;
}
