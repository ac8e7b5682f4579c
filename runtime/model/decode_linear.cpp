#include "runtime/model/decode_linear.hpp"

#include <ATen/ATen.h>

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

// CMakeLists.txt defines KBRL_WITH_FUSED_KERNELS=1 for this file where it compiles
// runtime/model/cuda/*.cu (a libtorch with CUDA and nvcc).
#ifndef KBRL_WITH_FUSED_KERNELS
#define KBRL_WITH_FUSED_KERNELS 0
#endif

#if KBRL_WITH_FUSED_KERNELS
#include "runtime/model/cuda/fused_kernels.hpp"
#include "runtime/model/fused_launch.hpp"

#include <c10/cuda/CUDAGuard.h>
#endif

namespace kbrl::model {

namespace {

#if KBRL_WITH_FUSED_KERNELS

/// KBRL_DECODE_LINEAR=cublas, read once: the operations one by one always.
bool cublas_chosen() {
  static const bool chosen = [] {
    const char* choice = std::getenv("KBRL_DECODE_LINEAR");
    return choice != nullptr && std::string(choice) == "cublas";
  }();
  return chosen;
}

/// `t` holds one contiguous row of `width` elements of `like`'s dtype on its device, 16-byte
/// aligned (or is undefined where `optional`).
bool one_row(const at::Tensor& t, const at::Tensor& like, int64_t width, bool optional = false) {
  if (!t.defined())
    return optional;
  return t.numel() == width && t.is_contiguous() && t.device() == like.device()
         && t.scalar_type() == like.scalar_type()
         && reinterpret_cast<std::uintptr_t>(t.data_ptr()) % 16 == 0;
}

/// `x` may go to the GEMV kernels: a float16 / bfloat16 CUDA tensor, cuBLAS not chosen.
bool gemv_may_take(const at::Tensor& x) {
  return !cublas_chosen() && x.defined() && x.is_cuda()
         && (x.scalar_type() == at::kHalf || x.scalar_type() == at::kBFloat16);
}

/// weight [out_features, in_features] and bias (undefined, or [out_features]) as the GEMV
/// kernels read them beside `x`: x's dtype and device, contiguous, 16-byte aligned, rows of
/// whole 16-byte chunks.
bool gemv_weights_fit(const at::Tensor& weight, const at::Tensor& bias, const at::Tensor& x,
                      int64_t in_features, int64_t out_features) {
  const int64_t per_chunk = 16 / static_cast<int64_t>(x.element_size());
  return in_features > 0 && in_features % per_chunk == 0 && out_features > 0
         && weight.defined() && weight.dim() == 2 && weight.size(0) == out_features
         && weight.size(1) == in_features && weight.is_contiguous()
         && weight.device() == x.device() && weight.scalar_type() == x.scalar_type()
         && reinterpret_cast<std::uintptr_t>(weight.data_ptr()) % 16 == 0
         && one_row(bias, x, out_features, /*optional=*/true);
}

/// What gemv() does around the GEMV: for rms_normed input the norm's weight and epsilon; with
/// add_to, the result is added into that row (in place) instead of returned in a new tensor.
struct gemv_folds {
  const at::Tensor* norm_weight = nullptr;
  double eps = 0.0;
  at::Tensor* add_to = nullptr;
};

/// The GEMV kernel's result for one token's row `x` (of in_features elements, or of 2
/// in_features for swiglu input; with folds.add_to, that row after the add), or nothing where
/// it does not apply (nothing was done).
std::optional<at::Tensor> gemv(const at::Tensor& x, cuda::decode_linear_input input,
                               const at::Tensor& weight, const at::Tensor& bias,
                               const gemv_folds& folds = {}) {
  if (!gemv_may_take(x) || x.dim() < 1)
    return std::nullopt;
  const int64_t width = x.size(-1);
  const bool swiglu_input = input == cuda::decode_linear_input::swiglu;
  const bool normed_input = input == cuda::decode_linear_input::rms_normed;
  const int64_t in_features = swiglu_input ? width / 2 : width;
  const int64_t out_features = weight.dim() == 2 ? weight.size(0) : 0;
  if (!one_row(x, x, width) || (swiglu_input && width % 2 != 0)
      || !gemv_weights_fit(weight, bias, x, in_features, out_features)
      || normed_input != (folds.norm_weight != nullptr)
      || (normed_input && !one_row(*folds.norm_weight, x, in_features))
      || (folds.add_to != nullptr && !one_row(*folds.add_to, x, out_features)))
    return std::nullopt;
  c10::cuda::CUDAGuard guard(x.device());
  at::Tensor out;
  if (folds.add_to != nullptr) {
    out = *folds.add_to;
  } else {
    auto sizes = x.sizes().vec();
    sizes.back() = out_features;
    out = at::empty(sizes, x.options());
  }
  cuda::decode_linear_folds kernel_folds;
  if (normed_input) {
    kernel_folds.norm_weight = folds.norm_weight->data_ptr();
    kernel_folds.eps = static_cast<float>(folds.eps);
  }
  kernel_folds.add_to_out = folds.add_to != nullptr;
  check_launch(cuda::decode_linear(element_type_of(x.scalar_type()), input, x.data_ptr(),
                                   weight.data_ptr(), bias.defined() ? bias.data_ptr() : nullptr,
                                   out.data_ptr(), in_features, out_features, stream_of(x),
                                   kernel_folds),
               "decode_linear");
  return out;
}

/// KBRL_DECODE_QKV_ROPE=off, read once: the q|k|v projection and rope_qkv as two kernels.
bool qkv_rope_fold_off() {
  static const bool off = [] {
    const char* choice = std::getenv("KBRL_DECODE_QKV_ROPE");
    return choice != nullptr && std::string(choice) == "off";
  }();
  return off;
}

/// KBRL_DECODE_NORMS, read once (decode_norms_fold()).
norm_folds norms_folded() {
  static const norm_folds chosen = [] {
    const char* choice = std::getenv("KBRL_DECODE_NORMS");
    const std::string c = choice != nullptr ? choice : "";
    return c == "all" ? norm_folds::all : c == "qkv" ? norm_folds::qkv : norm_folds::none;
  }();
  return chosen;
}

/// `cache` is one sequence's slot of a layer's cache as decode_qkv_rope writes it: [1, kv_heads,
/// max_len, head_dim] of x's dtype on its device, rows contiguous.
bool cache_slot(const at::Tensor& cache, const at::Tensor& x, const qkv_layout& l) {
  return cache.defined() && cache.device() == x.device() && cache.scalar_type() == x.scalar_type()
         && cache.dim() == 4 && cache.size(0) == 1 && cache.size(1) == l.kv_heads
         && cache.size(3) == l.head_dim && cache.stride(3) == 1;
}

#endif

} // namespace

std::optional<attention_inputs> decode_rope_qkv(
  const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
  const std::vector<const linear_layer*>& parts, const qkv_layout& l,
  const rotary_embedding& rotary, const at::Tensor& positions, const at::Tensor& cache_keys,
  const at::Tensor& cache_values, const at::Tensor& input_norm, double eps) {
#if KBRL_WITH_FUSED_KERNELS
  if (qkv_rope_fold_off() || !gemv_may_take(x) || x.dim() != 3 || x.size(0) != 1
      || x.size(1) != 1)
    return std::nullopt;
  const int64_t rows = (l.heads + 2 * l.kv_heads) * l.head_dim, in_features = x.size(2);
  const std::vector<int64_t> rot_shape{1, 1, l.head_dim};
  auto same = [&](const at::Tensor& t) {
    return t.defined() && t.device() == x.device() && t.scalar_type() == x.scalar_type();
  };
  if (l.heads <= 0 || l.kv_heads <= 0 || l.head_dim <= 0 || l.head_dim % 4 != 0
      || !fused_without_lora(weight, bias, parts) || !one_row(x, x, in_features)
      || !gemv_weights_fit(weight, bias, x, in_features, rows) || !same(rotary.cos)
      || !same(rotary.sin) || rotary.cos.sizes() != rot_shape || rotary.sin.sizes() != rot_shape
      || !cache_slot(cache_keys, x, l) || !cache_slot(cache_values, x, l)
      || cache_keys.strides() != cache_values.strides()
      || cache_keys.sizes() != cache_values.sizes() || !positions.defined()
      || positions.device() != x.device() || positions.numel() != 1
      || (input_norm.defined() && !one_row(input_norm, x, in_features)))
    return std::nullopt;
  c10::cuda::CUDAGuard guard(x.device());
  const auto cos = rotary.cos.contiguous(), sin = rotary.sin.contiguous();
  const auto where = positions.to(at::kLong).contiguous();
  auto q = at::empty({1, l.heads, 1, l.head_dim}, x.options());
  cuda::kv_destination kv;
  point_at(kv, cache_keys, cache_values);
  kv.positions = where.data_ptr<int64_t>();
  kv.position_limit = cache_keys.size(2);
  cuda::qkv_shape shape;
  shape.batch = shape.seq = 1;
  shape.heads = l.heads;
  shape.kv_heads = l.kv_heads;
  shape.head_dim = l.head_dim;
  shape.row_stride = rows;
  cuda::decode_linear_folds folds;
  if (input_norm.defined()) {
    folds.norm_weight = input_norm.data_ptr();
    folds.eps = static_cast<float>(eps);
  }
  check_launch(cuda::decode_qkv_rope(element_type_of(x.scalar_type()), x.data_ptr(),
                                     weight.data_ptr(), bias.defined() ? bias.data_ptr() : nullptr,
                                     cos.data_ptr(), sin.data_ptr(), q.data_ptr(), kv, shape,
                                     in_features, stream_of(x), folds),
               "decode_qkv_rope");
  return attention_inputs{q, cache_keys, cache_values};
#else
  (void)x, (void)weight, (void)bias, (void)parts, (void)l, (void)rotary, (void)positions;
  (void)cache_keys, (void)cache_values, (void)input_norm, (void)eps;
  return std::nullopt;
#endif
}

at::Tensor decode_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
#if KBRL_WITH_FUSED_KERNELS
  if (auto out = gemv(x, cuda::decode_linear_input::plain, weight, bias))
    return *out;
#endif
  return at::linear(x, weight, bias);
}

