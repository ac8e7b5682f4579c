#pragma once
// What fused_ops.cpp, decode_linear.cpp and train_ops.cpp share to launch the kernels of
// cuda/fused_kernels.hpp: the kernels' element type of a tensor, the stream to launch on, a kv
// cache's description, and a launch error as a c10::Error. Included only where
// KBRL_WITH_FUSED_KERNELS is 1 (the CUDA headers are there).

#include "runtime/model/cuda/fused_kernels.hpp"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>

namespace kbrl::model {

inline cuda::element_type element_type_of(at::ScalarType t) {
  switch (t) {
  case at::kHalf:
    return cuda::element_type::f16;
  case at::kBFloat16:
    return cuda::element_type::bf16;
  default:
    return cuda::element_type::f32;
  }
}

/// The current CUDA stream of the device `t` is on.
inline cudaStream_t stream_of(const at::Tensor& t) {
  return at::cuda::getCurrentCUDAStream(t.device().index());
}

/// Points a kernel's key/value description (cuda::kv_destination or cuda::decode_kv) at `keys`
/// and `values` ([batch, kv_heads, positions, head_dim], the same strides).
template <class KvView>
void point_at(KvView& kv, const at::Tensor& keys, const at::Tensor& values) {
  kv.keys = keys.data_ptr();
  kv.values = values.data_ptr();
  kv.batch_stride = keys.stride(0);
  kv.head_stride = keys.stride(1);
  kv.position_stride = keys.stride(2);
}

inline void check_launch(cudaError_t err, const char* what) {
  TORCH_CHECK(err == cudaSuccess, "fused ", what, " kernel: launch failed: ",
              cudaGetErrorString(err));
}

} // namespace kbrl::model
