// A training graph's memory and CPU op bodies: one host allocation per root
// buffer (views point into their root), parameters initialized from the
// seed, and a body per op that runs the reference CPU layers on exactly the
// buffers the op declares, for the image range it is given.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "train/serial_runner.hpp"
#include "train/training_graph.hpp"

namespace braid::samples {

class HostModel {
public:
    // Keeps a reference: `graph` must outlive the model. Allocates and
    // initializes (initialize()).
    explicit HostModel(const TrainingGraph& graph);
    ~HostModel();
    HostModel(const HostModel&) = delete;  // bodies point into this model
    HostModel& operator=(const HostModel&) = delete;

    const TrainingGraph& graph() const noexcept { return graph_; }

    // Parameters from the seed as each ParamSpec says: uniform ones draw
    // element e of the parameter tensor with global ordinal o (layers in
    // order, their tensors in order) as (2 * uniform01(counter_hash(seed,
    // stream_tag(parameter_init, o), 0, e)) - 1) * bound. Momentum 0,
    // running mean 0, running variance 1, step 0.
    void initialize();

    // Op bodies indexed by OpId. An op that is not splittable ignores the
    // range; a splittable one touches only images [batch_begin, batch_end)
    // (the whole batch when both are 0).
    const std::vector<HostBody>& bodies() const noexcept { return bodies_; }

    // One iteration with the serial runner.
    void run_serial_iteration(const SerialRunOptions& options = {});

    // The first byte of buffer b (for a strided view, of its first chunk).
    std::byte* bytes(BufferId b) const;
    template <class T>
    T* data(BufferId b) const {
        return reinterpret_cast<T*>(bytes(b));
    }
    // An f32 buffer as an NCHW view (strided views keep their image stride).
    TensorView<float> tensor(BufferId b) const;
    // Values of a buffer that is not a strided view, as floats.
    std::vector<float> values(BufferId b) const;

    std::uint64_t step() const { return *data<std::uint64_t>(graph_.step); }
    // The loss of the last iteration: the loss layers' weighted losses summed.
    double loss() const;
    // Each loss layer's weighted loss, by layer name.
    std::vector<std::pair<std::string, double>> losses() const;

private:
    HostBody make_body(OpId op);

    struct FreeBytes {
        void operator()(std::byte* p) const noexcept;
    };
    const TrainingGraph& graph_;
    std::vector<std::unique_ptr<std::byte[], FreeBytes>> roots_;  // by root BufferId; null for views
    std::vector<HostBody> bodies_;
};

// Every parameter and state buffer (weights, momentum, running statistics,
// step) of two models of the same graph, compared bit for bit.
struct WeightComparison {
    bool identical = true;
    std::string tensor;  // the first buffer that differs
    std::uint64_t index = 0;
    double first = 0.0, second = 0.0;
    std::size_t tensors_compared = 0;

    // "bitwise identical (N tensors)" or "first difference: tensor 'x' index i: a vs b".
    std::string describe() const;
};
// Throws braid::Error when the models belong to different graphs.
WeightComparison compare_weights(const HostModel& a, const HostModel& b);

// A compared value as the comparisons print it: 9 significant digits, enough
// to tell any two floats apart.
std::string format_compared_value(double v);

}  // namespace braid::samples
