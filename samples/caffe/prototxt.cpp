// The prototxt reader: protobuf's text format parses the file into the
// messages of caffe.proto (unknown fields skipped with a warning, which
// becomes a note), then one pass over the layers in file order builds the
// braid network. Caffe runs layers in file order and a bottom must be a top
// of an earlier layer, so that pass also finds cycles and missing bottoms.
#include "caffe/prototxt.hpp"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "caffe.pb.h"

namespace braid::samples {

namespace {

namespace pb = google::protobuf;
namespace cf = braid::caffe;

// Notes deduplicated by key, in the order they first came up.
class Notes {
public:
    void add(const std::string& key, const std::string& text, int line) {
        auto [it, fresh] = index_.try_emplace(key, entries_.size());
        if (fresh) entries_.push_back(Entry{text, line, 0});
        ++entries_[it->second].count;
    }
    // By the line each first came up on.
    std::vector<std::string> lines() const {
        std::vector<Entry> sorted = entries_;
        std::stable_sort(sorted.begin(), sorted.end(), [](const Entry& a, const Entry& b) { return a.line < b.line; });
        std::vector<std::string> out;
        for (const Entry& e : sorted) {
            std::string s = e.text;
            if (e.count > 1) s += " (" + std::to_string(e.count) + " times, first on line " + std::to_string(e.line) + ")";
            else if (e.line > 0) s += " (line " + std::to_string(e.line) + ")";
            out.push_back(std::move(s));
        }
        return out;
    }

private:
    struct Entry {
        std::string text;
        int line;
        int count;
    };
    std::map<std::string, std::size_t> index_;
    std::vector<Entry> entries_;
};

// Parse errors go into the message; unknown fields (warnings, as the parser
// is told to skip them) become notes.
class Collector : public pb::io::ErrorCollector {
public:
    Collector(const std::string& source, Notes& notes) : source_(source), notes_(notes) {}
    void AddError(int line, pb::io::ColumnNumber column, const std::string& message) override {
        if (error_.empty())
            error_ = source_ + ":" + std::to_string(line + 1) + ":" + std::to_string(column + 1) + ": " + message;
    }
    void AddWarning(int line, pb::io::ColumnNumber, const std::string& message) override {
        static const std::regex unknown(R"re(Message type "braid\.caffe\.(\w+)" has no field named "(\w+)")re");
        std::smatch m;
        if (std::regex_search(message, m, unknown)) {
            const std::string key = m[1].str() + "." + m[2].str();
            notes_.add("field " + key, "ignored: field '" + m[2].str() + "' of " + m[1].str() + " (braid does not read it)",
                       line + 1);
        } else {
            notes_.add("warning " + message, "protobuf: " + message, line + 1);
        }
    }
    const std::string& error() const noexcept { return error_; }

private:
    const std::string& source_;
    Notes& notes_;
    std::string error_;
};

// One layer of either format, with its params (default instances where the
// file sets none) and its line.
struct CaffeLayer {
    std::string name;
    std::string type;  // in the current format's spelling ("Convolution")
    std::vector<std::string> bottoms, tops;
    int line = 0;
    bool in_train = true;
    std::vector<float> loss_weights;  // one per top in Caffe; braid's loss has one
    const cf::ConvolutionParameter* conv = nullptr;
    const cf::PoolingParameter* pool = nullptr;
    const cf::LRNParameter* lrn = nullptr;
    const cf::ReLUParameter* relu = nullptr;
    const cf::BatchNormParameter* batch_norm = nullptr;
    const cf::ScaleParameter* scale = nullptr;
    const cf::EltwiseParameter* eltwise = nullptr;
    const cf::ConcatParameter* concat = nullptr;
    const cf::InnerProductParameter* inner_product = nullptr;
    const cf::DropoutParameter* dropout = nullptr;
    const cf::SoftmaxParameter* softmax = nullptr;
    const cf::DataParameter* data = nullptr;
    const cf::ImageDataParameter* image_data = nullptr;
    const cf::InputParameter* input = nullptr;
    const cf::TransformationParameter* transform = nullptr;
};

// A layer runs in the TRAIN phase unless its phase, an include rule or an
// exclude rule says otherwise (Caffe's NetStateRule, phase part only).
template <class Rules>
bool runs_in_train(bool has_phase, cf::Phase phase, const Rules& include, const Rules& exclude) {
    if (has_phase && phase != cf::TRAIN) return false;
    for (const cf::NetStateRule& r : exclude)
        if (!r.has_phase() || r.phase() == cf::TRAIN) return false;
    if (include.empty()) return true;
    for (const cf::NetStateRule& r : include)
        if (!r.has_phase() || r.phase() == cf::TRAIN) return true;
    return false;
}

template <class L>
void take_params(CaffeLayer& c, const L& l) {
    c.name = l.name();
    c.bottoms.assign(l.bottom().begin(), l.bottom().end());
    c.tops.assign(l.top().begin(), l.top().end());
    c.loss_weights.assign(l.loss_weight().begin(), l.loss_weight().end());
    c.conv = &l.convolution_param();
    c.pool = &l.pooling_param();
    c.lrn = &l.lrn_param();
    c.relu = &l.relu_param();
    c.eltwise = &l.eltwise_param();
    c.concat = &l.concat_param();
    c.inner_product = &l.inner_product_param();
    c.dropout = &l.dropout_param();
    c.softmax = &l.softmax_param();
    c.data = &l.data_param();
    c.image_data = &l.image_data_param();
    c.transform = &l.transform_param();
}

CaffeLayer from_current(const cf::LayerParameter& l, int line) {
    CaffeLayer c;
    take_params(c, l);
    c.type = l.type();
    c.line = line;
    c.in_train = runs_in_train(l.has_phase(), l.phase(), l.include(), l.exclude());
    c.batch_norm = &l.batch_norm_param();
    c.scale = &l.scale_param();
    c.input = &l.input_param();
    return c;
}

std::string current_type_name(cf::V1LayerParameter::LayerType t) {
    using V1 = cf::V1LayerParameter;
    static const std::map<int, std::string> names{
        {V1::ACCURACY, "Accuracy"}, {V1::CONCAT, "Concat"},           {V1::CONVOLUTION, "Convolution"},
        {V1::DATA, "Data"},         {V1::DROPOUT, "Dropout"},         {V1::ELTWISE, "Eltwise"},
        {V1::IMAGE_DATA, "ImageData"}, {V1::INNER_PRODUCT, "InnerProduct"}, {V1::LRN, "LRN"},
        {V1::POOLING, "Pooling"},   {V1::RELU, "ReLU"},               {V1::SOFTMAX, "Softmax"},
        {V1::SOFTMAX_LOSS, "SoftmaxWithLoss"}, {V1::SPLIT, "Split"},
    };
    auto it = names.find(t);
    return it != names.end() ? it->second : V1::LayerType_Name(t);
}

CaffeLayer from_legacy(const cf::V1LayerParameter& l, int line) {
    CaffeLayer c;
    take_params(c, l);
    c.type = current_type_name(l.type());
    c.line = line;
    c.in_train = runs_in_train(false, cf::TRAIN, l.include(), l.exclude());
    c.batch_norm = &cf::BatchNormParameter::default_instance();
    c.scale = &cf::ScaleParameter::default_instance();
    c.input = &cf::InputParameter::default_instance();
    return c;
}

// Bounds on what a file may ask for, so that a hostile or mistyped number
// is an error naming the layer, not an overflow or a plan for an absurd net.
constexpr std::uint32_t max_window = 65535;          // kernel, stride, pad, LRN window
constexpr std::uint32_t max_outputs = 1u << 20;      // num_output
constexpr std::uint64_t max_tensor_elements = 1ull << 40;

// N*C*H*W, or nothing when it passes max_tensor_elements (checked before
// each product, so it cannot wrap).
std::optional<std::uint64_t> bounded_elements(Shape4 s) {
    std::uint64_t n = 1;
    for (std::uint64_t d : {std::uint64_t{s.n}, std::uint64_t{s.c}, std::uint64_t{s.h}, std::uint64_t{s.w}}) {
        if (d != 0 && n > max_tensor_elements / d) return std::nullopt;
        n *= d;
    }
    return n;
}

struct Blob {
    enum class Kind { tensor, label } kind = Kind::tensor;
    TensorId tensor = 0;
    std::string producer;  // layer name ("" for the net's inputs)
};

// A Caffe BatchNorm waiting for the Scale that gives it its scale and shift.
struct PendingBatchNorm {
    std::string name;
    int line = 0;
    TensorId input = 0;
    BatchNormConfig config;
};

class Converter {
public:
    Converter(const std::string& source, const PrototxtOptions& options, Notes& notes)
        : source_(source), options_(options), notes_(notes) {}