at::Tensor swiglu_linear(const at::Tensor& gate_up, const at::Tensor& weight,
                         const at::Tensor& bias) {
#if KBRL_WITH_FUSED_KERNELS
  if (auto out = gemv(gate_up, cuda::decode_linear_input::swiglu, weight, bias))
    return *out;
#endif
  return at::linear(swiglu(gate_up), weight, bias);
}

std::optional<at::Tensor> decode_linear_normed(const at::Tensor& row, const at::Tensor& norm_weight,
                                               double eps, const at::Tensor& weight,
                                               const at::Tensor& bias) {
#if KBRL_WITH_FUSED_KERNELS
  gemv_folds folds;
  folds.norm_weight = &norm_weight;
  folds.eps = eps;
  return gemv(row, cuda::decode_linear_input::rms_normed, weight, bias, folds);
#else
  (void)row, (void)norm_weight, (void)eps, (void)weight, (void)bias;
  return std::nullopt;
#endif
}

bool decode_linear_add_to(at::Tensor& residual, const at::Tensor& x, bool swiglu_input,
                          const at::Tensor& weight, const at::Tensor& bias) {
#if KBRL_WITH_FUSED_KERNELS
  gemv_folds folds;
  folds.add_to = &residual;
  const auto input =
    swiglu_input ? cuda::decode_linear_input::swiglu : cuda::decode_linear_input::plain;
  return gemv(x, input, weight, bias, folds).has_value();
#else
  (void)residual, (void)x, (void)swiglu_input, (void)weight, (void)bias;
  return false;
#endif
}

norm_folds decode_norms_fold() {
#if KBRL_WITH_FUSED_KERNELS
  return cublas_chosen() ? norm_folds::none : norms_folded();
#else
  return norm_folds::none;
#endif
}

} // namespace kbrl::model
