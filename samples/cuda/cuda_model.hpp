// A training graph's device memory and CUDA op bodies, parallel to
// HostModel: one cudaMalloc per root buffer (views point into their root, a
// concat branch writes its channel slice in place), parameters initialized
// to HostModel's bits, and a body per op that runs the CUDA layers
// (cuda/layers.hpp) on exactly the buffers the op declares, for the image
// range it is given, on the lane's stream with the lane's handles,
// workspaces and scratch. Bodies are Executor<CudaBackend> bodies:
//
//   CudaModel model(tg, options);
//   braid::CudaBackend backend;
//   backend.reserve_scratch(model.scratch_bytes());
//   braid::Executor<braid::CudaBackend> executor(tg.graph, plan, backend, model.bodies());
//   executor.run();  // one iteration
//
// Host-side reads (values, loss, snapshots) synchronize the device first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "braid/cuda/backend.hpp"
#include "braid/plan/plan.hpp"
#include "cuda/layers.hpp"
#include "train/host_model.hpp"
#include "train/split_granule.hpp"
#include "train/training_graph.hpp"
#include "train/weights.hpp"

namespace braid::samples {

using CudaBody = std::function<void(braid::CudaLane&, const braid::OpContext&)>;

struct CudaModelOptions {
    // layers.layout = nhwc keeps every activation (and gradient) channels
    // last and every convolution filter KRSC; for networks that
    // channels_last_unfit accepts.
    cuda::LayerOptions layers;
};

// Why `net` cannot run with NHWC activations, naming the first layer that
// cannot ("" when it can): a concat whose input is written by a layer that
// cannot write an NHWC channel slice (pixels the concat's channel count
// apart: batch norm, ReLU and add can, a pool can as its output, a
// convolution cannot; a plain add only when the layers writing its inputs
// can read the slice as their gradient, which a max pool cannot), or a
// softmax loss over logits of more than one pixel (its classes would be
// NHWC-ordered). Everything else takes NHWC:
// biased convolutions, LRN, fully connected layers over many pixels
// (through an NCHW copy of their features) and dropouts (each element
// keeps its NCHW mask bit).
std::string channels_last_unfit(const Network& net);

class CudaModel {
public:
    // Keeps a reference: `graph` must outlive the model. Uses the current
    // device; allocates and initializes.
    explicit CudaModel(const TrainingGraph& graph, CudaModelOptions options = {});
    ~CudaModel();
    CudaModel(const CudaModel&) = delete;  // bodies point into this model
    CudaModel& operator=(const CudaModel&) = delete;

    const TrainingGraph& graph() const noexcept { return graph_; }
    const CudaModelOptions& options() const noexcept { return options_; }

    // HostModel::initialize's values (generated on the host by the same
    // code, then copied; filters transposed to KRSC with layout nhwc):
    // parameters from the seed, momentum 0, running mean 0, running
    // variance 1, step 0; every other buffer 0. Synchronous.
    void initialize();

    // Op bodies indexed by OpId; splittable ones touch only images
    // [batch_begin, batch_end) (the whole batch when both are 0).
    const std::vector<CudaBody>& bodies() const noexcept { return bodies_; }

    // The most lane scratch one body takes (CudaBackend::reserve_scratch it
    // before capturing a CUDA graph).
    std::size_t scratch_bytes() const noexcept { return scratch_bytes_; }

    // Device address of the first byte of buffer b.
    std::byte* bytes(BufferId b) const;
    template <class T>
    T* data(BufferId b) const {
        return reinterpret_cast<T*>(bytes(b));
    }
    // An f32 buffer as a view of device memory (NCHW, or NHWC with layout nhwc).
    TensorView<float> tensor(BufferId b) const;
    // A float buffer's values on the host as they lie on the device (a
    // strided view's images gathered; NHWC with layout nhwc).
    std::vector<float> values(BufferId b) const;
    // Raw bytes of a buffer that is not a strided view.
    std::vector<std::byte> download(BufferId b) const;
    void upload(BufferId b, const void* host, std::size_t bytes);

    // By OpId: the engine family of the convolution pass an op runs, as its
    // layer chose it in the calls made so far (CudaConv::engine_family);
    // `other` for ops that run none or have not run. What planning_model
    // takes, after one iteration has chosen every pass's algorithm.
    std::vector<braid::ConvEngineFamily> conv_engines() const;

    // Layer l's batch norm (its kernels, what cuDNN declined); null for another layer.
    const cuda::CudaBatchNorm* batch_norm(LayerId l) const { return bns_.at(l).get(); }

    std::uint64_t step() const;
    // The last iteration's loss: the loss layers' weighted losses summed.
    double loss() const;
    std::vector<std::pair<std::string, double>> losses() const;

private:
    CudaBody make_body(OpId op);

    const TrainingGraph& graph_;
    CudaModelOptions options_;
    std::vector<braid::cuda::DeviceBuffer> roots_;  // by root BufferId; empty for views
    std::vector<std::unique_ptr<cuda::CudaConv>> convs_;  // by LayerId
    std::vector<std::unique_ptr<cuda::CudaFullyConnected>> fcs_;
    std::vector<std::unique_ptr<cuda::CudaPool>> pools_;
    std::vector<std::unique_ptr<cuda::CudaLrn>> lrns_;
    std::vector<std::unique_ptr<cuda::CudaBatchNorm>> bns_;
    std::vector<CudaBody> bodies_;
    std::size_t scratch_bytes_ = 0;
};

// Parameters and state in the reference's layouts: with layout nhwc the
// KRSC filters and their momenta come back KCRS, so snapshots of either
// layout compare with each other and with HostModel's.
WeightSnapshot snapshot_weights(const CudaModel& model);
WeightComparison compare_weights(const CudaModel& a, const CudaModel& b);
WeightComparison compare_weights(const CudaModel& a, const HostModel& b);
ToleranceComparison compare_weights_within(const CudaModel& a, const HostModel& reference, double relative,
                                           double absolute);

}  // namespace braid::samples