    Network convert(const cf::NetParameter& net, const std::vector<CaffeLayer>& layers, int legacy_input_line) {
        net_name_ = net.has_name() && !net.name().empty() ? net.name() : std::filesystem::path(source_).stem().string();
        index_producers(layers);
        if (net.input_size() > 0) legacy_inputs(net, legacy_input_line);
        for (const CaffeLayer& l : layers) {
            if (!l.in_train) {
                notes_.add("phase", "skipped: layers of the TEST phase only (braid builds the training step)", l.line);
                continue;
            }
            current_ = &l;
            layer(l);
        }
        current_ = nullptr;
        if (!pending_.empty()) {
            const PendingBatchNorm& p = pending_.begin()->second;
            throw PrototxtError(at(p.line) + "layer '" + p.name + "' (BatchNorm): " + no_scale_message());
        }
        if (!builder_) throw PrototxtError(source_ + ": the net has no input (an Input, Data or ImageData layer, or "
                                                     "`input:` with `input_shape` or `input_dim`)");
        if (!has_loss_ && softmax_output_) {
            const auto [name, line, logits] = *softmax_output_;
            try {
                builder_->softmax_loss(name, logits, SoftmaxLossConfig{1.0f});
            } catch (const ShapeError& e) {
                throw PrototxtError(at(line) + e.what());
            }
            notes_.add("softmax", "layer '" + name +
                                      "' (Softmax) is the net's output and it has no loss: trained as SoftmaxWithLoss "
                                      "with synthetic labels",
                       line);
        }
        try {
            return builder_->finish();
        } catch (const ShapeError& e) {
            throw PrototxtError(source_ + ": " + e.what());
        }
    }

private:
    std::string at(int line) const { return source_ + ":" + std::to_string(line) + ": "; }
    [[noreturn]] void fail(const std::string& why) const {
        throw PrototxtError(at(current_->line) + "layer '" + current_->name + "' (" + current_->type + "): " + why);
    }
    static std::string no_scale_message() {
        return "braid's batch norm learns a scale and a shift, so a BatchNorm must be followed by a Scale layer with "
               "`bias_term: true` that reads its top";
    }
    void note(const std::string& key, const std::string& text) { notes_.add(key, text, current_->line); }

