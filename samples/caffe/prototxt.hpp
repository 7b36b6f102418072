// Caffe model definitions (NetParameter in protobuf text format, the
// `.prototxt` files of BVLC Caffe and its forks) as braid networks. Both
// the current `layer { type: "Convolution" }` format and the legacy
// `layers { type: CONVOLUTION }` one are read. docs/caffe.md lists the layer
// types and fields, and how each becomes a braid layer.
//
// Built only with the Meson feature `caffe` (protobuf); the tools get
// BRAID_WITH_CAFFE=1 then. This header needs no protobuf.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "braid/error.hpp"
#include "nets/network.hpp"

namespace braid::samples {

// The largest input a file may declare once --batch and --image apply: the
// same limits as the tools' --batch and --image (braid-train asserts it).
inline constexpr std::uint32_t max_input_batch = 1u << 20;
inline constexpr std::uint32_t max_input_side = 8192;

// What the command line puts over the file.
struct PrototxtOptions {
    std::optional<std::uint32_t> batch;    // the input's N
    std::optional<std::uint32_t> image;    // the input's H and W
    std::optional<std::uint32_t> classes;  // num_output of each InnerProduct that feeds a loss
};

struct PrototxtNet {
    Network network;
    // What was not carried over as written, one line each, in file order:
    // skipped layers (TEST phase, Accuracy), fields braid does not read
    // (with a count and the first line), settings braid approximates.
    std::vector<std::string> notes;
};

// A file that cannot be read, parsed or turned into a network. The message
// starts with "FILE:LINE: " and names the layer where there is one.
class PrototxtError : public braid::Error {
public:
    using braid::Error::Error;
};

PrototxtNet read_prototxt(const std::string& path, const PrototxtOptions& options = {});
// `source` names the text in messages (a file name).
PrototxtNet parse_prototxt(const std::string& text, const std::string& source, const PrototxtOptions& options = {});

// For the tools, which are built with or without the reader: read_prototxt,
// or a PrototxtError saying how to get a build that has it.
inline PrototxtNet read_prototxt_if_built(const std::string& path, const PrototxtOptions& options) {
#if BRAID_WITH_CAFFE
    return read_prototxt(path, options);
#else
    (void)options;
    throw PrototxtError("cannot read '" + path +
                        "': this build has no Caffe prototxt reader (install libprotobuf-dev and protobuf-compiler, "
                        "as tools/setup does, and configure again)");
#endif
}

}  // namespace braid::samples
