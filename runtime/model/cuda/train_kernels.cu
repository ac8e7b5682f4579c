// The launchers of train_kernels.cuh for each element type (fused_kernels.hpp).

#include "runtime/model/cuda/train_kernels.cuh"
#include "runtime/model/cuda/element_dispatch.cuh"

#include <cstdint>
#include <initializer_list>

namespace kbrl::model::cuda {

namespace {

/// Whether every pointer is 16-byte aligned (the kernels' 16-byte loads and stores need it).
bool all_aligned16(std::initializer_list<const void*> pointers) {
  for (const void* p : pointers)
    if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0)
      return false;
  return true;
}

template <class T>
cudaError_t launch_rms_norm_backward(const void* grad_out, const void* x, const void* weight,
                                     void* grad_x, int64_t rows, int64_t dim, float eps,
                                     cudaStream_t stream) {
  if (rows <= 0 || dim <= 0)
    return cudaSuccess;
  rms_norm_backward_kernel<T><<<static_cast<unsigned>(rows), add_rms_norm_threads(dim), 0,
                                stream>>>(static_cast<const T*>(grad_out),
                                          static_cast<const T*>(x),
                                          static_cast<const T*>(weight),
                                          static_cast<T*>(grad_x), dim, eps);
  return cudaGetLastError();
}

/// Whether every row of every tensor of a swiglu_layout starts 16-byte aligned.
template <class T>
bool rows_aligned16(std::initializer_list<const void*> pointers, const swiglu_layout& l) {
  return all_aligned16(pointers) && (l.in_stride * sizeof(T)) % 16 == 0
         && (l.out_stride * sizeof(T)) % 16 == 0;
}

/// One block a row, at most 8192 blocks (the kernels grid-stride over the rest).
unsigned row_blocks(int64_t rows) { return static_cast<unsigned>(rows < 8192 ? rows : 8192); }

template <class T>
cudaError_t launch_swiglu_pair(const void* gate, const void* up, void* out,
                               const swiglu_layout& l, cudaStream_t stream) {
  if (l.rows <= 0 || l.width <= 0)
    return cudaSuccess;
  swiglu_pair_kernel<T><<<row_blocks(l.rows), 256, 0, stream>>>(
    static_cast<const T*>(gate), static_cast<const T*>(up), static_cast<T*>(out), l,
    rows_aligned16<T>({gate, up, out}, l));
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_swiglu_pair_backward(const void* grad_out, const void* gate, const void* up,
                                        void* grad_gate, void* grad_up, const swiglu_layout& l,
                                        cudaStream_t stream) {
  if (l.rows <= 0 || l.width <= 0)
    return cudaSuccess;
  swiglu_pair_backward_kernel<T><<<row_blocks(l.rows), 256, 0, stream>>>(
    static_cast<const T*>(grad_out), static_cast<const T*>(gate), static_cast<const T*>(up),
    static_cast<T*>(grad_gate), static_cast<T*>(grad_up), l,
    rows_aligned16<T>({grad_out, gate, up, grad_gate, grad_up}, l));
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_rotary(const void* x, const void* cos, const void* sin, void* out,
                          const rotary_layout& layout, bool backward, cudaStream_t stream) {
  const int64_t n = layout.batch * layout.heads * layout.seq * layout.dim;
  if (layout.dim % 2 != 0)
    return cudaErrorInvalidValue;
  if (n <= 0)
    return cudaSuccess;
  const int64_t units = layout.batch * layout.heads * layout.seq
                        * ((layout.dim / 2 + rotary_pairs_per_thread - 1) / rotary_pairs_per_thread);
  rotary_kernel<T><<<elementwise_blocks(units), 256, 0, stream>>>(
    static_cast<const T*>(x), static_cast<const T*>(cos), static_cast<const T*>(sin),
    static_cast<T*>(out), layout, backward);
  return cudaGetLastError();
}

} // namespace

cudaError_t rms_norm_backward(element_type type, const void* grad_out, const void* x,
                              const void* weight, void* grad_x, int64_t rows, int64_t dim,
                              float eps, cudaStream_t stream) {
  return for_type(type, [&](auto zero) {
    using T = decltype(zero);
    return launch_rms_norm_backward<T>(grad_out, x, weight, grad_x, rows, dim, eps, stream);
  });
}

cudaError_t swiglu_pair(element_type type, const void* gate, const void* up, void* out,
                        const swiglu_layout& layout, cudaStream_t stream) {
  return for_type(type, [&](auto zero) {
    using T = decltype(zero);
    return launch_swiglu_pair<T>(gate, up, out, layout, stream);
  });
}

cudaError_t swiglu_pair_backward(element_type type, const void* grad_out, const void* gate,
                                 const void* up, void* grad_gate, void* grad_up,
                                 const swiglu_layout& layout, cudaStream_t stream) {
  return for_type(type, [&](auto zero) {
    using T = decltype(zero);
    return launch_swiglu_pair_backward<T>(grad_out, gate, up, grad_gate, grad_up, layout,
                                          stream);
  });
}

cudaError_t rotary(element_type type, const void* x, const void* cos, const void* sin, void* out,
                   const rotary_layout& layout, bool backward, cudaStream_t stream) {
  return for_type(type, [&](auto zero) {
    using T = decltype(zero);
    return launch_rotary<T>(x, cos, sin, out, layout, backward, stream);
  });
}

} // namespace kbrl::model::cuda