    void index_producers(const std::vector<CaffeLayer>& layers) {
        for (const CaffeLayer& l : layers)
            if (l.in_train)
                for (const std::string& t : l.tops) later_.try_emplace(t, &l);
    }

    // --- inputs ---------------------------------------------------------

    Shape4 input_shape(std::vector<std::int64_t> dims, const std::string& what) {
        if (dims.size() != 4)
            fail(what + " has " + std::to_string(dims.size()) + " dimensions; braid's input is N x C x H x W");
        for (std::int64_t d : dims)
            if (d < 1 || d > (std::int64_t{1} << 24)) fail(what + " has a dimension of " + std::to_string(d));
        Shape4 s{static_cast<std::uint32_t>(dims[0]), static_cast<std::uint32_t>(dims[1]),
                 static_cast<std::uint32_t>(dims[2]), static_cast<std::uint32_t>(dims[3])};
        if (options_.batch) s.n = *options_.batch;
        if (options_.image) s.h = s.w = *options_.image;
        return s;
    }

    // The input as the net will train it (after --batch and --image), within
    // the limits the tools' --batch and --image have.
    void start(Shape4 images, const std::string& images_blob, const std::vector<std::string>& label_blobs) {
        if (builder_) fail("the net already has an input; braid trains nets with one image input");
        const std::string input = "the input " + to_string(images);
        if (images.n > max_input_batch)
            fail(input + " has a batch of " + std::to_string(images.n) + ", more than " + std::to_string(max_input_batch) +
                 ", braid's limit (as for --batch)");
        if (images.h > max_input_side || images.w > max_input_side)
            fail(input + " is larger than " + std::to_string(max_input_side) + " pixels on a side, braid's limit (as for --image)");
        if (images.c > max_outputs)
            fail(input + " has more than " + std::to_string(max_outputs) + " channels, braid's limit");
        if (!bounded_elements(images)) fail(input + " has more than 2^40 elements, braid's limit for one tensor");
        try {
            builder_.emplace(net_name_, images);
        } catch (const ShapeError& e) {
            fail(e.what());
        }
        blobs_[images_blob] = Blob{Blob::Kind::tensor, builder_->images(), ""};
        for (const std::string& l : label_blobs) blobs_[l] = Blob{Blob::Kind::label, 0, ""};
    }

    void legacy_inputs(const cf::NetParameter& net, int line) {
        CaffeLayer pseudo;
        pseudo.name = net.input(0);
        pseudo.type = "input";
        pseudo.line = line;
        current_ = &pseudo;
        std::vector<std::int64_t> dims;
        if (net.input_shape_size() > 0) {
            dims.assign(net.input_shape(0).dim().begin(), net.input_shape(0).dim().end());
        } else if (net.input_dim_size() >= 4) {
            dims.assign(net.input_dim().begin(), net.input_dim().begin() + 4);
        } else {
            fail("`input:` needs `input_shape { dim: ... }` or four `input_dim:` values");
        }
        start(input_shape(dims, "input '" + net.input(0) + "'"), net.input(0),
              std::vector<std::string>(net.input().begin() + 1, net.input().end()));
        if (net.input_size() > 2) fail("more than two inputs (images and labels)");
        current_ = nullptr;
    }

    void input_layer(const CaffeLayer& l) {
        if (l.tops.empty() || l.tops.size() > 2) fail("needs one top (the images) or two (images and labels)");
        const auto& shapes = l.input->shape();
        if (shapes.empty()) {
            if (!options_.batch || !options_.image)
                fail("input_param has no shape; give one or --batch and --image (3 channels are then assumed)");
            start(Shape4{*options_.batch, 3, *options_.image, *options_.image}, l.tops[0], {l.tops.begin() + 1, l.tops.end()});
            return;
        }
        if (shapes.size() != 1 && static_cast<std::size_t>(shapes.size()) != l.tops.size())
            fail("has " + std::to_string(shapes.size()) + " shapes for " + std::to_string(l.tops.size()) + " tops");
        start(input_shape({shapes[0].dim().begin(), shapes[0].dim().end()}, "input_param's shape"), l.tops[0],
              {l.tops.begin() + 1, l.tops.end()});
    }

