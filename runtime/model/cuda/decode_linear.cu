// The launcher of decode_linear_kernel.cuh for each element type and input kind
// (fused_kernels.hpp).

#include "runtime/model/cuda/decode_linear_kernel.cuh"
#include "runtime/model/cuda/dependent_launch_host.cuh"
#include "runtime/model/cuda/element_dispatch.cuh"

#include <cstdint>
#include <type_traits>

namespace kbrl::model::cuda {

namespace {

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

template <class T>
cudaError_t launch(decode_linear_input input, const void* x, const void* weight, const void* bias,
                   void* out, int64_t in_features, int64_t out_features, cudaStream_t stream) {
  if constexpr (std::is_same_v<T, float>) {
    return cudaErrorInvalidValue; // cuBLAS's float32 GEMV is no worse; not instantiated
  } else {
    constexpr int64_t per_chunk = 16 / sizeof(T);
    if (in_features <= 0 || in_features % per_chunk != 0 || out_features <= 0 || !aligned16(x)
        || !aligned16(weight))
      return cudaErrorInvalidValue;
    const int64_t blocks = (out_features + decode_linear_rows - 1) / decode_linear_rows;
    if (blocks > 0x7fffffffLL)
      return cudaErrorInvalidValue;
    const int threads = warp_multiple(in_features / per_chunk, decode_linear_max_threads);
    const auto grid = static_cast<unsigned>(blocks);
    const T* xt = static_cast<const T*>(x);
    const T* wt = static_cast<const T*>(weight);
    const T* bt = static_cast<const T*>(bias);
    T* ot = static_cast<T*>(out);
    const auto kernel = input == decode_linear_input::swiglu
                          ? decode_linear_kernel<T, decode_linear_input::swiglu>
                          : decode_linear_kernel<T, decode_linear_input::plain>;
    return launch_dependent(kernel, dim3(grid), dim3(threads), stream, xt, wt, bt, ot,
                            out_features, in_features);
  }
}

} // namespace

cudaError_t decode_linear(element_type type, decode_linear_input input, const void* x,
                          const void* weight, const void* bias, void* out, int64_t in_features,
                          int64_t out_features, cudaStream_t stream) {
  return for_type(type, [&](auto zero) {
    return launch<decltype(zero)>(input, x, weight, bias, out, in_features, out_features, stream);
  });
}

} // namespace kbrl::model::cuda
