// The launchers of decode_linear_kernel.cuh for each element type and input kind
// (fused_kernels.hpp).

#include "runtime/model/cuda/decode_linear_kernel.cuh"
#include "runtime/model/cuda/dependent_launch_host.cuh"
#include "runtime/model/cuda/element_dispatch.cuh"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>

namespace kbrl::model::cuda {

namespace {

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

/// x and weight as the GEMV kernels read them: rows of whole 16-byte chunks, 16-byte aligned.
template <class T>
bool gemv_operands_fit(const void* x, const void* weight, int64_t in_features) {
  constexpr int64_t per_chunk = 16 / sizeof(T);
  return in_features > 0 && in_features % per_chunk == 0 && aligned16(x) && aligned16(weight);
}

/// `folds` as the kernels take it: the norm's weight (aligned as x, so that its chunks load as
/// x's do) where the input is rms_normed, nothing there otherwise.
template <class T>
bool folded_norm_of(decode_linear_input input, const decode_linear_folds& folds,
                    folded_norm<T>& norm) {
  const bool normed = input == decode_linear_input::rms_normed;
  if (normed != (folds.norm_weight != nullptr) || (normed && !aligned16(folds.norm_weight)))
    return false;
  norm.weight = static_cast<const T*>(folds.norm_weight);
  norm.eps = folds.eps;
  return true;
}

/// KBRL_DECODE_GEMV_ROWS=4, read once: 4 rows per block for every shape (to compare).
bool four_rows_always() {
  static const bool four = [] {
    const char* choice = std::getenv("KBRL_DECODE_GEMV_ROWS");
    return choice != nullptr && std::strcmp(choice, "4") == 0;
  }();
  return four;
}

/// Weight rows per block (decode_linear_kernel's Rows) for a GEMV: 8 where the input is the
/// SwiGLU of a [gate | up] row (every block works it out for its rows, so 8 rows halve that),
/// and where the rows are short enough for one 16-byte chunk a thread but many (a short, tall
/// weight such as Qwen2-1.5B's gate|up: 8 rows give each thread twice the loads in flight and
/// halve the 4,480 blocks); 4 elsewhere, where more blocks keep more of the GPU busy. Measured
/// alone on an H200 (bench/sampler_throughput/gemv_shapes.cu, results/2026-11-29-gemv-rows):
/// 8 rows took 14.5 against 15.7 us for 1.5B's gate|up, 9.9 against 10.2 and 35.5 against
/// 37.1 us for the down projections of 1.5B and 7B, and were slower for the other shapes
/// (7B's gate|up 64.9 against 62.2 us). The 1.5B decode step: 1.42-1.43 against 1.48 ms.
int rows_per_block(decode_linear_input input, int64_t chunks, int64_t out_features) {
  if (four_rows_always() || input == decode_linear_input::rms_normed)
    return 4;
  const bool short_and_tall = chunks <= decode_linear_max_threads && out_features >= 8192;
  return input == decode_linear_input::swiglu || short_and_tall ? 8 : 4;
}

/// The kernel for `rows` rows a block.
template <class T, decode_linear_input Input>
auto kernel_for(int rows) {
  return rows == 8 ? decode_linear_kernel<T, Input, 8> : decode_linear_kernel<T, Input, 4>;
}

template <class T>
cudaError_t launch(decode_linear_input input, const void* x, const void* weight, const void* bias,
                   void* out, int64_t in_features, int64_t out_features, cudaStream_t stream,
                   const decode_linear_folds& folds) {
  if constexpr (std::is_same_v<T, float>) {
    return cudaErrorInvalidValue; // cuBLAS's float32 GEMV is no worse; not instantiated
  } else {
    constexpr int64_t per_chunk = 16 / sizeof(T);
    folded_norm<T> norm;
    if (!gemv_operands_fit<T>(x, weight, in_features) || out_features <= 0
        || !folded_norm_of(input, folds, norm))
      return cudaErrorInvalidValue;
    const int64_t chunks = in_features / per_chunk;
    const int rows = rows_per_block(input, chunks, out_features);
    const int64_t blocks = (out_features + rows - 1) / rows;
    if (blocks > 0x7fffffffLL)
      return cudaErrorInvalidValue;
    const int threads = warp_multiple(chunks, decode_linear_max_threads);
    const auto grid = static_cast<unsigned>(blocks);
    const T* xt = static_cast<const T*>(x);
    const T* wt = static_cast<const T*>(weight);
    const T* bt = static_cast<const T*>(bias);
    T* ot = static_cast<T*>(out);
    using kind = decode_linear_input;
    const auto kernel = input == kind::swiglu       ? kernel_for<T, kind::swiglu>(rows)
                        : input == kind::rms_normed ? decode_linear_kernel<T, kind::rms_normed>
                                                    : kernel_for<T, kind::plain>(rows);
    return launch_dependent(kernel, dim3(grid), dim3(threads), stream, xt, wt, bt, ot,
                            out_features, in_features, norm, folds.add_to_out);
  }
}

template <class T>
cudaError_t launch_qkv_rope(const void* x, const void* weight, const void* bias, const void* cos,
                            const void* sin, void* q_out, const kv_destination& kv,
                            const qkv_shape& shape, int64_t in_features, cudaStream_t stream,
                            const decode_linear_folds& folds) {
  if constexpr (std::is_same_v<T, float>) {
    return cudaErrorInvalidValue; // as launch(): float32 stays on cuBLAS
  } else {
    constexpr int64_t per_chunk = 16 / sizeof(T);
    const int64_t rows = (shape.heads + 2 * shape.kv_heads) * shape.head_dim;
    if (shape.batch != 1 || shape.seq != 1 || shape.heads <= 0 || shape.kv_heads <= 0
        || shape.head_dim <= 0 || shape.head_dim % 4 != 0 || kv.positions == nullptr
        || !gemv_operands_fit<T>(x, weight, in_features) || folds.add_to_out)
      return cudaErrorInvalidValue;
    const auto input = folds.norm_weight != nullptr ? decode_linear_input::rms_normed
                                                    : decode_linear_input::plain;
    folded_norm<T> norm;
    if (!folded_norm_of(input, folds, norm))
      return cudaErrorInvalidValue;
    const int64_t blocks = rows / decode_linear_rows;
    if (rows > 0x7fffffffLL) // the kernel's row arithmetic is 32-bit
      return cudaErrorInvalidValue;
    const int threads = warp_multiple(in_features / per_chunk, decode_linear_max_threads);
    const auto kernel = input == decode_linear_input::rms_normed
                          ? decode_qkv_rope_kernel<T, decode_linear_input::rms_normed>
                          : decode_qkv_rope_kernel<T, decode_linear_input::plain>;
    return launch_dependent(kernel, dim3(static_cast<unsigned>(blocks)), dim3(threads), stream,
                            static_cast<const T*>(x), static_cast<const T*>(weight),
                            static_cast<const T*>(bias), static_cast<const T*>(cos),
                            static_cast<const T*>(sin), static_cast<T*>(q_out), kv, shape,
                            in_features, norm);
  }
}

} // namespace

cudaError_t decode_qkv_rope(element_type type, const void* x, const void* weight,
                            const void* bias, const void* cos, const void* sin, void* q_out,
                            const kv_destination& kv, const qkv_shape& shape,
                            int64_t in_features, cudaStream_t stream,
                            const decode_linear_folds& folds) {
  return for_type(type, [&](auto zero) {
    return launch_qkv_rope<decltype(zero)>(x, weight, bias, cos, sin, q_out, kv, shape,
                                           in_features, stream, folds);
  });
}

cudaError_t decode_linear(element_type type, decode_linear_input input, const void* x,
                          const void* weight, const void* bias, void* out, int64_t in_features,
                          int64_t out_features, cudaStream_t stream,
                          const decode_linear_folds& folds) {
  return for_type(type, [&](auto zero) {
    return launch<decltype(zero)>(input, x, weight, bias, out, in_features, out_features, stream,
                                  folds);
  });
}

} // namespace kbrl::model::cuda