    // Data and ImageData read a database or an image list; braid trains on
    // synthetic data of the same shape.
    void data_layer(const CaffeLayer& l) {
        if (l.tops.empty() || l.tops.size() > 2) fail("needs one top (the images) or two (images and labels)");
        std::optional<std::uint32_t> batch = options_.batch, height = options_.image, width = options_.image;
        std::uint32_t channels = 3;
        if (l.type == "Data") {
            if (!batch && l.data->has_batch_size()) batch = l.data->batch_size();
        } else {
            if (!batch) batch = l.image_data->batch_size();
            if (!height && l.image_data->new_height() > 0) height = l.image_data->new_height();
            if (!width && l.image_data->new_width() > 0) width = l.image_data->new_width();
            if (!l.image_data->is_color()) channels = 1;
        }
        if (!options_.image && l.transform->crop_size() > 0) height = width = l.transform->crop_size();
        const std::string params = l.type == "Data" ? "data_param" : "image_data_param";
        if (!batch || *batch == 0) fail(params + " has no batch_size; give one or --batch");
        if (!height || !width)
            fail(std::string("the image size is not in the file (no transform_param.crop_size") +
                 (l.type == "Data" ? "" : ", or not both of image_data_param.new_height and new_width") + "); give --image");
        if (l.type == "Data")
            note("data channels", "layer '" + l.name +
                                      "' (Data): the channel count comes from the database, not the file; braid "
                                      "assumes 3 and trains on synthetic images");
        start(Shape4{*batch, channels, *height, *width}, l.tops[0], {l.tops.begin() + 1, l.tops.end()});
    }

    // --- blobs ----------------------------------------------------------

    const Blob& bottom(const std::string& name) {
        auto it = blobs_.find(name);
        if (it != blobs_.end()) return it->second;
        if (softmax_tops_.count(name))
            fail("reads '" + name + "', a Softmax output; braid trains a softmax only as the net's last layer or "
                 "inside SoftmaxWithLoss");
        auto later = later_.find(name);
        if (later != later_.end() && later->second == current_)
            fail("reads its own top '" + name + "', which no earlier layer produces");
        // (Both point into the one vector of layers, in file order.)
        if (later != later_.end() && later->second < current_)
            fail("bottom '" + name + "' is the top of layer '" + later->second->name + "' (" + later->second->type +
                 ", line " + std::to_string(later->second->line) +
                 "), which braid folds into the layer after it or skips; read that layer's top instead");
        if (later != later_.end())
            fail("bottom '" + name + "' is produced only by layer '" + later->second->name + "' on line " +
                 std::to_string(later->second->line) +
                 ", which comes later; Caffe runs layers in file order, so the net has a cycle or its layers are out "
                 "of order");
        fail("no earlier layer has a top named '" + name + "'");
    }

    TensorId tensor(const std::string& name) {
        if (auto p = pending_.find(name); p != pending_.end())
            fail("reads the top of BatchNorm '" + p->second.name + "' before a Scale does; " + no_scale_message());
        const Blob& b = bottom(name);
        if (b.kind == Blob::Kind::label) fail("reads the labels '" + name + "'; only a loss layer may");
        return b.tensor;
    }

    void need_bottoms(std::size_t n) {
        if (current_->bottoms.size() != n)
            fail("needs " + std::to_string(n) + " bottom" + (n == 1 ? "" : "s") + ", has " +
                 std::to_string(current_->bottoms.size()));
    }
    void need_one_top() {
        if (current_->tops.size() != 1) fail("needs one top, has " + std::to_string(current_->tops.size()));
    }

    // The layer's top now names `t`; in place (top == bottom) replaces what
    // the name meant, otherwise a name may be produced once.
    void define(const std::string& top, TensorId t) {
        const bool in_place = std::find(current_->bottoms.begin(), current_->bottoms.end(), top) != current_->bottoms.end();
        auto it = blobs_.find(top);
        if (it != blobs_.end() && !in_place)
            fail("top '" + top + "' is already produced by " +
                 (it->second.producer.empty() ? std::string("the net's input") : "layer '" + it->second.producer + "'") +
                 "; only an in-place layer (top == bottom) may reuse a name");
        blobs_[top] = Blob{Blob::Kind::tensor, t, current_->name};
    }

    template <class Build>
    void unary(Build build) {
        need_bottoms(1);
        need_one_top();
        const TensorId x = tensor(current_->bottoms[0]);
        define(current_->tops[0], guarded([&] { return build(x); }));
    }

    template <class Build>
    TensorId guarded(Build build) {
        TensorId t = 0;
        try {
            t = build();
        } catch (const ShapeError& e) {
            // NetworkBuilder's message names the network and the layer already.
            throw PrototxtError(at(current_->line) + e.what());
        }
        const Shape4 s = builder_->shape(t);
        if (!bounded_elements(s))
            fail("its output " + to_string(s) + " has more than 2^40 elements, braid's limit for one tensor");
        return t;
    }

