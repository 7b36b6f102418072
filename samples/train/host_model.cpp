#include "train/host_model.hpp"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <new>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <unistd.h>

#include "nn/counter_hash.hpp"
#include "nn/gradient_sum.hpp"
#include "train/initial_values.hpp"
#include "train/op_binding.hpp"
#include "train/synthetic_data.hpp"

namespace braid::samples {

namespace {

constexpr std::size_t alignment_bytes = 64;

std::uint64_t aligned_size(std::uint64_t bytes) { return (bytes + alignment_bytes - 1) / alignment_bytes * alignment_bytes; }

// Memory a new allocation can have now: Linux's MemAvailable (free memory
// plus what the page cache would give back), else all of RAM, else 0 where
// the system says neither.
std::uint64_t available_memory_bytes() {
    std::ifstream meminfo("/proc/meminfo");
    std::string key;
    std::uint64_t kib = 0;
    while (meminfo >> key >> kib) {
        if (key == "MemAvailable:") return kib * 1024;
        meminfo.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
    }
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page) : 0;
}

// A step larger than the memory left is refused before any allocation: with
// overcommit the allocations succeed and zeroing them meets the OOM killer.
// (A second model, as --check makes, is measured against what the first
// left, as it zeroes its buffers here.)
void check_fits_in_memory(const TrainingGraph& tg) {
    std::uint64_t need = 0;
    for (const braid::Buffer& b : tg.graph.buffers())
        if (!b.parent) need += aligned_size(b.bytes);
    const std::uint64_t have = available_memory_bytes();
    if (have > 0 && need > have)
        throw braid::Error(fmt::format("the host backend needs {:.1f} GiB for the training step's buffers, more than "
                                       "the {:.1f} GiB of memory available; train a smaller --batch or --image",
                                       static_cast<double>(need) / (1ull << 30), static_cast<double>(have) / (1ull << 30)));
}

}  // namespace

std::string format_compared_value(double v) {
    std::ostringstream s;
    s.precision(9);
    s << v;
    return s.str();
}

void HostModel::FreeBytes::operator()(std::byte* p) const noexcept { std::free(p); }

