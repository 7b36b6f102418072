// The vocabulary of an op graph: buffers (or byte ranges of them) and the ops
// that read and write them. Plain values; OpGraph owns them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "braid/error.hpp"

namespace braid {

using OpId = std::uint32_t;
using BufferId = std::uint32_t;

// What part of a training step an op is. The braid strategy treats
// backward_weight and update ops as fillers for idle SMs.
enum class OpKind : std::uint8_t {
    forward,
    backward_data,
    backward_weight,
    update,
    communication,
    other,
};

inline constexpr OpKind all_op_kinds[] = {OpKind::forward,         OpKind::backward_data,
                                          OpKind::backward_weight, OpKind::update,
                                          OpKind::communication,   OpKind::other};

constexpr std::string_view to_string(OpKind kind) noexcept {
    switch (kind) {
        case OpKind::forward: return "forward";
        case OpKind::backward_data: return "backward_data";
        case OpKind::backward_weight: return "backward_weight";
        case OpKind::update: return "update";
        case OpKind::communication: return "communication";
        case OpKind::other: return "other";
    }
    return "other";
}

inline std::optional<OpKind> op_kind_from_string(std::string_view text) noexcept {
    for (OpKind k : all_op_kinds)
        if (to_string(k) == text) return k;
    return std::nullopt;
}

// A named allocation, or a view of a parent buffer: the byte range
// [offset_bytes, offset_bytes + bytes), or — for a strided view — `chunks`
// such ranges, `stride_bytes` apart (a channel slice of an NCHW tensor is one
// range per image). Views of contiguous views are allowed; hazards are
// computed on the root buffer's bytes.
struct Buffer {
    BufferId id = 0;
    std::string name;
    std::uint64_t bytes = 0;  // per chunk
    std::optional<BufferId> parent;
    std::uint64_t offset_bytes = 0;  // of the first chunk, within the parent
    std::uint64_t chunks = 1;
    std::uint64_t stride_bytes = 0;  // between chunk starts (when chunks > 1)

    std::uint64_t total_bytes() const noexcept { return bytes * chunks; }

    // Filled by the builder: the root allocation and the offset in it.
    BufferId root = 0;
    std::uint64_t root_offset_bytes = 0;

    friend bool operator==(const Buffer&, const Buffer&) = default;
};

// What a user declares to add an op. Dependencies come from `reads` and
// `writes`; nothing else is needed for correctness.
struct OpSpec {
    std::string name;
    OpKind kind = OpKind::other;
    std::string layer;  // the layer this op belongs to ("" = none)
    std::vector<BufferId> reads;
    std::vector<BufferId> writes;
    // > 0 marks the op as splittable over a batch of this many images: its
    // work on image i touches only image i's slices of its buffers.
    std::uint32_t split_batch = 0;
};

struct Op {
    OpId id = 0;
    std::string name;
    OpKind kind = OpKind::other;
    std::string layer;
    std::vector<BufferId> reads;
    std::vector<BufferId> writes;
    std::uint32_t split_batch = 0;

    bool splittable() const noexcept { return split_batch > 1; }

    friend bool operator==(const Op&, const Op&) = default;
};

// Why an edge exists. An edge may have several reasons.
enum HazardBits : std::uint8_t {
    hazard_raw = 1,       // read after write
    hazard_war = 2,       // write after read
    hazard_waw = 4,       // write after write
    hazard_explicit = 8,  // declared by the user
};

struct Edge {
    OpId from = 0;
    OpId to = 0;
    std::uint8_t hazards = 0;  // HazardBits

    friend bool operator==(const Edge&, const Edge&) = default;
};

inline std::string hazard_names(std::uint8_t hazards) {
    std::string out;
    auto add = [&](std::uint8_t bit, const char* name) {
        if (!(hazards & bit)) return;
        if (!out.empty()) out += '+';
        out += name;
    };
    add(hazard_raw, "read-after-write");
    add(hazard_war, "write-after-read");
    add(hazard_waw, "write-after-write");
    add(hazard_explicit, "explicit");
    return out;
}

}  // namespace braid