    std::uint32_t bounded(const char* what, std::uint32_t value, std::uint32_t limit) {
        if (value > limit)
            fail(std::string(what) + " " + std::to_string(value) + " is more than " + std::to_string(limit) +
                 ", braid's limit");
        return value;
    }

    // --- fields ---------------------------------------------------------

    // A height and width from Caffe's `x` (one value, or repeated: height
    // then width), or from `x_h` and `x_w`.
    Size2 spatial(const char* what, const std::vector<std::uint32_t>& values, bool has_h, std::uint32_t h, bool has_w,
                  std::uint32_t w, std::uint32_t fallback) {
        if (has_h || has_w) {
            if (!values.empty()) fail(std::string("sets both ") + what + " and " + what + "_h/" + what + "_w");
            if (has_h != has_w) fail(std::string("sets only one of ") + what + "_h and " + what + "_w");
            return {bounded(what, h, max_window), bounded(what, w, max_window)};
        }
        if (values.empty()) return fallback;
        for (std::uint32_t v : values) bounded(what, v, max_window);
        if (values.size() > 2) fail(std::string("has ") + std::to_string(values.size()) + " " + what + " values for 2 spatial axes");
        return values.size() == 2 ? Size2{values[0], values[1]} : Size2{values[0]};
    }

    // One value for what braid keeps square (strides, pooling windows and
    // pads); `which` names them in the refusal.
    std::uint32_t square(const char* what, const std::vector<std::uint32_t>& values, bool has_h, std::uint32_t h,
                         bool has_w, std::uint32_t w, std::uint32_t fallback, const char* which) {
        const Size2 s = spatial(what, values, has_h, h, has_w, w, fallback);
        if (!s.square()) {
            if (has_h) fail(std::string(what) + "_h " + std::to_string(s.h) + " differs from " + what + "_w " +
                            std::to_string(s.w) + "; braid's " + which + " are square");
            fail(std::string(what) + " " + std::to_string(s.h) + " x " + std::to_string(s.w) + " is not square; braid's " +
                 which + " are square");
        }
        return s.h;
    }

    InitRule weight_rule(const cf::ConvolutionParameter& p) {
        if (!p.has_weight_filler()) {
            note("conv no filler", "convolutions without weight_filler (Caffe would start them at 0) start from "
                                   "braid's he_uniform");
            return InitRule::he_uniform;
        }
        const cf::FillerParameter& f = p.weight_filler();
        if (f.type() == "xavier" && f.variance_norm() == cf::FillerParameter::FAN_IN) return InitRule::xavier_uniform;
        if (f.type() == "msra" && f.variance_norm() == cf::FillerParameter::FAN_IN) {
            note("msra", "weight_filler \"msra\" (Gaussian, variance 2/fan_in) is drawn uniform with the same variance "
                         "(he_uniform)");
            return InitRule::he_uniform;
        }
        note("filler " + f.type(), "weight_filler \"" + f.type() + "\"" +
                                       (f.variance_norm() != cf::FillerParameter::FAN_IN ? " (not FAN_IN)" : "") +
                                       " is not one of braid's; those convolutions start from he_uniform");
        return InitRule::he_uniform;
    }

    float bias_value(const cf::ConvolutionParameter& p) {
        if (!p.bias_term() || !p.has_bias_filler()) return 0.0f;
        const cf::FillerParameter& f = p.bias_filler();
        if (f.type() == "constant") {
            if (!std::isfinite(f.value())) fail("bias_filler's value must be finite, got " + fmt::format("{}", f.value()));
            return f.value();
        }
        note("bias filler " + f.type(), "bias_filler \"" + f.type() + "\" is not one of braid's; those biases start at 0");
        return 0.0f;
    }

    // --- layers ---------------------------------------------------------