HostModel::HostModel(const TrainingGraph& graph) : graph_(graph) {
    check_fits_in_memory(graph_);
    const auto buffers = graph_.graph.buffers();
    roots_.resize(buffers.size());
    for (const braid::Buffer& b : buffers) {
        if (b.parent) continue;
        const std::size_t size = aligned_size(b.bytes);
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
    const std::uint32_t batch = graph_.batch();
    const BoundOp op = bind_op(graph_, id, [this](BufferId root) { return roots_.at(root).get(); });
    using Ctx = braid::OpContext;
    // Each record's reference layer call; splittable ops take the context's images.
    return std::visit(
        Overloaded{
            [=](const bound::Data& a) -> HostBody {
                return [=](const Ctx& ctx) {
                    const std::uint64_t iteration = a.data_batches == 0 ? *a.step : *a.step % a.data_batches;
                    synthetic_batch(a.seed, a.classes, iteration, a.images, a.labels, op_images(ctx, batch));
                };
            },
            [](const bound::AdvanceStep& a) -> HostBody { return [=](const Ctx&) { ++*a.step; }; },
            [=](const bound::GradientSum& a) -> HostBody {
                return [=](const Ctx& ctx) { gradient_sum<float>(a.partials, a.total, op_images(ctx, batch)); };
            },
            [](const bound::Update& a) -> HostBody {
                return [=](const Ctx&) {
                    for (const SgdTensorRef& t : a.tensors)
                        sgd_momentum_update<float>(a.sgd, t.param, t.grad, t.momentum, t.elements, t.decay);
                };
            },
            [=](const bound::ConvForward& a) -> HostBody {
                return [=](const Ctx& ctx) {
                    conv_forward<float>(a.layer, a.x, a.weight, a.bias, a.y, op_images(ctx, batch));
                };
            },
            [=](const bound::ConvBackwardData& a) -> HostBody {
                return [=](const Ctx& ctx) {
                    conv_backward_data<float>(a.layer, a.dy, a.weight, a.dx, op_images(ctx, batch));
                };
            },
            [](const bound::ConvBackwardWeight& a) -> HostBody {
                return [=](const Ctx&) { conv_backward_weight<float>(a.layer, a.x, a.dy, a.dweight, a.dbias); };
            },
            [=](const bound::FcForward& a) -> HostBody {
                return [=](const Ctx& ctx) {
                    fully_connected_forward<float>(a.layer, a.x, a.weight, a.bias, a.y, op_images(ctx, batch));
                };
            },
            [=](const bound::FcBackwardData& a) -> HostBody {
                return [=](const Ctx& ctx) {
                    fully_connected_backward_data<float>(a.layer, a.dy, a.weight, a.dx, op_images(ctx, batch));
                };
            },
            [](const bound::FcBackwardWeight& a) -> HostBody {
                return [=](const Ctx&) {
                    fully_connected_backward_weight<float>(a.layer, a.x, a.dy, a.dweight, a.dbias);
                };
            },
            [](const bound::BnForward& a) -> HostBody {
                return [=](const Ctx&) {
                    batch_norm_forward_training<float>(a.layer, a.x, a.gamma, a.beta, a.y, a.saved_mean,
                                                       a.saved_inv_std, a.running_mean, a.running_var);
                };
            },
            [](const bound::BnBackwardData& a) -> HostBody {
                return [=](const Ctx&) {
                    batch_norm_backward_data<float>(a.layer, a.x, a.dy, a.gamma, a.saved_mean, a.saved_inv_std, a.dx,
                                                    a.y, a.dgamma, a.dbeta);
                };
            },
            [](const bound::BnBackwardWeight& a) -> HostBody {
                return [=](const Ctx&) {
                    batch_norm_backward_weight<float>(a.layer, a.x, a.dy, a.saved_mean, a.saved_inv_std, a.dgamma,
                                                      a.dbeta, a.y);
                };
            },
            [=](const bound::ReluForward& a) -> HostBody {
                return [=](const Ctx& ctx) { relu_forward<float>(a.layer, a.x, a.y, op_images(ctx, batch)); };
            },
            [=](const bound::ReluBackward& a) -> HostBody {
                return [=](const Ctx& ctx) {
                    relu_backward_data<float>(a.layer, a.y, a.dy, a.dx, op_images(ctx, batch));
                };
            },
            [=](const bound::PoolForward& a) -> HostBody {
                return [=](const Ctx& ctx) { pool_forward<float>(a.layer, a.x, a.y, op_images(ctx, batch)); };
            },
            [=](const bound::PoolBackward& a) -> HostBody {
                return [=](const Ctx& ctx) {
                    pool_backward_data<float>(a.layer, a.x, a.y, a.dy, a.dx, op_images(ctx, batch));
                };
            },
            [=](const bound::LrnForward& a) -> HostBody {
                return [=](const Ctx& ctx) { lrn_forward<float>(a.layer, a.x, a.y, op_images(ctx, batch)); };
            },
            [=](const bound::LrnBackward& a) -> HostBody {
                return [=](const Ctx& ctx) {
                    lrn_backward_data<float>(a.layer, a.x, a.y, a.dy, a.dx, op_images(ctx, batch));
                };
            },
            [=](const bound::DropoutForward& a) -> HostBody {
                return [=](const Ctx& ctx) {
                    dropout_forward<float>(a.layer, DropoutKey{a.seed, a.id, *a.step}, a.x, a.y, op_images(ctx, batch));
                };
            },
            [=](const bound::DropoutBackward& a) -> HostBody {
                return [=](const Ctx& ctx) {
                    dropout_backward_data<float>(a.layer, DropoutKey{a.seed, a.id, *a.step}, a.dy, a.dx,
                                                 op_images(ctx, batch));
                };
            },
            [=](const bound::AddForward& a) -> HostBody {
                return [=](const Ctx& ctx) { add_forward<float>(a.layer, a.a, a.b, a.y, op_images(ctx, batch)); };
            },
            [=](const bound::LossForward& a) -> HostBody {
                return [=](const Ctx& ctx) {
                    softmax_loss_forward<float>(a.layer, a.logits, a.labels, a.probabilities, a.per_image_loss,
                                                op_images(ctx, batch));
                };
            },
            [](const bound::LossSum& a) -> HostBody {
                return [=](const Ctx&) { softmax_loss_sum<float>(a.layer, a.per_image_loss, a.loss); };
            },
            [=](const bound::LossBackward& a) -> HostBody {
                return [=](const Ctx& ctx) {
                    softmax_loss_backward_data<float>(a.layer, a.probabilities, a.labels, a.dx, op_images(ctx, batch));
                };
            },
        },
        op.args);
}

std::string WeightComparison::describe() const {
    if (identical) return "bitwise identical (" + std::to_string(tensors_compared) + " tensors)";
    return "first difference: tensor '" + tensor + "' index " + std::to_string(index) + ": " +
           format_compared_value(first) + " vs " + format_compared_value(second);
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
