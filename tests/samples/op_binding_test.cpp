// The one binder both backends use (train/op_binding.hpp) against the graph's
// declarations: every view and pointer of every op's record lies in a buffer
// the op declares (writes only in buffers it writes), and every declared
// buffer is touched by the record, for every bundled net and a net with
// every layer kind. The executor orders ops by those declarations alone, so
// this is what keeps concurrent plans to the serial bits on every backend.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "nets/zoo.hpp"
#include "train/net_settings.hpp"
#include "train/op_binding.hpp"
#include "train/training_graph.hpp"

using namespace braid::samples;

namespace {

// Where a record points: [begin, end) of fake addresses, and whether the op writes it.
struct Touch {
    std::uintptr_t begin = 0, end = 0;
    bool write = false;
    std::string what;
};

struct Touches {
    std::vector<Touch> all;

    void view(const bound::In& v, bool write, const char* what) {
        for (std::uint32_t n = 0; n < v.shape.n; ++n) {
            const auto b = reinterpret_cast<std::uintptr_t>(v.image(n));
            all.push_back({b, b + v.shape.image_elements() * sizeof(float), write, what});
        }
    }
    void in(const bound::In& v, const char* what) { view(v, false, what); }
    void out(const bound::Out& v, const char* what) { view(bound::In(v), true, what); }
    // A pointer's first element (the records do not carry lengths).
    template <class T>
    void ptr(const T* p, bool write, const char* what) {
        if (!p) return;
        const auto b = reinterpret_cast<std::uintptr_t>(p);
        all.push_back({b, b + sizeof(T), write, what});
    }
};

Touches touches_of(const bound::Args& args) {
    Touches t;
    std::visit(Overloaded{
                   [&](const bound::Data& a) {
                       t.out(a.images, "images");
                       t.ptr(a.labels, true, "labels");
                       t.ptr(a.step, false, "step");
                   },
                   [&](const bound::AdvanceStep& a) { t.ptr(a.step, true, "step"); },
                   [&](const bound::GradientSum& a) {
                       for (const bound::In& p : a.partials) t.in(p, "partial");
                       t.out(a.total, "total");
                   },
                   [&](const bound::Update& a) {
                       for (const SgdTensorRef& s : a.tensors) {
                           t.ptr(s.param, true, "param");
                           t.ptr(s.grad, false, "grad");
                           t.ptr(s.momentum, true, "momentum");
                       }
                   },
                   [&](const bound::ConvForward& a) {
                       t.in(a.x, "x");
                       t.ptr(a.weight, false, "weight");
                       t.ptr(a.bias, false, "bias");
                       t.out(a.y, "y");
                   },
                   [&](const bound::ConvBackwardData& a) {
                       t.in(a.dy, "dy");
                       t.ptr(a.weight, false, "weight");
                       t.out(a.dx, "dx");
                   },
                   [&](const bound::ConvBackwardWeight& a) {
                       t.in(a.x, "x");
                       t.in(a.dy, "dy");
                       t.ptr(a.dweight, true, "dweight");
                       t.ptr(a.dbias, true, "dbias");
                   },
                   [&](const bound::FcForward& a) {
                       t.in(a.x, "x");
                       t.ptr(a.weight, false, "weight");
                       t.ptr(a.bias, false, "bias");
                       t.out(a.y, "y");
                   },
                   [&](const bound::FcBackwardData& a) {
                       t.in(a.dy, "dy");
                       t.ptr(a.weight, false, "weight");
                       t.out(a.dx, "dx");
                   },
                   [&](const bound::FcBackwardWeight& a) {
                       t.in(a.x, "x");
                       t.in(a.dy, "dy");
                       t.ptr(a.dweight, true, "dweight");
                       t.ptr(a.dbias, true, "dbias");
                   },
                   [&](const bound::BnForward& a) {
                       t.in(a.x, "x");
                       t.ptr(a.gamma, false, "gamma");
                       t.ptr(a.beta, false, "beta");
                       t.out(a.y, "y");
                       t.ptr(a.saved_mean, true, "saved_mean");
                       t.ptr(a.saved_inv_std, true, "saved_inv_std");
                       t.ptr(a.running_mean, true, "running_mean");
                       t.ptr(a.running_var, true, "running_var");
                   },
                   [&](const bound::BnBackwardData& a) {
                       t.in(a.x, "x");
                       t.in(a.dy, "dy");
                       t.ptr(a.gamma, false, "gamma");
                       t.ptr(a.saved_mean, false, "saved_mean");
                       t.ptr(a.saved_inv_std, false, "saved_inv_std");
                       t.out(a.dx, "dx");
                       t.in(a.y, "y");
                       t.ptr(a.dgamma, true, "dgamma");
                       t.ptr(a.dbeta, true, "dbeta");
                   },
                   [&](const bound::BnBackwardWeight& a) {
                       t.in(a.x, "x");
                       t.in(a.dy, "dy");
                       t.ptr(a.saved_mean, false, "saved_mean");
                       t.ptr(a.saved_inv_std, false, "saved_inv_std");
                       t.ptr(a.dgamma, true, "dgamma");
                       t.ptr(a.dbeta, true, "dbeta");
                       t.in(a.y, "y");
                   },
                   [&](const bound::ReluForward& a) {
                       t.in(a.x, "x");
                       t.out(a.y, "y");
                   },
                   [&](const bound::ReluBackward& a) {
                       t.in(a.y, "y");
                       t.in(a.dy, "dy");
                       t.out(a.dx, "dx");
                   },
                   [&](const bound::PoolForward& a) {
                       t.in(a.x, "x");
                       t.out(a.y, "y");
                   },
                   [&](const bound::PoolBackward& a) {
                       t.in(a.x, "x");
                       t.in(a.y, "y");
                       t.in(a.dy, "dy");
                       t.out(a.dx, "dx");
                   },
                   [&](const bound::LrnForward& a) {
                       t.in(a.x, "x");
                       t.out(a.y, "y");
                   },
                   [&](const bound::LrnBackward& a) {
                       t.in(a.x, "x");
                       t.in(a.y, "y");
                       t.in(a.dy, "dy");
                       t.out(a.dx, "dx");
                   },
                   [&](const bound::DropoutForward& a) {
                       t.ptr(a.step, false, "step");
                       t.in(a.x, "x");
                       t.out(a.y, "y");
                   },
                   [&](const bound::DropoutBackward& a) {
                       t.ptr(a.step, false, "step");
                       t.in(a.dy, "dy");
                       t.out(a.dx, "dx");
                   },
                   [&](const bound::AddForward& a) {
                       t.in(a.a, "a");
                       t.in(a.b, "b");
                       t.out(a.y, "y");
                   },
                   [&](const bound::LossForward& a) {
                       t.in(a.logits, "logits");
                       t.ptr(a.labels, false, "labels");
                       t.out(a.probabilities, "probabilities");
                       t.ptr(a.per_image_loss, true, "per_image_loss");
                   },
                   [&](const bound::LossSum& a) {
                       t.ptr(a.per_image_loss, false, "per_image_loss");
                       t.ptr(a.loss, true, "loss");
                   },
                   [&](const bound::LossBackward& a) {
                       t.in(a.probabilities, "probabilities");
                       t.ptr(a.labels, false, "labels");
                       t.out(a.dx, "dx");
                   },
               },
               args);
    return t;
}

// Fake, never dereferenced: root r's memory starts at (r + 1) << 40.
std::uintptr_t fake_base(braid::BufferId root) { return (std::uintptr_t{root} + 1) << 40; }

// The byte ranges buffer b covers in the fake memory.
std::vector<std::pair<std::uintptr_t, std::uintptr_t>> ranges_of(const TrainingGraph& tg, braid::BufferId b) {
    const braid::Buffer& buf = tg.graph.buffer(b);
    std::vector<std::pair<std::uintptr_t, std::uintptr_t>> out;
    const std::uintptr_t start = fake_base(buf.root) + buf.root_offset_bytes;
    for (std::uint64_t k = 0; k < buf.chunks; ++k) {
        const std::uintptr_t s = start + k * buf.stride_bytes;
        out.emplace_back(s, s + buf.bytes);
    }
    return out;
}

bool inside(const Touch& t, const std::vector<std::pair<std::uintptr_t, std::uintptr_t>>& ranges) {
    for (const auto& [b, e] : ranges)
        if (t.begin >= b && t.end <= e) return true;
    return false;
}

bool overlaps(const Touch& t, const std::vector<std::pair<std::uintptr_t, std::uintptr_t>>& ranges) {
    for (const auto& [b, e] : ranges)
        if (t.begin < e && b < t.end) return true;
    return false;
}

// Checks every op of `tg`; returns how many records were checked.
std::size_t check_bindings(const TrainingGraph& tg) {
    const RootMemory memory = [](braid::BufferId root) { return reinterpret_cast<std::byte*>(fake_base(root)); };
    std::size_t checked = 0;
    for (const braid::Op& op : tg.graph.ops()) {
        CAPTURE(op.name);
        const BoundOp bound = bind_op(tg, op.id, memory);
        CHECK(bound.op == op.id);
        CHECK(bound.layer == tg.ops[op.id].layer);
        const Touches t = touches_of(bound.args);
        for (const Touch& touch : t.all) {
            CAPTURE(touch.what);
            bool declared = false;
            for (braid::BufferId w : op.writes) declared = declared || inside(touch, ranges_of(tg, w));
            if (!touch.write)
                for (braid::BufferId r : op.reads) declared = declared || inside(touch, ranges_of(tg, r));
            CHECK_MESSAGE(declared, (touch.write ? "written" : "read") << " outside the op's declared buffers");
        }
        for (const auto* list : {&op.reads, &op.writes})
            for (braid::BufferId b : *list) {
                CAPTURE(tg.graph.buffer(b).name);
                bool used = false;
                for (const Touch& touch : t.all) used = used || overlaps(touch, ranges_of(tg, b));
                CHECK_MESSAGE(used, "a declared buffer the record never touches");
            }
        ++checked;
    }
    return checked;
}

}  // namespace

