// The launchers of decode_attention_kernel.cuh, decode_attention_group_kernel.cuh and
// decode_attention_mma_kernel.cuh for each element type (fused_kernels.hpp).

#include "runtime/model/cuda/decode_attention_group_kernel.cuh"
#include "runtime/model/cuda/decode_attention_kernel.cuh"
#include "runtime/model/cuda/decode_attention_mma_kernel.cuh"
#include "runtime/model/cuda/dependent_launch_host.cuh"
#include "runtime/model/cuda/element_dispatch.cuh"

#include <cstdint>
#include <type_traits>

namespace kbrl::model::cuda {

int64_t decode_attention_splits(int64_t key_len) {
  return (key_len + decode_keys_per_block - 1) / decode_keys_per_block;
}

namespace {

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

/// The cache's rows can be read 16 bytes at a time (elements of `bytes` bytes).
bool cache_aligned(const decode_kv& kv, int64_t bytes) {
  return aligned16(kv.keys) && aligned16(kv.values) && (kv.batch_stride * bytes) % 16 == 0
         && (kv.head_stride * bytes) % 16 == 0 && (kv.position_stride * bytes) % 16 == 0;
}

/// shape.splits is the number of splits of `keys_per_split` keys that cover key_len.
bool splits_of(const decode_attention_shape& shape, int64_t keys_per_split) {
  return keys_per_split > 0
         && shape.splits == (shape.key_len + keys_per_split - 1) / keys_per_split;
}

/// The merge of the partials into `out`, one block per (sequence, query head).
template <class T>
cudaError_t launch_merge(const float* partials, void* out, const decode_attention_shape& shape,
                         cudaStream_t stream) {
  const unsigned threads = static_cast<unsigned>(warp_multiple(shape.head_dim, 256));
  return launch_dependent(decode_attention_merge_kernel<T>,
                          dim3(static_cast<unsigned>(shape.batch * shape.heads)), dim3(threads),
                          stream, partials, static_cast<T*>(out), shape);
}

template <class T>
cudaError_t launch(const void* q, const decode_kv& kv, const int64_t* positions, float* partials,
                   void* out, const decode_attention_shape& shape, cudaStream_t stream) {
  constexpr int64_t V = vector16<T>::size;
  const int64_t bytes = sizeof(T);
  if (shape.head_dim <= 0 || shape.head_dim > decode_max_head_dim || shape.head_dim % V != 0
      || shape.kv_heads <= 0 || shape.heads % shape.kv_heads != 0 || shape.key_len <= 0
      || shape.splits != decode_attention_splits(shape.key_len) || !cache_aligned(kv, bytes))
    return cudaErrorInvalidValue;
  if (shape.batch <= 0 || shape.heads <= 0)
    return cudaSuccess;
  const int64_t heads = shape.batch * shape.heads;
  if (const auto err = launch_dependent(
        decode_attention_partial_kernel<T>, dim3(static_cast<unsigned>(heads * shape.splits)),
        dim3(decode_keys_per_block), stream, static_cast<const T*>(q), kv, positions, partials,
        shape);
      err != cudaSuccess)
    return err;
  return launch_merge<T>(partials, out, shape, stream);
}

template <class T>
cudaError_t launch_grouped(const void* q, const decode_kv& kv, const int64_t* positions,
                           float* partials, void* out, const decode_attention_shape& shape,
                           int64_t keys_per_split, cudaStream_t stream) {
  const int64_t bytes = sizeof(T);
  const auto kernel = shape.kv_heads > 0 && shape.heads % shape.kv_heads == 0
                        ? decode_group_kernel_for<T>(shape.heads / shape.kv_heads, shape.head_dim)
                        : nullptr;
  if (kernel == nullptr || shape.key_len <= 0 || !splits_of(shape, keys_per_split)
      || keys_per_split % decode_keys_per_block != 0 || !cache_aligned(kv, bytes))
    return cudaErrorInvalidValue;
  if (shape.batch <= 0 || shape.heads <= 0)
    return cudaSuccess;
  const int64_t blocks = shape.batch * shape.kv_heads * shape.splits;
  if (const auto err = launch_dependent(kernel, dim3(static_cast<unsigned>(blocks)),
                                       dim3(decode_keys_per_block), stream,
                                       static_cast<const T*>(q), kv, positions, partials, shape,
                                       keys_per_split);
      err != cudaSuccess)
    return err;
  return launch_merge<T>(partials, out, shape, stream);
}

/// Whether `kernel` was compiled for sm_80 or newer on this device (its body traps below that).
template <class Kernel>
bool has_tensor_core_build(Kernel kernel) {
  cudaFuncAttributes attributes{};
  if (cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(kernel)) != cudaSuccess) {
    cudaGetLastError(); // not a launch error: the caller takes another path
    return false;
  }
  return attributes.binaryVersion >= 80;
}

template <class T>
cudaError_t launch_mma(const void* q, const decode_kv& kv, const int64_t* positions,
                       float* partials, void* out, const decode_attention_shape& shape,
                       int64_t keys_per_split, cudaStream_t stream) {
  const int64_t bytes = sizeof(T);
  const auto kernel = decode_mma_kernel_for<T>(shape.head_dim);
  // Once per element type (every instance is compiled for the same architectures): not at every
  // decode step.
  static const bool tensor_cores =
    has_tensor_core_build(decode_attention_mma_partial_kernel<T, 128>);
  constexpr int64_t block_keys = decode_mma_warps * decode_mma_keys;
  if (kernel == nullptr || !tensor_cores || shape.kv_heads <= 0
      || shape.heads % shape.kv_heads != 0 || shape.heads / shape.kv_heads > decode_mma_max_group
      || shape.key_len <= 0 || !splits_of(shape, keys_per_split)
      || keys_per_split % block_keys != 0 || !aligned16(q) || !cache_aligned(kv, bytes))
    return cudaErrorInvalidValue;
  if (shape.batch <= 0 || shape.heads <= 0)
    return cudaSuccess;
  const int64_t blocks = shape.batch * shape.kv_heads * shape.splits;
  if (const auto err = launch_dependent(kernel, dim3(static_cast<unsigned>(blocks)),
                                       dim3(32 * decode_mma_warps), stream,
                                       static_cast<const T*>(q), kv, positions, partials, shape,
                                       keys_per_split);
      err != cudaSuccess)
    return err;
  return launch_merge<T>(partials, out, shape, stream);
}

} // namespace