    void layer(const CaffeLayer& l) {
        if (l.name.empty()) fail("has no name");
        if (l.type != "SoftmaxWithLoss")
            for (float w : l.loss_weights)
                if (w != 0.0f)
                    fail("loss_weight " + fmt::format("{}", w) +
                         ": braid's loss is its SoftmaxWithLoss layer; no other layer's top adds to it");
        if (l.type == "Input") return input_layer(l);
        if (l.type == "Data" || l.type == "ImageData") return data_layer(l);
        if (l.type == "Accuracy") {
            note("accuracy", "skipped: Accuracy layers (they measure, they do not train)");
            return;
        }
        if (!builder_) fail("comes before the net's input (an Input, Data or ImageData layer, or `input:`)");
        if (l.type == "Convolution") return convolution(l);
        if (l.type == "Pooling") return pooling(l);
        if (l.type == "LRN") return lrn(l);
        if (l.type == "ReLU") {
            if (l.relu->negative_slope() != 0.0f) fail("negative_slope must be 0; braid has no leaky ReLU");
            return unary([&](TensorId x) { return builder_->relu(l.name, x); });
        }
        if (l.type == "BatchNorm") return batch_norm(l);
        if (l.type == "Scale") return scale(l);
        if (l.type == "Eltwise") return eltwise(l);
        if (l.type == "Concat") return concat(l);
        if (l.type == "InnerProduct") return inner_product(l);
        if (l.type == "Dropout") {
            const float ratio = l.dropout->dropout_ratio();
            if (!(ratio >= 0.0f && ratio < 1.0f)) fail("dropout_ratio must be in [0, 1), got " + std::to_string(ratio));
            return unary([&](TensorId x) { return builder_->dropout(l.name, x, DropoutConfig{ratio}); });
        }
        if (l.type == "Split") {
            need_bottoms(1);
            const TensorId x = tensor(l.bottoms[0]);
            for (const std::string& t : l.tops) define(t, x);
            return;
        }
        if (l.type == "SoftmaxWithLoss") return softmax_loss(l);
        if (l.type == "Softmax") return softmax(l);
        fail("braid does not train this layer type; it reads Input, Data, ImageData, Convolution, Pooling, LRN, ReLU, "
             "BatchNorm + Scale, Eltwise (SUM), Concat, InnerProduct, Dropout, Split, Softmax, SoftmaxWithLoss and "
             "skips Accuracy");
    }

    void convolution(const CaffeLayer& l) {
        const cf::ConvolutionParameter& p = *l.conv;
        if (!p.has_num_output() || p.num_output() == 0) fail("convolution_param needs num_output > 0");
        bounded("num_output", p.num_output(), max_outputs);
        if (p.axis() != 1) fail("axis must be 1 (channels)");
        // Kernels and pads may be rectangular (Inception-v3's 1x7), strides not.
        const Size2 kernel = spatial("kernel", {p.kernel_size().begin(), p.kernel_size().end()}, p.has_kernel_h(),
                                     p.kernel_h(), p.has_kernel_w(), p.kernel_w(), 0);
        if (kernel.h == 0 || kernel.w == 0) fail("convolution_param needs kernel_size (or kernel_h and kernel_w)");
        const std::uint32_t stride = square("stride", {p.stride().begin(), p.stride().end()}, p.has_stride_h(),
                                            p.stride_h(), p.has_stride_w(), p.stride_w(), 1, "convolution strides");
        const Size2 pad =
            spatial("pad", {p.pad().begin(), p.pad().end()}, p.has_pad_h(), p.pad_h(), p.has_pad_w(), p.pad_w(), 0);
        for (std::uint32_t d : p.dilation())
            if (d != 1) fail("dilation " + std::to_string(d) + ": braid's convolutions are not dilated (dilation 1 only)");
        if (stride == 0) fail("stride must be at least 1");
        ConvConfig c;
        c.out_channels = p.num_output();
        c.kernel = kernel;
        c.stride = stride;
        c.pad = pad;
        c.groups = p.group();
        c.bias = p.bias_term();
        c.weight_init = weight_rule(p);
        c.bias_init = bias_value(p);
        unary([&](TensorId x) { return builder_->conv(l.name, x, c); });
    }

    void pooling(const CaffeLayer& l) {
        const cf::PoolingParameter& p = *l.pool;
        PoolConfig c;
        switch (p.pool()) {
            case cf::PoolingParameter::MAX: c.mode = PoolMode::max; break;
            case cf::PoolingParameter::AVE: c.mode = PoolMode::average; break;
            default: fail("pool: STOCHASTIC is not one of braid's (MAX and AVE are)");
        }
        c.ceil_mode = p.round_mode() == cf::PoolingParameter::CEIL;
        c.global = p.global_pooling();
        if (c.global) {
            c.ceil_mode = false;  // one window: rounding does not arise
            if (p.has_kernel_size() || p.has_kernel_h() || p.has_kernel_w())
                fail("global_pooling takes the whole feature map; it cannot also set a kernel size");
            c.kernel = 0;
            c.stride = 1;
            c.pad = 0;
        } else {
            std::vector<std::uint32_t> k, s, pad;
            if (p.has_kernel_size()) k.push_back(p.kernel_size());
            if (p.has_stride()) s.push_back(p.stride());
            if (p.has_pad()) pad.push_back(p.pad());
            const char* pools = "pooling windows";
            c.kernel = square("kernel", k, p.has_kernel_h(), p.kernel_h(), p.has_kernel_w(), p.kernel_w(), 0, pools);
            if (c.kernel == 0) fail("pooling_param needs kernel_size (or kernel_h and kernel_w, or global_pooling)");
            c.stride = square("stride", s, p.has_stride_h(), p.stride_h(), p.has_stride_w(), p.stride_w(), 1, pools);
            c.pad = square("pad", pad, p.has_pad_h(), p.pad_h(), p.has_pad_w(), p.pad_w(), 0, pools);
            if (c.stride == 0) fail("stride must be at least 1");
            if (c.pad >= c.kernel)
                fail("pad " + std::to_string(c.pad) + " must be less than the kernel " + std::to_string(c.kernel) +
                     " (Caffe's rule too: a window must not lie wholly in the padding)");
        }
        unary([&](TensorId x) { return builder_->pool(l.name, x, c); });
    }

