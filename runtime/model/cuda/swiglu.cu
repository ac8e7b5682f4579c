// The launcher of swiglu_kernel.cuh for each element type (fused_kernels.hpp).

#include "runtime/model/cuda/swiglu_kernel.cuh"

namespace kbrl::model::cuda {

namespace {

template <class T>
cudaError_t launch(const void* gate_up, void* out, int64_t rows, int64_t width,
                   cudaStream_t stream) {
  const int64_t total = rows * width;
  if (total <= 0)
    return cudaSuccess;
  swiglu_kernel<T><<<elementwise_blocks(total), 256, 0, stream>>>(
    static_cast<const T*>(gate_up), static_cast<T*>(out), rows, width);
  return cudaGetLastError();
}

} // namespace

cudaError_t swiglu(element_type type, const void* gate_up, void* out, int64_t rows, int64_t width,
                   cudaStream_t stream) {
  switch (type) {
  case element_type::f32:
    return launch<float>(gate_up, out, rows, width, stream);
  case element_type::f16:
    return launch<__half>(gate_up, out, rows, width, stream);
  case element_type::bf16:
    return launch<__nv_bfloat16>(gate_up, out, rows, width, stream);
  }
  return cudaErrorInvalidValue;
}

} // namespace kbrl::model::cuda
