// The launcher of rope_qkv_kernel.cuh for each element type (fused_kernels.hpp).

#include "runtime/model/cuda/dependent_launch_host.cuh"
#include "runtime/model/cuda/element_dispatch.cuh"
#include "runtime/model/cuda/rope_qkv_kernel.cuh"

namespace kbrl::model::cuda {

namespace {

template <class T>
cudaError_t launch(const void* qkv, const void* cos, const void* sin, const void* q_norm,
                   const void* k_norm, float eps, void* q_out, const kv_destination& kv,
                   const qkv_shape& s, cudaStream_t stream) {
  if (s.head_dim <= 0 || s.head_dim % 2 != 0 || s.head_dim > 2048 || s.heads <= 0
      || s.kv_heads <= 0 || s.batch < 0 || s.seq <= 0
      || s.row_stride < (s.heads + 2 * s.kv_heads) * s.head_dim)
    return cudaErrorInvalidValue;
  const int64_t blocks = s.batch * s.seq * (s.heads + 2 * s.kv_heads);
  if (blocks == 0)
    return cudaSuccess;
  if (blocks > 0x7fffffffLL)
    return cudaErrorInvalidValue;
  const int threads = warp_multiple(s.head_dim / 2, 1024);
  return launch_dependent(rope_qkv_kernel<T>, dim3(static_cast<unsigned>(blocks)), dim3(threads),
                          stream, static_cast<const T*>(qkv), static_cast<const T*>(cos),
                          static_cast<const T*>(sin), static_cast<const T*>(q_norm),
                          static_cast<const T*>(k_norm), eps, static_cast<T*>(q_out), kv, s);
}

} // namespace

cudaError_t rope_qkv(element_type type, const void* qkv, const void* cos, const void* sin,
                     const void* q_norm, const void* k_norm, float eps, void* q_out,
                     const kv_destination& kv, const qkv_shape& shape, cudaStream_t stream) {
  return for_type(type, [&](auto zero) {
    return launch<decltype(zero)>(qkv, cos, sin, q_norm, k_norm, eps, q_out, kv, shape, stream);
  });
}

} // namespace kbrl::model::cuda
