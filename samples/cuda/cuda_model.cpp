#include "cuda/cuda_model.hpp"

#include <algorithm>
#include <cstring>

#include "braid/cuda/error.hpp"
#include "train/initial_values.hpp"
#include "train/op_binding.hpp"

namespace braid::samples {

namespace {

void synchronize() { braid::cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }

// Filter shape of a convolution: K images of C/groups x R x S.
Shape4 filter_shape(const Conv2d& c) {
    return {c.config.out_channels, c.in.c / c.config.groups, c.config.kernel.h, c.config.kernel.w};
}

// Why input tensor t of a concat cannot be an NHWC channel slice of its
// buffer: the layer writing it (the only other layer that touches it,
// NetworkBuilder makes sure) must write it, and read its gradient, with
// pixels a stride apart. Batch norm, ReLU and add walk rows of pixels; a
// pool writes its output and reads its gradient with a pixel stride; a
// convolution cannot. A plain add (no fused ReLU) passes its output's
// gradient on as its inputs' (TrainingGraph aliases them), so the layers
// writing its inputs must read that slice as their gradient too; a max
// pool cannot, as its output then stays whole and its kernels read y and
// dy with one pixel stride.
std::string slice_unfit(const Network& net, TensorId t, bool gradient_only = false) {
    const TensorInfo& info = net.tensor(t);
    if (!info.producer)  // the images: written by no layer; they get no gradient
        return gradient_only ? "" : "reads the images, which cannot be a channel slice";
    const LayerNode& writer = net.layer(*info.producer);
    const LayerKind k = kind_of(writer.spec);
    if (k == LayerKind::batch_norm || k == LayerKind::relu || k == LayerKind::avg_pool) return "";
    if (k == LayerKind::max_pool) {
        if (!gradient_only) return "";
        return "max_pool '" + writer.name +
               "' cannot read an NHWC channel slice as its gradient beside its whole output (its kernels read "
               "both with one pixel stride)";
    }
    if (const auto* sum = std::get_if<Add>(&writer.spec)) {
        if (sum->relu) return "";  // a fused ReLU masks the gradient into a buffer of its own
        for (const TensorId in : writer.inputs)
            if (std::string why = slice_unfit(net, in, true); !why.empty())
                return "reads '" + info.name + "' from add '" + writer.name +
                       "', which passes its gradient, a channel slice, on to its inputs: " + why;
        return "";
    }
    const std::string layer = std::string(to_string(k)) + " '" + writer.name + "'";
    return gradient_only ? layer + " cannot read an NHWC channel slice as its gradient"
                         : "reads '" + info.name + "' from " + layer + ", which cannot write an NHWC channel slice";
}

}  // namespace

std::string channels_last_unfit(const Network& net) {
    for (const LayerNode& node : net.layers()) {
        // Its classes are an image's floats in memory order: NHWC would give a
        // label another class than NCHW and the reference do.
        if (const auto* loss = std::get_if<SoftmaxCrossEntropy>(&node.spec); loss && loss->in.plane_elements() > 1)
            return "softmax_loss '" + node.name + "' reads logits of " + std::to_string(loss->in.h) + "x" +
                   std::to_string(loss->in.w) + " pixels, whose classes NHWC would store in another order";
        if (!std::holds_alternative<Concat>(node.spec)) continue;
        for (const TensorId t : node.inputs)
            if (const std::string why = slice_unfit(net, t); !why.empty())
                return std::string(to_string(kind_of(node.spec))) + " '" + node.name + "' " + why;
    }
    return "";
}

CudaModel::CudaModel(const TrainingGraph& graph, CudaModelOptions options) : graph_(graph), options_(options) {
    if (options_.layers.layout == cuda::TensorLayout::nhwc)
        if (const std::string why = channels_last_unfit(graph_.network); !why.empty())
            throw braid::Error("NHWC activations: " + why + "; run this network in NCHW");
    const auto buffers = graph_.graph.buffers();
    roots_.resize(buffers.size());
    for (const braid::Buffer& b : buffers)
        if (!b.parent) roots_[b.id] = braid::cuda::DeviceBuffer(std::max<std::size_t>(b.bytes, 1));

    const std::size_t layers = graph_.network.layers().size();
    convs_.resize(layers);
    fcs_.resize(layers);
    pools_.resize(layers);
    lrns_.resize(layers);
    bns_.resize(layers);
    for (LayerId l = 0; l < layers; ++l) {
        const LayerNode& node = graph_.network.layer(l);
        const cuda::LayerOptions& o = options_.layers;
        if (const auto* c = std::get_if<Conv2d>(&node.spec)) {
            convs_[l] = std::make_unique<cuda::CudaConv>(node.name, *c, o);
            scratch_bytes_ = std::max(scratch_bytes_, convs_[l]->scratch_bytes());
        } else if (const auto* f = std::get_if<FullyConnected>(&node.spec)) {
            fcs_[l] = std::make_unique<cuda::CudaFullyConnected>(node.name, *f, o);
            scratch_bytes_ = std::max(scratch_bytes_, fcs_[l]->scratch_bytes());
        } else if (const auto* p = std::get_if<Pool2d>(&node.spec)) {
            pools_[l] = std::make_unique<cuda::CudaPool>(node.name, *p, o);
            scratch_bytes_ = std::max(scratch_bytes_, pools_[l]->scratch_bytes());
        } else if (const auto* n = std::get_if<Lrn>(&node.spec)) {
            lrns_[l] = std::make_unique<cuda::CudaLrn>(node.name, *n, o);
        } else if (const auto* bn = std::get_if<BatchNorm2d>(&node.spec)) {
            bns_[l] = std::make_unique<cuda::CudaBatchNorm>(node.name, *bn, o);
            scratch_bytes_ = std::max(scratch_bytes_, bns_[l]->scratch_bytes());
        }
    }
    initialize();
    bodies_.reserve(graph_.ops.size());
    for (OpId id = 0; id < graph_.ops.size(); ++id) bodies_.push_back(make_body(id));
}

CudaModel::~CudaModel() {
    // Work queued on any stream may still use the buffers.
    braid::cuda::check_noexcept(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

std::byte* CudaModel::bytes(BufferId b) const {
    const braid::Buffer& buf = graph_.graph.buffer(b);
    return static_cast<std::byte*>(roots_.at(buf.root).get()) + buf.root_offset_bytes;
}

TensorView<float> CudaModel::tensor(BufferId b) const {
    auto* base = static_cast<std::byte*>(roots_.at(graph_.graph.buffer(b).root).get());
    return buffer_view(graph_, b, base, options_.layers.layout == cuda::TensorLayout::nhwc);
}

void CudaModel::initialize() {
    synchronize();
    for (const braid::Buffer& b : graph_.graph.buffers())
        if (!b.parent) braid::cuda::check(cudaMemset(roots_[b.id].get(), 0, roots_[b.id].bytes()), "cudaMemset");
    std::uint64_t ordinal = 0;
    std::vector<float> host;
    for (LayerId l = 0; l < graph_.network.layers().size(); ++l) {
        const LayerSpec& spec = graph_.network.layer(l).spec;
        const LayerBuffers& lb = graph_.layers[l];
        const std::vector<ParamSpec> params = parameters_of(spec);
        const auto* conv = std::get_if<Conv2d>(&spec);
        for (std::size_t i = 0; i < params.size(); ++i, ++ordinal) {
            host.resize(params[i].elements());
            fill_initial_parameter(params[i], graph_.seed, ordinal, host.data());
            if (conv != nullptr && i == 0 && options_.layers.layout == cuda::TensorLayout::nhwc)
                host = transposed(std::span<const float>(host), filter_shape(*conv), true);
            upload(lb.params[i], host.data(), host.size() * sizeof(float));
        }
        const std::vector<AuxBufferSpec> aux = aux_buffers_of(spec);
        for (std::size_t i = 0; i < aux.size(); ++i) {
            if (aux[i].init != InitRule::ones) continue;
            host.resize(aux[i].elements());
            fill_initial_aux(aux[i], host.data());
            upload(lb.aux[i], host.data(), host.size() * sizeof(float));
        }
    }
    synchronize();
}

void CudaModel::upload(BufferId b, const void* host, std::size_t n) {
    const braid::Buffer& buf = graph_.graph.buffer(b);
    if (buf.chunks > 1 || n > buf.bytes)
        throw braid::Error("CudaModel::upload: " + std::to_string(n) + " bytes do not fit buffer '" + buf.name + "'" +
                           (buf.chunks > 1 ? " (a strided view)" : ""));
    braid::cuda::check(cudaMemcpy(bytes(b), host, n, cudaMemcpyHostToDevice), "cudaMemcpy(upload)");
}

std::vector<std::byte> CudaModel::download(BufferId b) const {
    const braid::Buffer& buf = graph_.graph.buffer(b);
    if (buf.chunks > 1) throw braid::Error("CudaModel::download: buffer '" + buf.name + "' is a strided view");
    synchronize();
    std::vector<std::byte> out(buf.bytes);
    braid::cuda::check(cudaMemcpy(out.data(), bytes(b), buf.bytes, cudaMemcpyDeviceToHost), "cudaMemcpy(download)");
    return out;
}

std::vector<float> CudaModel::values(BufferId b) const {
    const braid::Buffer& buf = graph_.graph.buffer(b);
    synchronize();
    if (const TensorView<float> v = tensor(b); v.pixel_stride != 0) {  // an NHWC slice: rows of its channels
        const Shape4& s = v.shape;
        std::vector<float> out(s.elements());
        braid::cuda::check(cudaMemcpy2D(out.data(), s.c * sizeof(float), v.data, v.pixel_stride * sizeof(float),
                                        s.c * sizeof(float), std::uint64_t{s.n} * s.plane_elements(),
                                        cudaMemcpyDeviceToHost),
                           "cudaMemcpy2D(values)");
        return out;
    }
    if (buf.chunks <= 1) {
        std::vector<float> out(buf.bytes / sizeof(float));
        braid::cuda::check(cudaMemcpy(out.data(), bytes(b), out.size() * sizeof(float), cudaMemcpyDeviceToHost),
                           "cudaMemcpy(values)");
        return out;
    }
    const std::uint64_t chunk = buf.bytes;  // a strided view's bytes are per chunk
    std::vector<float> out(buf.total_bytes() / sizeof(float));
    braid::cuda::check(cudaMemcpy2D(out.data(), chunk, bytes(b), buf.stride_bytes, chunk, buf.chunks,
                                    cudaMemcpyDeviceToHost),
                       "cudaMemcpy2D(values)");
    return out;
}

std::uint64_t CudaModel::step() const {
    const std::vector<std::byte> raw = download(graph_.step);
    std::uint64_t s = 0;
    std::memcpy(&s, raw.data(), sizeof(s));
    return s;
}

double CudaModel::loss() const {
    double total = 0.0;
    for (const auto& [name, value] : losses()) total += value;
    return total;
}

std::vector<std::pair<std::string, double>> CudaModel::losses() const {
    std::vector<std::pair<std::string, double>> out;
    for (LayerId l : graph_.network.loss_layers()) {
        const std::vector<std::byte> raw = download(graph_.layers[l].aux[SoftmaxCrossEntropy::loss]);
        float v = 0.0f;
        std::memcpy(&v, raw.data(), sizeof(v));
        out.emplace_back(graph_.network.layer(l).name, static_cast<double>(v));
    }
    return out;
}

std::vector<braid::ConvEngineFamily> CudaModel::conv_engines() const {
    std::vector<braid::ConvEngineFamily> out(graph_.ops.size(), braid::ConvEngineFamily::other);
    for (std::size_t i = 0; i < out.size(); ++i) {
        const OpInfo& info = graph_.ops[i];
        const cuda::CudaConv* conv = info.layer ? convs_.at(*info.layer).get() : nullptr;
        if (!conv) continue;
        std::optional<braid::ConvEngineFamily> f;
        if (info.role == OpRole::forward) f = conv->engine_family(cuda::ConvPass::forward);
        if (info.role == OpRole::backward_data) f = conv->engine_family(cuda::ConvPass::backward_data);
        if (info.role == OpRole::backward_weight) f = conv->engine_family(cuda::ConvPass::backward_filter);
        out[i] = f.value_or(braid::ConvEngineFamily::other);
    }
    return out;
}

CudaBody CudaModel::make_body(OpId id) {
    const std::uint32_t batch = graph_.batch();
    const BoundOp op = bind_op(
        graph_, id, [this](BufferId root) { return static_cast<std::byte*>(roots_.at(root).get()); },
        options_.layers.layout == cuda::TensorLayout::nhwc);
    using Lane = braid::CudaLane;
    using Ctx = braid::OpContext;
    // The layers with library state (descriptors, algorithm choices) are this model's objects.
    const LayerId l = op.layer.value_or(0);
    cuda::CudaConv* conv = op.layer ? convs_[l].get() : nullptr;
    cuda::CudaFullyConnected* fc = op.layer ? fcs_[l].get() : nullptr;
    cuda::CudaPool* pool = op.layer ? pools_[l].get() : nullptr;
    cuda::CudaLrn* lrn = op.layer ? lrns_[l].get() : nullptr;
    cuda::CudaBatchNorm* bn = op.layer ? bns_[l].get() : nullptr;
    const cuda::TensorLayout layout = options_.layers.layout;
    return std::visit(
        Overloaded{
            [=](const bound::Data& a) -> CudaBody {
                return [=](Lane& lane, const Ctx& ctx) {
                    cuda::synthetic_batch(lane, a.seed, a.classes, a.data_batches, a.step, a.images, a.labels,
                                          op_images(ctx, batch), layout);
                };
            },
            [](const bound::AdvanceStep& a) -> CudaBody {
                return [=](Lane& lane, const Ctx&) { cuda::advance_step(lane, a.step); };
            },
            [=](const bound::GradientSum& a) -> CudaBody {
                return [=](Lane& lane, const Ctx& ctx) {
                    cuda::gradient_sum(lane, a.partials, a.total, op_images(ctx, batch));
                };
            },
            [](const bound::Update& a) -> CudaBody {
                return [=](Lane& lane, const Ctx&) { cuda::sgd_momentum_update(lane, a.sgd, a.tensors); };
            },
            [=](const bound::ConvForward& a) -> CudaBody {
                return [=](Lane& lane, const Ctx& ctx) {
                    conv->forward(lane, a.x, a.weight, a.bias, a.y, op_images(ctx, batch));
                };
            },
            [=](const bound::ConvBackwardData& a) -> CudaBody {
                return [=](Lane& lane, const Ctx& ctx) {
                    conv->backward_data(lane, a.dy, a.weight, a.dx, op_images(ctx, batch));
                };
            },
            [=](const bound::ConvBackwardWeight& a) -> CudaBody {
                return [=](Lane& lane, const Ctx&) { conv->backward_weight(lane, a.x, a.dy, a.dweight, a.dbias); };
            },
            [=](const bound::FcForward& a) -> CudaBody {
                return [=](Lane& lane, const Ctx& ctx) {
                    fc->forward(lane, a.x, a.weight, a.bias, a.y, op_images(ctx, batch));
                };
            },
            [=](const bound::FcBackwardData& a) -> CudaBody {
                return [=](Lane& lane, const Ctx& ctx) {
                    fc->backward_data(lane, a.dy, a.weight, a.dx, op_images(ctx, batch));
                };
            },
            [=](const bound::FcBackwardWeight& a) -> CudaBody {
                return [=](Lane& lane, const Ctx&) { fc->backward_weight(lane, a.x, a.dy, a.dweight, a.dbias); };
            },
            [=](const bound::BnForward& a) -> CudaBody {
                return [=](Lane& lane, const Ctx&) {
                    bn->forward_training(lane, a.x, a.gamma, a.beta, a.y, a.saved_mean, a.saved_inv_std,
                                         a.running_mean, a.running_var);
                };
            },
            [=](const bound::BnBackwardData& a) -> CudaBody {
                return [=](Lane& lane, const Ctx&) {
                    bn->backward_data(lane, a.x, a.dy, a.gamma, a.saved_mean, a.saved_inv_std, a.dx, a.y, a.dgamma,
                                      a.dbeta);
                };
            },
            [=](const bound::BnBackwardWeight& a) -> CudaBody {
                return [=](Lane& lane, const Ctx&) {
                    bn->backward_weight(lane, a.x, a.dy, a.saved_mean, a.saved_inv_std, a.dgamma, a.dbeta, a.y);
                };
            },
            [=](const bound::ReluForward& a) -> CudaBody {
                return [=](Lane& lane, const Ctx& ctx) {
                    cuda::relu_forward(lane, a.layer, a.x, a.y, op_images(ctx, batch));
                };
            },
            [=](const bound::ReluBackward& a) -> CudaBody {
                return [=](Lane& lane, const Ctx& ctx) {
                    cuda::relu_backward_data(lane, a.layer, a.y, a.dy, a.dx, op_images(ctx, batch));
                };
            },
            [=](const bound::PoolForward& a) -> CudaBody {
                return [=](Lane& lane, const Ctx& ctx) { pool->forward(lane, a.x, a.y, op_images(ctx, batch)); };
            },
            [=](const bound::PoolBackward& a) -> CudaBody {
                return [=](Lane& lane, const Ctx& ctx) {
                    pool->backward_data(lane, a.x, a.y, a.dy, a.dx, op_images(ctx, batch));
                };
            },
            [=](const bound::LrnForward& a) -> CudaBody {
                return [=](Lane& lane, const Ctx& ctx) { lrn->forward(lane, a.x, a.y, op_images(ctx, batch)); };
            },
            [=](const bound::LrnBackward& a) -> CudaBody {
                return [=](Lane& lane, const Ctx& ctx) {
                    lrn->backward_data(lane, a.x, a.y, a.dy, a.dx, op_images(ctx, batch));
                };
            },
            [=](const bound::DropoutForward& a) -> CudaBody {
                return [=](Lane& lane, const Ctx& ctx) {
                    cuda::dropout_forward(lane, a.layer, a.seed, a.id, a.step, a.x, a.y, op_images(ctx, batch), layout);
                };
            },
            [=](const bound::DropoutBackward& a) -> CudaBody {
                return [=](Lane& lane, const Ctx& ctx) {
                    cuda::dropout_backward_data(lane, a.layer, a.seed, a.id, a.step, a.dy, a.dx, op_images(ctx, batch),
                                                layout);
                };
            },
            [=](const bound::AddForward& a) -> CudaBody {
                return [=](Lane& lane, const Ctx& ctx) {
                    cuda::add_forward(lane, a.layer, a.a, a.b, a.y, op_images(ctx, batch));
                };
            },
            [=](const bound::LossForward& a) -> CudaBody {
                return [=](Lane& lane, const Ctx& ctx) {
                    cuda::softmax_loss_forward(lane, a.layer, a.logits, a.labels, a.probabilities, a.per_image_loss,
                                               op_images(ctx, batch));
                };
            },
            [](const bound::LossSum& a) -> CudaBody {
                return [=](Lane& lane, const Ctx&) { cuda::softmax_loss_sum(lane, a.layer, a.per_image_loss, a.loss); };
            },
            [=](const bound::LossBackward& a) -> CudaBody {
                return [=](Lane& lane, const Ctx& ctx) {
                    cuda::softmax_loss_backward_data(lane, a.layer, a.probabilities, a.labels, a.dx,
                                                     op_images(ctx, batch));
                };
            },
        },
        op.args);
}

WeightSnapshot snapshot_weights(const CudaModel& model) {
    const TrainingGraph& tg = model.graph();
    WeightSnapshot s{&tg, std::vector<std::vector<std::byte>>(tg.buffers.size())};
    for (BufferId id = 0; id < tg.buffers.size(); ++id)
        if (is_weight(tg.buffers[id])) s.buffers[id] = model.download(id);
    if (model.options().layers.layout != cuda::TensorLayout::nhwc) return s;
    // KRSC filters and their momenta back to KCRS.
    for (LayerId l = 0; l < tg.layers.size(); ++l) {
        const auto* conv = std::get_if<Conv2d>(&tg.network.layer(l).spec);
        if (conv == nullptr) continue;
        std::vector<BufferId> filters{tg.layers[l].params.at(0)};
        if (!tg.layers[l].momentum.empty()) filters.push_back(tg.layers[l].momentum.at(0));
        for (const BufferId b : filters) {
            std::vector<std::byte>& bytes = s.buffers[b];
            std::vector<float> krsc(bytes.size() / sizeof(float));
            std::memcpy(krsc.data(), bytes.data(), krsc.size() * sizeof(float));
            const std::vector<float> kcrs = transposed(std::span<const float>(krsc), filter_shape(*conv), false);
            std::memcpy(bytes.data(), kcrs.data(), kcrs.size() * sizeof(float));
        }
    }
    return s;
}

WeightComparison compare_weights(const CudaModel& a, const CudaModel& b) {
    return compare_weights(snapshot_weights(a), snapshot_weights(b));
}

WeightComparison compare_weights(const CudaModel& a, const HostModel& b) {
    return compare_weights(snapshot_weights(a), snapshot_weights(b));
}

ToleranceComparison compare_weights_within(const CudaModel& a, const HostModel& reference, double relative,
                                           double absolute) {
    return compare_weights_within(snapshot_weights(a), snapshot_weights(reference), relative, absolute);
}

}  // namespace braid::samples