TEST_SUITE("cpu") {

TEST_CASE("one binder for every backend: each op's record touches exactly the buffers the op declares") {
    for (const std::string& name : network_names())
        for (int variant = 0; variant < 8; ++variant) {
            // A fused ReLU's backward reads the output too; shared sums read
            // dgamma, dbeta; a bucket's update every tensor of its layers.
            const bool fused = (variant & 1) != 0, shared = (variant & 2) != 0, bucketed = (variant & 4) != 0;
            CAPTURE(name);
            CAPTURE(fused);
            CAPTURE(shared);
            TrainConfig c;
            c.model.net = name;
            c.model.batch = 2;
            c.model.image = default_image(name);
            c.model.fuse_relu = fused;
            c.model.share_batch_norm_sums = shared;
            c.model.update_bucket_bytes = bucketed ? std::uint64_t{4} << 20 : 0;
            CAPTURE(bucketed);
            const TrainingGraph tg = build_training_graph(c);
            CHECK(check_bindings(tg) == tg.graph.op_count());
        }
}

TEST_CASE("channels-last views: whole tensors as in NCHW; a concat's slices start at their first channel, pixels the concat's channels apart, and tile its channels") {
    for (const std::string name : {"googlenet", "inception_v3"})
        for (const std::uint32_t batch : {1u, 2u}) {  // at batch 1 a slice is one chunk
            CAPTURE(name);
            CAPTURE(batch);
            TrainConfig c;
            c.model.net = name;
            c.model.batch = batch;
            c.model.image = default_image(name);
            c.model.width_scale = 0.25;
            const TrainingGraph tg = build_training_graph(c);
            const auto base = [](braid::BufferId root) { return reinterpret_cast<std::byte*>(fake_base(root)); };
            std::map<braid::BufferId, std::vector<std::pair<std::uint32_t, std::uint32_t>>> channels;  // per concat buffer
            for (const braid::Buffer& b : tg.graph.buffers()) {
                if (tg.buffers[b.id].element != ElementType::f32) continue;
                CAPTURE(b.name);
                const TensorView<float> nchw = tensor_view(tg, b.id, base(b.root));
                const TensorView<float> nhwc = channels_last_view(tg, b.id, base(b.root));
                if (!b.parent) {
                    CHECK(nhwc.data == nchw.data);
                    CHECK(nhwc.image_stride == nchw.image_stride);
                    CHECK(nhwc.pixel_stride == 0);
                    continue;
                }
                const Shape4 whole = tg.buffers[*b.parent].shape;
                const float* start = reinterpret_cast<const float*>(base(b.root) + tg.graph.buffer(*b.parent).root_offset_bytes);
                const auto first = static_cast<std::uint32_t>((nchw.data - start) / static_cast<std::ptrdiff_t>(whole.plane_elements()));
                CHECK(nhwc.data == start + first);
                CHECK(nhwc.pixel_stride == whole.c);
                CHECK(nhwc.image_stride == whole.image_elements());
                CHECK(nhwc.shape == nchw.shape);
                channels[*b.parent].emplace_back(first, first + nchw.shape.c);
            }
            // Each concat's value (and gradient) slices cover its channels once: disjoint in NHWC as in NCHW.
            CHECK(channels.size() >= 2);
            for (auto& entry : channels) {
                const braid::BufferId parent = entry.first;  // a binding CAPTURE's lambda could not use before clang 16
                auto& ranges = entry.second;
                CAPTURE(tg.graph.buffer(parent).name);
                std::sort(ranges.begin(), ranges.end());
                std::uint32_t next = 0;
                for (const auto& [lo, hi] : ranges) {
                    CHECK(lo == next);
                    next = hi;
                }
                CHECK(next == tg.buffers[parent].shape.c);
            }
            // The binder hands ops these views: a branch's last batch norm writes its slice.
            const RootMemory memory = base;
            std::size_t slices = 0;
            for (const braid::Op& op : tg.graph.ops()) {
                const BoundOp bound = bind_op(tg, op.id, memory, true);
                if (const auto* f = std::get_if<bound::BnForward>(&bound.args); f && f->y.pixel_stride != 0) ++slices;
                if (const auto* f = std::get_if<bound::ReluForward>(&bound.args); f && f->y.pixel_stride != 0) ++slices;
            }
            CHECK(slices > 0);
        }
}

TEST_CASE("the binder refuses an op that is not in the graph, naming it") {
    TrainConfig c;
    c.model.net = "resnet18";
    c.model.batch = 2;
    c.model.image = 64;
    const TrainingGraph tg = build_training_graph(c);
    const RootMemory memory = [](braid::BufferId root) { return reinterpret_cast<std::byte*>(fake_base(root)); };
    CHECK_THROWS_WITH_AS(bind_op(tg, static_cast<braid::OpId>(tg.graph.op_count()), memory),
                         doctest::Contains("is not in a graph of"), braid::GraphError);
}

}  // TEST_SUITE
