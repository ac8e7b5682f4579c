// The launcher of add_rms_norm_kernel.cuh for each element type (fused_kernels.hpp).

#include "runtime/model/cuda/add_rms_norm_kernel.cuh"
#include "runtime/model/cuda/dependent_launch_host.cuh"
#include "runtime/model/cuda/element_dispatch.cuh"

namespace kbrl::model::cuda {

namespace {

template <class T>
cudaError_t launch(const void* x, const void* delta, void* residual_out, void* normed_out,
                   const void* weight, int64_t rows, int64_t dim, float eps, cudaStream_t stream) {
  if (rows <= 0 || dim <= 0)
    return cudaSuccess;
  if (rows > 0x7fffffffLL)
    return cudaErrorInvalidValue;
  const int threads = add_rms_norm_threads(dim);
  const T* xt = static_cast<const T*>(x);
  const T* dt = static_cast<const T*>(delta);
  T* rt = delta != nullptr ? static_cast<T*>(residual_out) : nullptr;
  T* nt = static_cast<T*>(normed_out);
  const T* wt = static_cast<const T*>(weight);
  const auto blocks = static_cast<unsigned>(rows);
  cudaError_t err = cudaSuccess;
  for_add_rms_norm_items(add_rms_norm_items(dim, threads), [&](auto items) {
    err = launch_dependent(add_rms_norm_kernel<T, decltype(items)::value>, dim3(blocks),
                           dim3(threads), stream, xt, dt, rt, nt, wt, dim, eps);
  });
  return err;
}

} // namespace

cudaError_t add_rms_norm(element_type type, const void* x, const void* delta, void* residual_out,
                         void* normed_out, const void* weight, int64_t rows, int64_t dim,
                         float eps, cudaStream_t stream) {
  return for_type(type, [&](auto zero) {
    return launch<decltype(zero)>(x, delta, residual_out, normed_out, weight, rows, dim, eps,
                                  stream);
  });
}

} // namespace kbrl::model::cuda
