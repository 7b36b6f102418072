// libFuzzer entry point of the prototxt reader (tools/fuzz/run prototxt):
// the bytes as a prototxt, then what braid-plan does with the net it gives
// (the training graph and its roofline estimate). A braid::Error is the
// expected answer to bad input; anything else escapes, and libFuzzer
// reports it as a crash with the input that caused it.
#include <cstddef>
#include <cstdint>
#include <string>

#include "braid/model/device_table.hpp"
#include "braid/model/estimate.hpp"
#include "caffe/prototxt.hpp"
#include "train/training_graph.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace braid::samples;
    try {
        PrototxtNet net = parse_prototxt(std::string(reinterpret_cast<const char*>(data), size), "fuzz.prototxt");
        const TrainingGraph tg = build_training_graph(std::move(net.network), SgdConfig{}, 1);
        (void)braid::estimate_costs(braid::find_device("h200"), op_estimates(tg));
    } catch (const braid::Error&) {
    }
    return 0;
}