cudaError_t decode_attention_mma(element_type type, const void* q, const decode_kv& kv,
                                 const int64_t* positions, float* partials, void* out,
                                 const decode_attention_shape& shape, int64_t keys_per_split,
                                 cudaStream_t stream) {
  return for_type(type, [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_same_v<T, float>)
      return cudaErrorInvalidValue; // tensor cores take 16-bit elements here
    else
      return launch_mma<T>(q, kv, positions, partials, out, shape, keys_per_split, stream);
  });
}

cudaError_t decode_attention_grouped(element_type type, const void* q, const decode_kv& kv,
                                     const int64_t* positions, float* partials, void* out,
                                     const decode_attention_shape& shape, int64_t keys_per_split,
                                     cudaStream_t stream) {
  return for_type(type, [&](auto zero) {
    return launch_grouped<decltype(zero)>(q, kv, positions, partials, out, shape, keys_per_split,
                                          stream);
  });
}

cudaError_t decode_attention(element_type type, const void* q, const decode_kv& kv,
                             const int64_t* positions, float* partials, void* out,
                             const decode_attention_shape& shape, cudaStream_t stream) {
  return for_type(type, [&](auto zero) {
    return launch<decltype(zero)>(q, kv, positions, partials, out, shape, stream);
  });
}

} // namespace kbrl::model::cuda
