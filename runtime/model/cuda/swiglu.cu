// The launcher of swiglu_kernel.cuh for each element type (fused_kernels.hpp).

#include "runtime/model/cuda/element_dispatch.cuh"
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
  return for_type(type, [&](auto zero) {
    return launch<decltype(zero)>(gate_up, out, rows, width, stream);
  });
}

} // namespace kbrl::model::cuda