    void lrn(const CaffeLayer& l) {
        const cf::LRNParameter& p = *l.lrn;
        if (p.norm_region() != cf::LRNParameter::ACROSS_CHANNELS)
            fail("norm_region WITHIN_CHANNEL is not one of braid's (ACROSS_CHANNELS is)");
        if (p.local_size() % 2 == 0) fail("local_size must be odd, got " + std::to_string(p.local_size()));
        bounded("local_size", p.local_size(), max_window);
        unary([&](TensorId x) { return builder_->lrn(l.name, x, LrnConfig{p.local_size(), p.alpha(), p.beta(), p.k()}); });
    }

    void batch_norm(const CaffeLayer& l) {
        need_bottoms(1);
        need_one_top();
        const cf::BatchNormParameter& p = *l.batch_norm;
        if (p.use_global_stats())
            note("global stats", "use_global_stats: true (frozen statistics, a deploy setting) is not how braid "
                                 "trains; its batch norms normalise with the batch's statistics");
        const float fraction = p.moving_average_fraction();
        if (!(fraction >= 0.0f && fraction < 1.0f))
            fail("moving_average_fraction must be in [0, 1), got " + std::to_string(fraction));
        if (!(p.eps() > 0.0f) || !std::isfinite(p.eps())) fail("eps must be a finite number > 0, got " + fmt::format("{}", p.eps()));
        PendingBatchNorm pending{l.name, l.line, tensor(l.bottoms[0]), BatchNormConfig{p.eps(), 1.0f - fraction}};
        // In place, the top shadows the bottom until the Scale reads it.
        blobs_.erase(l.tops[0]);
        pending_[l.tops[0]] = pending;
        note("bn momentum", "BatchNorm's moving_average_fraction f becomes the running-average momentum 1 - f (Caffe "
                            "also rescales its running sums; braid keeps plain running averages)");
    }

    void scale(const CaffeLayer& l) {
        need_bottoms(1);
        need_one_top();
        auto it = pending_.find(l.bottoms[0]);
        if (it == pending_.end())
            fail("braid reads Scale only as the scale and shift of the BatchNorm right before it; bottom '" +
                 l.bottoms[0] + "' is not a BatchNorm's top");
        if (!l.scale->bias_term()) fail("needs `bias_term: true`: braid's batch norm learns a shift with its scale");
        if (l.scale->axis() != 1 || l.scale->num_axes() != 1) fail("axis and num_axes must be 1 (one value per channel)");
        const PendingBatchNorm p = it->second;
        pending_.erase(it);
        define(l.tops[0], guarded([&] { return builder_->batch_norm(p.name, p.input, p.config); }));
        note("bn scale", "each BatchNorm + Scale pair is one braid batch norm named after the BatchNorm layer");
    }

    void eltwise(const CaffeLayer& l) {
        if (l.eltwise->operation() != cf::EltwiseParameter::SUM) fail("only operation: SUM is one of braid's");
        for (float c : l.eltwise->coeff())
            if (c != 1.0f) fail("coeff " + std::to_string(c) + ": braid adds with coefficient 1");
        need_bottoms(2);
        need_one_top();
        const TensorId a = tensor(l.bottoms[0]), b = tensor(l.bottoms[1]);
        define(l.tops[0], guarded([&] { return builder_->add(l.name, a, b); }));
    }

    void concat(const CaffeLayer& l) {
        const int axis = l.concat->has_axis() ? l.concat->axis() : static_cast<int>(l.concat->concat_dim());
        if (axis != 1) fail("axis must be 1 (channels); got " + std::to_string(axis));
        if (l.bottoms.size() < 2) fail("needs at least 2 bottoms");
        need_one_top();
        std::vector<TensorId> xs;
        for (const std::string& b : l.bottoms) xs.push_back(tensor(b));
        define(l.tops[0], guarded([&] { return builder_->concat(l.name, xs); }));
    }

    void inner_product(const CaffeLayer& l) {
        const cf::InnerProductParameter& p = *l.inner_product;
        if (!p.has_num_output() || p.num_output() == 0) fail("inner_product_param needs num_output > 0");
        bounded("num_output", p.num_output(), max_outputs);
        if (p.axis() != 1) fail("axis must be 1 (each image's values flattened)");
        if (p.transpose()) fail("transpose: true is not one of braid's layouts");
        std::uint32_t out = p.num_output();
        need_one_top();
        if (options_.classes && logits_.count(l.tops[0])) out = *options_.classes;
        if (p.has_weight_filler() || p.has_bias_filler())
            note("ip filler", "InnerProduct fillers are not read: braid starts fully connected weights from "
                              "fan_in_uniform and biases at 0");
        unary([&](TensorId x) { return builder_->fully_connected(l.name, x, FullyConnectedConfig{out, p.bias_term()}); });
        if (options_.classes && logits_.count(l.tops[0])) resized_.insert(l.tops[0]);
    }

