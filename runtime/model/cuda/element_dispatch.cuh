// The launchers' one switch over element_type (fused_kernels.hpp): each .cu file's public entry
// point calls for_type with a generic lambda that launches its kernel for the element type.

#pragma once

#include "runtime/model/cuda/fused_kernels.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace kbrl::model::cuda {

/// f(T{}) for the element type T that `type` names (the lambda takes the type from its
/// argument); cudaErrorInvalidValue for a value outside the enum.
template <class F>
cudaError_t for_type(element_type type, F&& f) {
  switch (type) {
  case element_type::f32:
    return f(float{});
  case element_type::f16:
    return f(__half{});
  case element_type::bf16:
    return f(__nv_bfloat16{});
  }
  return cudaErrorInvalidValue;
}

} // namespace kbrl::model::cuda
