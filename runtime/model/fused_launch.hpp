#pragma once
// What fused_ops.cpp and train_ops.cpp share to launch the kernels of cuda/fused_kernels.hpp:
// the kernels' element type of a tensor, and a launch error as a c10::Error. Included only where
// KBRL_WITH_FUSED_KERNELS is 1 (the CUDA headers are there).

#include "runtime/model/cuda/fused_kernels.hpp"

#include <ATen/ATen.h>

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

inline void check_launch(cudaError_t err, const char* what) {
  TORCH_CHECK(err == cudaSuccess, "fused ", what, " kernel: launch failed: ",
              cudaGetErrorString(err));
}

} // namespace kbrl::model