    void softmax_loss(const CaffeLayer& l) {
        if (l.bottoms.size() != 2) fail("needs two bottoms: the scores and the labels");
        if (l.softmax->axis() != 1) fail("softmax_param's axis must be 1 (classes)");
        const TensorId logits = tensor(l.bottoms[0]);
        if (bottom(l.bottoms[1]).kind != Blob::Kind::label)
            fail("second bottom '" + l.bottoms[1] + "' is not the labels of the net's input");
        if (options_.classes && !resized_.count(l.bottoms[0]))
            fail("--classes needs the scores '" + l.bottoms[0] + "' to come straight from an InnerProduct");
        if (l.loss_weights.size() > 1)
            fail("loss_weight is given " + std::to_string(l.loss_weights.size()) +
                 " times; braid's loss has one top, so one weight");
        const float weight = l.loss_weights.empty() ? 1.0f : l.loss_weights[0];
        if (!(weight > 0.0f) || !std::isfinite(weight))
            fail("loss_weight must be a finite number > 0, got " + fmt::format("{}", weight));
        if (l.tops.size() > 1) fail("braid's loss has one top");
        has_loss_ = true;
        const TensorId t = guarded([&] { return builder_->softmax_loss(l.name, logits, SoftmaxLossConfig{weight}); });
        if (!l.tops.empty()) define(l.tops[0], t);
    }

    // A Softmax is a deploy net's output; with no loss in the net it is
    // trained as one (convert()), anywhere else it is refused.
    void softmax(const CaffeLayer& l) {
        need_bottoms(1);
        if (softmax_output_) fail("a second Softmax output; braid trains one softmax output without a loss layer");
        softmax_output_.emplace(l.name, l.line, tensor(l.bottoms[0]));
        for (const std::string& t : l.tops) blobs_.erase(t);
        softmax_tops_.insert(l.tops.begin(), l.tops.end());
    }

public:
    // Scores that feed a loss: the InnerProduct producing them takes --classes.
    void find_logits(const std::vector<CaffeLayer>& layers) {
        for (const CaffeLayer& l : layers)
            if (l.in_train && l.type == "SoftmaxWithLoss" && !l.bottoms.empty()) logits_.insert(l.bottoms[0]);
    }

private:
    const std::string& source_;
    const PrototxtOptions& options_;
    Notes& notes_;
    std::string net_name_;
    std::optional<NetworkBuilder> builder_;
    std::map<std::string, Blob> blobs_;
    std::map<std::string, const CaffeLayer*> later_;  // top -> its first producer
    std::map<std::string, PendingBatchNorm> pending_;
    std::set<std::string> logits_, resized_, softmax_tops_;
    std::optional<std::tuple<std::string, int, TensorId>> softmax_output_;
    bool has_loss_ = false;
    const CaffeLayer* current_ = nullptr;
};

}  // namespace

PrototxtNet parse_prototxt(const std::string& text, const std::string& source, const PrototxtOptions& options) {
    Notes notes;
    Collector collector(source, notes);
    pb::TextFormat::Parser parser;
    parser.AllowUnknownField(true);
    parser.RecordErrorsTo(&collector);
    pb::TextFormat::ParseInfoTree tree;
    parser.WriteLocationsTo(&tree);
    cf::NetParameter net;
    if (!parser.ParseFromString(text, &net)) {
        throw PrototxtError(collector.error().empty() ? source + ": not a Caffe prototxt" : collector.error());
    }
    if (net.layer_size() > 0 && net.layers_size() > 0)
        throw PrototxtError(source + ": mixes `layer` (current format) and `layers` (legacy format); use one");
    const pb::Descriptor* d = cf::NetParameter::descriptor();
    std::vector<CaffeLayer> layers;
    for (int i = 0; i < net.layer_size(); ++i)
        layers.push_back(from_current(net.layer(i), tree.GetLocation(d->FindFieldByName("layer"), i).line + 1));
    for (int i = 0; i < net.layers_size(); ++i)
        layers.push_back(from_legacy(net.layers(i), tree.GetLocation(d->FindFieldByName("layers"), i).line + 1));
    if (layers.empty() && net.input_size() == 0) throw PrototxtError(source + ": no layers (not a Caffe net?)");
    const int input_line = net.input_size() > 0 ? tree.GetLocation(d->FindFieldByName("input"), 0).line + 1 : 0;

    Converter converter(source, options, notes);
    converter.find_logits(layers);
    PrototxtNet out{converter.convert(net, layers, input_line), {}};
    out.notes = notes.lines();
    return out;
}

PrototxtNet read_prototxt(const std::string& path, const PrototxtOptions& options) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))
        throw PrototxtError("cannot read prototxt '" + path + "': it is a folder, not a file");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw PrototxtError("cannot read prototxt '" + path + "': no such file or no permission");
    std::ostringstream text;
    text << in.rdbuf();
    return parse_prototxt(text.str(), path, options);
}

}  // namespace braid::samples
