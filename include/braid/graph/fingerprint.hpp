// A stable 64-bit FNV-1a hash of what makes a graph the graph it is: op
// names, kinds and split markers, and its edges. Same input, same string, on
// every platform and run.
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <string_view>

#include "braid/graph/op.hpp"

namespace braid {

class Fnv1a64 {
public:
    void add(std::string_view bytes) noexcept {
        for (unsigned char c : bytes) {
            hash_ ^= c;
            hash_ *= 0x100000001b3ull;
        }
    }
    void add(std::uint64_t value) noexcept {
        for (int i = 0; i < 8; ++i) {
            hash_ ^= (value >> (8 * i)) & 0xffu;
            hash_ *= 0x100000001b3ull;
        }
    }
    std::uint64_t value() const noexcept { return hash_; }
    std::string hex() const {
        char buf[17];
        std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(hash_));
        return buf;
    }

private:
    std::uint64_t hash_ = 0xcbf29ce484222325ull;
};

// `edges` sorted by (from, to).
inline std::string graph_fingerprint(std::span<const Op> ops, std::span<const Edge> edges) {
    Fnv1a64 h;
    h.add(std::uint64_t{ops.size()});
    for (const Op& op : ops) {
        h.add(op.name);
        h.add(std::uint64_t{0xff});  // separator: names cannot run into each other
        h.add(to_string(op.kind));
        h.add(std::uint64_t{op.split_batch});
    }
    h.add(std::uint64_t{edges.size()});
    for (const Edge& e : edges) h.add((std::uint64_t{e.from} << 32) | e.to);
    return "fnv1a64:" + h.hex();
}

}  // namespace braid
