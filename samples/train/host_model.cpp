#include "train/host_model.hpp"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <sstream>

#include "nn/counter_hash.hpp"
#include "nn/gradient_sum.hpp"
#include "train/initial_values.hpp"
#include "train/synthetic_data.hpp"

namespace braid::samples {

namespace {

constexpr std::size_t alignment_bytes = 64;

ImageRange images_of(const braid::OpContext& ctx, std::uint32_t batch) {
    if (ctx.batch_end > ctx.batch_begin) return ImageRange{ctx.batch_begin, ctx.batch_end};
    return ImageRange{0, batch};
}

std::string format_value(double v) {
    std::ostringstream s;
    s.precision(9);
    s << v;
    return s.str();
}

}  // namespace

void HostModel::FreeBytes::operator()(std::byte* p) const noexcept { std::free(p); }

HostModel::HostModel(const TrainingGraph& graph) : graph_(graph) {
    const auto buffers = graph_.graph.buffers();
    roots_.resize(buffers.size());
    for (const braid::Buffer& b : buffers) {
        if (b.parent) continue;
        const std::size_t size = (b.bytes + alignment_bytes - 1) / alignment_bytes * alignment_bytes;
        auto* p = static_cast<std::byte*>(std::aligned_alloc(alignment_bytes, size));
        if (!p) throw std::bad_alloc();
        std::memset(p, 0, size);
        roots_[b.id].reset(p);
    }
    initialize();
    bodies_.reserve(graph_.ops.size());
    for (OpId id = 0; id < graph_.ops.size(); ++id) bodies_.push_back(make_body(id));
}

HostModel::~HostModel() = default;

std::byte* HostModel::bytes(BufferId b) const {
    const braid::Buffer& buf = graph_.graph.buffer(b);
    return roots_.at(buf.root).get() + buf.root_offset_bytes;
}

TensorView<float> HostModel::tensor(BufferId b) const {
    return tensor_view(graph_, b, roots_.at(graph_.graph.buffer(b).root).get());
}

std::vector<float> HostModel::values(BufferId b) const {
    const braid::Buffer& buf = graph_.graph.buffer(b);
    const float* p = data<float>(b);
    if (buf.chunks == 1) return std::vector<float>(p, p + buf.bytes / sizeof(float));
    std::vector<float> out;
    const TensorView<float> t = tensor(b);
    for (std::uint32_t n = 0; n < t.shape.n; ++n) out.insert(out.end(), t.image(n), t.image(n) + t.shape.image_elements());
    return out;
}

void HostModel::initialize() {
    for (const braid::Buffer& b : graph_.graph.buffers())
        if (!b.parent) std::memset(roots_[b.id].get(), 0, b.bytes);
    std::uint64_t ordinal = 0;
    for (LayerId l = 0; l < graph_.network.layers().size(); ++l) {
        const LayerSpec& spec = graph_.network.layer(l).spec;
        const LayerBuffers& lb = graph_.layers[l];
        const std::vector<ParamSpec> params = parameters_of(spec);
        for (std::size_t i = 0; i < params.size(); ++i, ++ordinal)
            fill_initial_parameter(params[i], graph_.seed, ordinal, data<float>(lb.params[i]));
        const std::vector<AuxBufferSpec> aux = aux_buffers_of(spec);
        for (std::size_t i = 0; i < aux.size(); ++i) fill_initial_aux(aux[i], data<float>(lb.aux[i]));
    }
}

void HostModel::run_serial_iteration(const SerialRunOptions& options) { run_serial(graph_.graph, bodies_, options); }

double HostModel::loss() const {
    double total = 0.0;
    for (const auto& [name, value] : losses()) total += value;
    return total;
}

std::vector<std::pair<std::string, double>> HostModel::losses() const {
    std::vector<std::pair<std::string, double>> out;
    for (LayerId l : graph_.network.loss_layers())
        out.emplace_back(graph_.network.layer(l).name,
                         static_cast<double>(*data<float>(graph_.layers[l].aux[SoftmaxCrossEntropy::loss])));
    return out;
}

HostBody HostModel::make_body(OpId id) {
    const OpInfo& info = graph_.ops[id];
    const std::uint32_t batch = graph_.batch();
    switch (info.role) {
        case OpRole::data: {
            const TensorView<float> images = tensor(graph_.images);
            std::int32_t* labels = data<std::int32_t>(graph_.labels);
            const std::uint64_t* step = data<std::uint64_t>(graph_.step);
            const std::uint64_t seed = graph_.seed, period = graph_.data_batches;
            const std::uint32_t classes = graph_.network.classes();
            return [=](const braid::OpContext& ctx) {
                const std::uint64_t data_iteration = period == 0 ? *step : *step % period;
                synthetic_batch(seed, classes, data_iteration, images, labels, images_of(ctx, batch));
            };
        }
        case OpRole::advance_step: {
            std::uint64_t* step = data<std::uint64_t>(graph_.step);
            return [step](const braid::OpContext&) { ++*step; };
        }
        case OpRole::gradient_sum: {
            const GradientSum& s = graph_.gradient_sums.at(*info.gradient_sum);
            std::vector<TensorView<const float>> partials;
            for (BufferId p : s.partials) partials.push_back(tensor(p));
            const TensorView<float> total = tensor(s.total);
            return [=](const braid::OpContext& ctx) {
                gradient_sum<float>(partials, total, images_of(ctx, batch));
            };
        }
        default: return make_layer_body(*info.layer, info.role);
    }
}

HostBody HostModel::make_layer_body(LayerId l, OpRole role) {
    const LayerSpec& spec = graph_.network.layer(l).spec;
    const LayerBuffers& b = graph_.layers[l];
    const std::uint32_t batch = graph_.batch();
    const auto view = [&](BufferId id) { return tensor(id); };
    const auto cview = [&](BufferId id) { return TensorView<const float>(tensor(id)); };
    const auto ptr = [&](BufferId id) { return data<float>(id); };
    const auto opt_ptr = [&](std::size_t i, const std::vector<BufferId>& v) -> float* {
        return i < v.size() ? data<float>(v[i]) : nullptr;
    };
    // dx of input 0 (the only input whose gradient a backward op writes).
    const auto dx_view = [&]() { return view(b.input_gradients.at(0).value()); };

    if (role == OpRole::update) {
        std::vector<float*> params, grads, momentum;
        std::vector<std::uint64_t> sizes;
        std::vector<bool> decay;
        const std::vector<ParamSpec> specs = parameters_of(spec);
        for (std::size_t i = 0; i < specs.size(); ++i) {
            params.push_back(ptr(b.params[i]));
            grads.push_back(ptr(b.param_gradients[i]));
            momentum.push_back(ptr(b.momentum[i]));
            sizes.push_back(specs[i].elements());
            decay.push_back(specs[i].weight_decay);
        }
        const SgdConfig sgd = graph_.optimizer;
        return [=](const braid::OpContext&) {
            for (std::size_t i = 0; i < params.size(); ++i)
                sgd_momentum_update<float>(sgd, params[i], grads[i], momentum[i], sizes[i], decay[i]);
        };
    }

    if (const auto* conv = std::get_if<Conv2d>(&spec)) {
        const Conv2d c = *conv;
        if (role == OpRole::forward) {
            const auto x = cview(b.inputs[0]);
            const auto y = view(b.output);
            const float* w = ptr(b.params[0]);
            const float* bias = opt_ptr(1, b.params);
            return [=](const braid::OpContext& ctx) { conv_forward<float>(c, x, w, bias, y, images_of(ctx, batch)); };
        }
        if (role == OpRole::backward_data) {
            const auto dy = cview(*b.output_gradient);
            const float* w = ptr(b.params[0]);
            const auto dx = dx_view();
            return [=](const braid::OpContext& ctx) { conv_backward_data<float>(c, dy, w, dx, images_of(ctx, batch)); };
        }
        if (role == OpRole::backward_weight) {
            const auto x = cview(b.inputs[0]);
            const auto dy = cview(*b.output_gradient);
            float* dw = ptr(b.param_gradients[0]);
            float* db = opt_ptr(1, b.param_gradients);
            return [=](const braid::OpContext&) { conv_backward_weight<float>(c, x, dy, dw, db); };
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
            return [=](const braid::OpContext&) {
                batch_norm_forward_training<float>(n, x, gamma, beta, y, saved_mean, saved_inv_std, running_mean,
                                                   running_var);
            };
        }
        const auto dy = cview(*b.output_gradient);
        if (role == OpRole::backward_data) {
            const auto dx = dx_view();
            return [=](const braid::OpContext&) {
                batch_norm_backward_data<float>(n, x, dy, gamma, saved_mean, saved_inv_std, dx);
            };
        }
        if (role == OpRole::backward_weight) {
            float* dgamma = ptr(b.param_gradients[0]);
            float* dbeta = ptr(b.param_gradients[1]);
            return [=](const braid::OpContext&) {
                batch_norm_backward_weight<float>(n, x, dy, saved_mean, saved_inv_std, dgamma, dbeta);
            };
        }
    }
    if (const auto* relu = std::get_if<Relu>(&spec)) {
        const Relu r = *relu;
        if (role == OpRole::forward) {
            const auto x = cview(b.inputs[0]);
            const auto y = view(b.output);
            return [=](const braid::OpContext& ctx) { relu_forward<float>(r, x, y, images_of(ctx, batch)); };
        }
        if (role == OpRole::backward_data) {
            const auto y = cview(b.output);
            const auto dy = cview(*b.output_gradient);
            const auto dx = dx_view();
            return [=](const braid::OpContext& ctx) { relu_backward_data<float>(r, y, dy, dx, images_of(ctx, batch)); };
        }
    }
    if (const auto* pool = std::get_if<Pool2d>(&spec)) {
        const Pool2d p = *pool;
        const auto x = cview(b.inputs[0]);
        const auto y = view(b.output);
        if (role == OpRole::forward)
            return [=](const braid::OpContext& ctx) { pool_forward<float>(p, x, y, images_of(ctx, batch)); };
        if (role == OpRole::backward_data) {
            const auto dy = cview(*b.output_gradient);
            const auto dx = dx_view();
            // Average pooling reads dy alone; its op declares no x or y.
            const TensorView<const float> x_read = p.config.mode == PoolMode::max ? x : TensorView<const float>{};
            const TensorView<const float> y_read =
                p.config.mode == PoolMode::max ? TensorView<const float>(y) : TensorView<const float>{};
            return [=](const braid::OpContext& ctx) {
                pool_backward_data<float>(p, x_read, y_read, dy, dx, images_of(ctx, batch));
            };
        }
    }
    if (const auto* lrn = std::get_if<Lrn>(&spec)) {
        const Lrn n = *lrn;
        const auto x = cview(b.inputs[0]);
        const auto y = view(b.output);
        if (role == OpRole::forward)
            return [=](const braid::OpContext& ctx) { lrn_forward<float>(n, x, y, images_of(ctx, batch)); };
        if (role == OpRole::backward_data) {
            const auto dy = cview(*b.output_gradient);
            const auto dx = dx_view();
            return [=](const braid::OpContext& ctx) {
                lrn_backward_data<float>(n, x, TensorView<const float>(y), dy, dx, images_of(ctx, batch));
            };
        }
    }
    if (const auto* fc = std::get_if<FullyConnected>(&spec)) {
        const FullyConnected f = *fc;
        if (role == OpRole::forward) {
            const auto x = cview(b.inputs[0]);
            const auto y = view(b.output);
            const float* w = ptr(b.params[0]);
            const float* bias = opt_ptr(1, b.params);
            return [=](const braid::OpContext& ctx) {
                fully_connected_forward<float>(f, x, w, bias, y, images_of(ctx, batch));
            };
        }
        if (role == OpRole::backward_data) {
            const auto dy = cview(*b.output_gradient);
            const float* w = ptr(b.params[0]);
            const auto dx = dx_view();
            return [=](const braid::OpContext& ctx) {
                fully_connected_backward_data<float>(f, dy, w, dx, images_of(ctx, batch));
            };
        }
        if (role == OpRole::backward_weight) {
            const auto x = cview(b.inputs[0]);
            const auto dy = cview(*b.output_gradient);
            float* dw = ptr(b.param_gradients[0]);
            float* db = opt_ptr(1, b.param_gradients);
            return [=](const braid::OpContext&) { fully_connected_backward_weight<float>(f, x, dy, dw, db); };
        }
    }
    if (const auto* drop = std::get_if<Dropout>(&spec)) {
        const Dropout d = *drop;
        const std::uint64_t* step = data<std::uint64_t>(graph_.step);
        const std::uint64_t seed = graph_.seed;
        const auto key = [=] { return DropoutKey{seed, l, *step}; };
        if (role == OpRole::forward) {
            const auto x = cview(b.inputs[0]);
            const auto y = view(b.output);
            return [=](const braid::OpContext& ctx) { dropout_forward<float>(d, key(), x, y, images_of(ctx, batch)); };
        }
        if (role == OpRole::backward_data) {
            const auto dy = cview(*b.output_gradient);
            const auto dx = dx_view();
            return [=](const braid::OpContext& ctx) {
                dropout_backward_data<float>(d, key(), dy, dx, images_of(ctx, batch));
            };
        }
    }
    if (const auto* add = std::get_if<Add>(&spec)) {
        const Add a = *add;
        if (role == OpRole::forward) {
            const auto x0 = cview(b.inputs[0]);
            const auto x1 = cview(b.inputs[1]);
            const auto y = view(b.output);
            return [=](const braid::OpContext& ctx) { add_forward<float>(a, x0, x1, y, images_of(ctx, batch)); };
        }
    }
    if (const auto* loss = std::get_if<SoftmaxCrossEntropy>(&spec)) {
        const SoftmaxCrossEntropy s = *loss;
        const std::int32_t* labels = data<std::int32_t>(graph_.labels);
        float* per_image = ptr(b.aux[SoftmaxCrossEntropy::per_image_loss]);
        const auto probs = view(b.output);
        if (role == OpRole::forward) {
            const auto logits = cview(b.inputs[0]);
            return [=](const braid::OpContext& ctx) {
                softmax_loss_forward<float>(s, logits, labels, probs, per_image, images_of(ctx, batch));
            };
        }
        if (role == OpRole::loss_sum) {
            float* total = ptr(b.aux[SoftmaxCrossEntropy::loss]);
            return [=](const braid::OpContext&) { softmax_loss_sum<float>(s, per_image, total); };
        }
        if (role == OpRole::backward_data) {
            const auto dx = dx_view();
            return [=](const braid::OpContext& ctx) {
                softmax_loss_backward_data<float>(s, TensorView<const float>(probs), labels, dx, images_of(ctx, batch));
            };
        }
    }
    throw braid::GraphError("no host body for the " + std::string(to_string(role)) + " op of layer '" +
                            graph_.network.layer(l).name + "'");
}

std::string WeightComparison::describe() const {
    if (identical) return "bitwise identical (" + std::to_string(tensors_compared) + " tensors)";
    return "first difference: tensor '" + tensor + "' index " + std::to_string(index) + ": " + format_value(first) +
           " vs " + format_value(second);
}

WeightComparison compare_weights(const HostModel& a, const HostModel& b) {
    const TrainingGraph& ga = a.graph();
    const TrainingGraph& gb = b.graph();
    if (ga.graph.fingerprint() != gb.graph.fingerprint())
        throw braid::Error("cannot compare weights of models of different graphs ('" + ga.network.name() + "' " +
                           ga.graph.fingerprint() + " vs '" + gb.network.name() + "' " + gb.graph.fingerprint() + ")");
    WeightComparison out;
    for (BufferId id = 0; id < ga.buffers.size(); ++id) {
        const BufferInfo& info = ga.buffers[id];
        if (info.role != BufferRole::parameter && info.role != BufferRole::state) continue;
        const braid::Buffer& buf = ga.graph.buffer(id);
        ++out.tensors_compared;
        const std::byte* pa = a.bytes(id);
        const std::byte* pb = b.bytes(id);
        if (std::memcmp(pa, pb, buf.bytes) == 0) continue;
        const std::size_t width = info.element == ElementType::u64 ? 8 : 4;
        for (std::uint64_t i = 0; i * width < buf.bytes; ++i) {
            if (std::memcmp(pa + i * width, pb + i * width, width) == 0) continue;
            out.identical = false;
            out.tensor = buf.name;
            out.index = i;
            if (info.element == ElementType::u64) {
                out.first = static_cast<double>(reinterpret_cast<const std::uint64_t*>(pa)[i]);
                out.second = static_cast<double>(reinterpret_cast<const std::uint64_t*>(pb)[i]);
            } else {
                out.first = reinterpret_cast<const float*>(pa)[i];
                out.second = reinterpret_cast<const float*>(pb)[i];
            }
            return out;
        }
    }
    return out;
}

}  // namespace braid::samples
