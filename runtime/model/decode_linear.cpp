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

/// The GEMV kernel's result for one token's row `x` (of in_features elements, or of 2
/// in_features for swiglu input), or nothing where it does not apply.
std::optional<at::Tensor> gemv(const at::Tensor& x, cuda::decode_linear_input input,
                               const at::Tensor& weight, const at::Tensor& bias) {
  if (cublas_chosen() || !x.defined() || !x.is_cuda() || x.dim() < 1
      || (x.scalar_type() != at::kHalf && x.scalar_type() != at::kBFloat16))
    return std::nullopt;
  const int64_t width = x.size(-1);
  const bool swiglu_input = input == cuda::decode_linear_input::swiglu;
  const int64_t in_features = swiglu_input ? width / 2 : width;
  const int64_t out_features = weight.dim() == 2 ? weight.size(0) : 0;
  const int64_t per_chunk = 16 / static_cast<int64_t>(x.element_size());
  if (!one_row(x, x, width) || (swiglu_input && width % 2 != 0) || in_features == 0
      || in_features % per_chunk != 0 || out_features == 0 || !weight.is_contiguous()
      || weight.device() != x.device() || weight.scalar_type() != x.scalar_type()
      || weight.size(1) != in_features
      || reinterpret_cast<std::uintptr_t>(weight.data_ptr()) % 16 != 0
      || !one_row(bias, x, out_features, /*optional=*/true))
    return std::nullopt;
  c10::cuda::CUDAGuard guard(x.device());
  auto sizes = x.sizes().vec();
  sizes.back() = out_features;
  auto out = at::empty(sizes, x.options());
  check_launch(cuda::decode_linear(element_type_of(x.scalar_type()), input, x.data_ptr(),
                                   weight.data_ptr(), bias.defined() ? bias.data_ptr() : nullptr,
                                   out.data_ptr(), in_features, out_features, stream_of(x)),
               "decode_linear");
  return out;
}

#endif

} // namespace

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

} // namespace kbrl::model
