// Owning cuDNN descriptors (tensor, filter, convolution, pooling, LRN) and
// makers for the float views of the samples (NCHW; NHWC for convolutions).
// Creation throws braid::cuda::LibraryError naming the call; destruction
// never throws.
#pragma once

#include <cudnn.h>

#include <cstdint>
#include <limits>
#include <string>

#include "braid/cuda/cudnn.hpp"
#include "braid/cuda/handle.hpp"
#include "cuda/algorithms.hpp"
#include "nn/tensor.hpp"

namespace braid::samples::cuda {

namespace detail {
struct TensorDescTraits {
    using handle_type = cudnnTensorDescriptor_t;
    static void destroy(handle_type d) noexcept {
        braid::cuda::check_noexcept(cudnnDestroyTensorDescriptor(d), "cudnnDestroyTensorDescriptor");
    }
};
struct FilterDescTraits {
    using handle_type = cudnnFilterDescriptor_t;
    static void destroy(handle_type d) noexcept {
        braid::cuda::check_noexcept(cudnnDestroyFilterDescriptor(d), "cudnnDestroyFilterDescriptor");
    }
};
struct ConvDescTraits {
    using handle_type = cudnnConvolutionDescriptor_t;
    static void destroy(handle_type d) noexcept {
        braid::cuda::check_noexcept(cudnnDestroyConvolutionDescriptor(d), "cudnnDestroyConvolutionDescriptor");
    }
};
struct PoolingDescTraits {
    using handle_type = cudnnPoolingDescriptor_t;
    static void destroy(handle_type d) noexcept {
        braid::cuda::check_noexcept(cudnnDestroyPoolingDescriptor(d), "cudnnDestroyPoolingDescriptor");
    }
};
struct LrnDescTraits {
    using handle_type = cudnnLRNDescriptor_t;
    static void destroy(handle_type d) noexcept {
        braid::cuda::check_noexcept(cudnnDestroyLRNDescriptor(d), "cudnnDestroyLRNDescriptor");
    }
};

inline int to_int(std::uint64_t v, const char* what) {
    if (v > static_cast<std::uint64_t>(std::numeric_limits<int>::max()))
        throw braid::Error(std::string("cuDNN descriptor: ") + what + " " + std::to_string(v) +
                           " does not fit an int");
    return static_cast<int>(v);
}
}  // namespace detail

using TensorDescriptor = braid::cuda::UniqueHandle<detail::TensorDescTraits>;
using FilterDescriptor = braid::cuda::UniqueHandle<detail::FilterDescTraits>;
using ConvDescriptor = braid::cuda::UniqueHandle<detail::ConvDescTraits>;
using PoolingDescriptor = braid::cuda::UniqueHandle<detail::PoolingDescTraits>;
using LrnDescriptor = braid::cuda::UniqueHandle<detail::LrnDescTraits>;

// `images` images of c x h x w floats, `image_stride` floats apart
// (nStride), in `layout`.
inline TensorDescriptor make_tensor_descriptor(std::uint32_t images, std::uint32_t c, std::uint32_t h,
                                               std::uint32_t w, std::uint64_t image_stride,
                                               TensorLayout layout = TensorLayout::nchw) {
    const bool nhwc = layout == TensorLayout::nhwc;
    cudnnTensorDescriptor_t d = nullptr;
    braid::cuda::check(cudnnCreateTensorDescriptor(&d), "cudnnCreateTensorDescriptor");
    TensorDescriptor owned(d);
    const int c_stride = nhwc ? 1 : detail::to_int(std::uint64_t{h} * w, "cStride");
    const int h_stride = detail::to_int(nhwc ? std::uint64_t{w} * c : w, "hStride");
    const int w_stride = nhwc ? detail::to_int(c, "wStride") : 1;
    braid::cuda::check(cudnnSetTensor4dDescriptorEx(d, CUDNN_DATA_FLOAT, detail::to_int(images, "n"),
                                                    detail::to_int(c, "c"), detail::to_int(h, "h"),
                                                    detail::to_int(w, "w"), detail::to_int(image_stride, "nStride"),
                                                    c_stride, h_stride, w_stride),
                       "cudnnSetTensor4dDescriptorEx");
    return owned;
}

// K x C x R x S: KCRS (the samples' weight layout), or KRSC with NHWC activations.
inline FilterDescriptor make_filter_descriptor(std::uint32_t k, std::uint32_t c, std::uint32_t r, std::uint32_t s,
                                               TensorLayout layout = TensorLayout::nchw) {
    cudnnFilterDescriptor_t d = nullptr;
    braid::cuda::check(cudnnCreateFilterDescriptor(&d), "cudnnCreateFilterDescriptor");
    FilterDescriptor owned(d);
    const cudnnTensorFormat_t format = layout == TensorLayout::nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    braid::cuda::check(cudnnSetFilter4dDescriptor(d, CUDNN_DATA_FLOAT, format, detail::to_int(k, "k"),
                                                  detail::to_int(c, "c"), detail::to_int(r, "r"),
                                                  detail::to_int(s, "s")),
                       "cudnnSetFilter4dDescriptor");
    return owned;
}

// Cross-correlation with float accumulation, as the reference computes;
// padding per dimension (Inception-v3's 1x7 convolutions pad 0 rows, 3 columns).
inline ConvDescriptor make_conv_descriptor(std::uint32_t pad_h, std::uint32_t pad_w, std::uint32_t stride,
                                           std::uint32_t groups) {
    cudnnConvolutionDescriptor_t d = nullptr;
    braid::cuda::check(cudnnCreateConvolutionDescriptor(&d), "cudnnCreateConvolutionDescriptor");
    ConvDescriptor owned(d);
    const int ph = detail::to_int(pad_h, "pad_h"), pw = detail::to_int(pad_w, "pad_w"),
              s = detail::to_int(stride, "stride");
    braid::cuda::check(cudnnSetConvolution2dDescriptor(d, ph, pw, s, s, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                       "cudnnSetConvolution2dDescriptor");
    braid::cuda::check(cudnnSetConvolutionGroupCount(d, detail::to_int(groups, "groups")),
                       "cudnnSetConvolutionGroupCount");
    return owned;
}

}  // namespace braid::samples::cuda
