#include "cuda/cuda_model.hpp"

#include <algorithm>
#include <cstring>

#include "braid/cuda/error.hpp"
#include "train/initial_values.hpp"

namespace braid::samples {

namespace {

ImageRange images_of(const braid::OpContext& ctx, std::uint32_t batch) {
    if (ctx.batch_end > ctx.batch_begin) return ImageRange{ctx.batch_begin, ctx.batch_end};
    return ImageRange{0, batch};
}

void synchronize() { braid::cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }

}  // namespace

CudaModel::CudaModel(const TrainingGraph& graph, CudaModelOptions options) : graph_(graph), options_(options) {
    const auto buffers = graph_.graph.buffers();
    roots_.resize(buffers.size());
    for (const braid::Buffer& b : buffers)
        if (!b.parent) roots_[b.id] = braid::cuda::DeviceBuffer(std::max<std::size_t>(b.bytes, 1));

    const std::size_t layers = graph_.network.layers().size();
    convs_.resize(layers);
    fcs_.resize(layers);
    pools_.resize(layers);
    lrns_.resize(layers);
    for (LayerId l = 0; l < layers; ++l) {
        const LayerNode& node = graph_.network.layer(l);
        const cuda::LayerOptions& o = options_.layers;
        if (const auto* c = std::get_if<Conv2d>(&node.spec)) {
            convs_[l] = std::make_unique<cuda::CudaConv>(node.name, *c, o);
            scratch_bytes_ = std::max(scratch_bytes_, convs_[l]->scratch_bytes());
        } else if (const auto* f = std::get_if<FullyConnected>(&node.spec)) {
            fcs_[l] = std::make_unique<cuda::CudaFullyConnected>(node.name, *f, o);
        } else if (const auto* p = std::get_if<Pool2d>(&node.spec)) {
            pools_[l] = std::make_unique<cuda::CudaPool>(node.name, *p, o);
            scratch_bytes_ = std::max(scratch_bytes_, pools_[l]->scratch_bytes());
        } else if (const auto* n = std::get_if<Lrn>(&node.spec)) {
            lrns_[l] = std::make_unique<cuda::CudaLrn>(node.name, *n, o);
        } else if (const auto* bn = std::get_if<BatchNorm2d>(&node.spec)) {
            scratch_bytes_ = std::max(scratch_bytes_, cuda::batch_norm_scratch_bytes(*bn));
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
    return tensor_view(graph_, b, static_cast<std::byte*>(roots_.at(graph_.graph.buffer(b).root).get()));
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
        for (std::size_t i = 0; i < params.size(); ++i, ++ordinal) {
            host.resize(params[i].elements());
            fill_initial_parameter(params[i], graph_.seed, ordinal, host.data());
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

CudaBody CudaModel::make_body(OpId id) {
    const OpInfo& info = graph_.ops[id];
    const std::uint32_t batch = graph_.batch();
    switch (info.role) {
        case OpRole::data: {
            const TensorView<float> images = tensor(graph_.images);
            std::int32_t* labels = data<std::int32_t>(graph_.labels);
            const std::uint64_t* step = data<std::uint64_t>(graph_.step);
            const std::uint64_t seed = graph_.seed, period = graph_.data_batches;
            const std::uint32_t classes = graph_.network.classes();
            return [=](braid::CudaLane& lane, const braid::OpContext& ctx) {
                cuda::synthetic_batch(lane, seed, classes, period, step, images, labels, images_of(ctx, batch));
            };
        }
        case OpRole::advance_step: {
            std::uint64_t* step = data<std::uint64_t>(graph_.step);
            return [step](braid::CudaLane& lane, const braid::OpContext&) { cuda::advance_step(lane, step); };
        }
        case OpRole::gradient_sum: {
            const GradientSum& s = graph_.gradient_sums.at(*info.gradient_sum);
            std::vector<TensorView<const float>> partials;
            for (BufferId p : s.partials) partials.push_back(tensor(p));
            const TensorView<float> total = tensor(s.total);
            return [=](braid::CudaLane& lane, const braid::OpContext& ctx) {
                cuda::gradient_sum(lane, partials, total, images_of(ctx, batch));
            };
        }
        default: return make_layer_body(*info.layer, info.role);
    }
}

CudaBody CudaModel::make_layer_body(LayerId l, OpRole role) {
    const LayerSpec& spec = graph_.network.layer(l).spec;
    const LayerBuffers& b = graph_.layers[l];
    const std::uint32_t batch = graph_.batch();
    const auto view = [&](BufferId id) { return tensor(id); };
    const auto cview = [&](BufferId id) { return TensorView<const float>(tensor(id)); };
    const auto ptr = [&](BufferId id) { return data<float>(id); };
    const auto opt_ptr = [&](std::size_t i, const std::vector<BufferId>& v) -> float* {
        return i < v.size() ? data<float>(v[i]) : nullptr;
    };
    const auto dx_view = [&]() { return view(b.input_gradients.at(0).value()); };
    using Lane = braid::CudaLane;
    using Ctx = braid::OpContext;

    if (role == OpRole::update) {
        std::vector<cuda::SgdTensorRef> tensors;
        const std::vector<ParamSpec> specs = parameters_of(spec);
        for (std::size_t i = 0; i < specs.size(); ++i)
            tensors.push_back(cuda::SgdTensorRef{ptr(b.params[i]), ptr(b.param_gradients[i]), ptr(b.momentum[i]),
                                                 specs[i].elements(), specs[i].weight_decay});
        const SgdConfig sgd = graph_.optimizer;
        return [=](Lane& lane, const Ctx&) { cuda::sgd_momentum_update(lane, sgd, tensors); };
    }

    if (cuda::CudaConv* conv = convs_[l].get()) {
        if (role == OpRole::forward) {
            const auto x = cview(b.inputs[0]);
            const auto y = view(b.output);
            const float* w = ptr(b.params[0]);
            const float* bias = opt_ptr(1, b.params);
            return [=](Lane& lane, const Ctx& ctx) { conv->forward(lane, x, w, bias, y, images_of(ctx, batch)); };
        }
        if (role == OpRole::backward_data) {
            const auto dy = cview(*b.output_gradient);
            const float* w = ptr(b.params[0]);
            const auto dx = dx_view();
            return [=](Lane& lane, const Ctx& ctx) { conv->backward_data(lane, dy, w, dx, images_of(ctx, batch)); };
        }
        if (role == OpRole::backward_weight) {
            const auto x = cview(b.inputs[0]);
            const auto dy = cview(*b.output_gradient);
            float* dw = ptr(b.param_gradients[0]);
            float* db = opt_ptr(1, b.param_gradients);
            return [=](Lane& lane, const Ctx&) { conv->backward_weight(lane, x, dy, dw, db); };
        }
    }
    if (cuda::CudaFullyConnected* fc = fcs_[l].get()) {
        if (role == OpRole::forward) {
            const auto x = cview(b.inputs[0]);
            const auto y = view(b.output);
            const float* w = ptr(b.params[0]);
            const float* bias = opt_ptr(1, b.params);
            return [=](Lane& lane, const Ctx& ctx) { fc->forward(lane, x, w, bias, y, images_of(ctx, batch)); };
        }
        if (role == OpRole::backward_data) {
            const auto dy = cview(*b.output_gradient);
            const float* w = ptr(b.params[0]);
            const auto dx = dx_view();
            return [=](Lane& lane, const Ctx& ctx) { fc->backward_data(lane, dy, w, dx, images_of(ctx, batch)); };
        }
        if (role == OpRole::backward_weight) {
            const auto x = cview(b.inputs[0]);
            const auto dy = cview(*b.output_gradient);
            float* dw = ptr(b.param_gradients[0]);
            float* db = opt_ptr(1, b.param_gradients);
            return [=](Lane& lane, const Ctx&) { fc->backward_weight(lane, x, dy, dw, db); };
        }
    }
    if (const auto* bn = std::get_if<BatchNorm2d>(&spec)) {
        const BatchNorm2d n = *bn;
        const float* gamma = ptr(b.params[0]);
        float* saved_mean = ptr(b.aux[BatchNorm2d::saved_mean]);
        float* saved_inv_std = ptr(b.aux[BatchNorm2d::saved_inv_std]);
        const auto x = cview(b.inputs[0]);
        if (role == OpRole::forward) {
            const float* beta = ptr(b.params[1]);
            const auto y = view(b.output);
            float* running_mean = ptr(b.aux[BatchNorm2d::running_mean]);
            float* running_var = ptr(b.aux[BatchNorm2d::running_var]);
            return [=](Lane& lane, const Ctx&) {
                cuda::batch_norm_forward_training(lane, n, x, gamma, beta, y, saved_mean, saved_inv_std, running_mean,
                                                  running_var);
            };
        }
        const auto dy = cview(*b.output_gradient);
        if (role == OpRole::backward_data) {
            const auto dx = dx_view();
            return [=](Lane& lane, const Ctx&) {
                cuda::batch_norm_backward_data(lane, n, x, dy, gamma, saved_mean, saved_inv_std, dx);
            };
        }
        if (role == OpRole::backward_weight) {
            float* dgamma = ptr(b.param_gradients[0]);
            float* dbeta = ptr(b.param_gradients[1]);
            return [=](Lane& lane, const Ctx&) {
                cuda::batch_norm_backward_weight(lane, n, x, dy, saved_mean, saved_inv_std, dgamma, dbeta);
            };
        }
    }
    if (const auto* relu = std::get_if<Relu>(&spec)) {
        const Relu r = *relu;
        if (role == OpRole::forward) {
            const auto x = cview(b.inputs[0]);
            const auto y = view(b.output);
            return [=](Lane& lane, const Ctx& ctx) { cuda::relu_forward(lane, r, x, y, images_of(ctx, batch)); };
        }
        if (role == OpRole::backward_data) {
            const auto y = cview(b.output);
            const auto dy = cview(*b.output_gradient);
            const auto dx = dx_view();
            return [=](Lane& lane, const Ctx& ctx) {
                cuda::relu_backward_data(lane, r, y, dy, dx, images_of(ctx, batch));
            };
        }
    }
    if (cuda::CudaPool* pool = pools_[l].get()) {
        const auto x = cview(b.inputs[0]);
        const auto y = view(b.output);
        if (role == OpRole::forward)
            return [=](Lane& lane, const Ctx& ctx) { pool->forward(lane, x, y, images_of(ctx, batch)); };
        if (role == OpRole::backward_data) {
            const auto dy = cview(*b.output_gradient);
            const auto dx = dx_view();
            // Average pooling reads dy alone; its op declares no x or y.
            const bool max = pool->layer().config.mode == PoolMode::max;
            const TensorView<const float> x_read = max ? x : TensorView<const float>{};
            const TensorView<const float> y_read = max ? TensorView<const float>(y) : TensorView<const float>{};
            return [=](Lane& lane, const Ctx& ctx) {
                pool->backward_data(lane, x_read, y_read, dy, dx, images_of(ctx, batch));
            };
        }
    }
    if (cuda::CudaLrn* lrn = lrns_[l].get()) {
        const auto x = cview(b.inputs[0]);
        const auto y = view(b.output);
        if (role == OpRole::forward)
            return [=](Lane& lane, const Ctx& ctx) { lrn->forward(lane, x, y, images_of(ctx, batch)); };
        if (role == OpRole::backward_data) {
            const auto dy = cview(*b.output_gradient);
            const auto dx = dx_view();
            return [=](Lane& lane, const Ctx& ctx) {
                lrn->backward_data(lane, x, TensorView<const float>(y), dy, dx, images_of(ctx, batch));
            };
        }
    }
    if (const auto* drop = std::get_if<Dropout>(&spec)) {
        const Dropout d = *drop;
        const std::uint64_t* step = data<std::uint64_t>(graph_.step);
        const std::uint64_t seed = graph_.seed;
        if (role == OpRole::forward) {
            const auto x = cview(b.inputs[0]);
            const auto y = view(b.output);
            return [=](Lane& lane, const Ctx& ctx) {
                cuda::dropout_forward(lane, d, seed, l, step, x, y, images_of(ctx, batch));
            };
        }
        if (role == OpRole::backward_data) {
            const auto dy = cview(*b.output_gradient);
            const auto dx = dx_view();
            return [=](Lane& lane, const Ctx& ctx) {
                cuda::dropout_backward_data(lane, d, seed, l, step, dy, dx, images_of(ctx, batch));
            };
        }
    }
    if (const auto* add = std::get_if<Add>(&spec)) {
        const Add a = *add;
        if (role == OpRole::forward) {
            const auto x0 = cview(b.inputs[0]);
            const auto x1 = cview(b.inputs[1]);
            const auto y = view(b.output);
            return [=](Lane& lane, const Ctx& ctx) { cuda::add_forward(lane, a, x0, x1, y, images_of(ctx, batch)); };
        }
    }
    if (const auto* loss = std::get_if<SoftmaxCrossEntropy>(&spec)) {
        const SoftmaxCrossEntropy s = *loss;
        const std::int32_t* labels = data<std::int32_t>(graph_.labels);
        float* per_image = ptr(b.aux[SoftmaxCrossEntropy::per_image_loss]);
        const auto probs = view(b.output);
        if (role == OpRole::forward) {
            const auto logits = cview(b.inputs[0]);
            return [=](Lane& lane, const Ctx& ctx) {
                cuda::softmax_loss_forward(lane, s, logits, labels, probs, per_image, images_of(ctx, batch));
            };
        }
        if (role == OpRole::loss_sum) {
            float* total = ptr(b.aux[SoftmaxCrossEntropy::loss]);
            return [=](Lane& lane, const Ctx&) { cuda::softmax_loss_sum(lane, s, per_image, total); };
        }
        if (role == OpRole::backward_data) {
            const auto dx = dx_view();
            return [=](Lane& lane, const Ctx& ctx) {
                cuda::softmax_loss_backward_data(lane, s, TensorView<const float>(probs), labels, dx,
                                                 images_of(ctx, batch));
            };
        }
    }
    throw braid::GraphError("no CUDA body for the " + std::string(to_string(role)) + " op of layer '" +
                            graph_.network.layer(l).name + "'");
}

WeightSnapshot snapshot_weights(const CudaModel& model) {
    const TrainingGraph& tg = model.graph();
    WeightSnapshot s{&tg, std::vector<std::vector<std::byte>>(tg.buffers.size())};
    for (BufferId id = 0; id < tg.buffers.size(); ++id)
        if (is_weight(tg.buffers[id])) s.buffers[id] = model.download(id);
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
