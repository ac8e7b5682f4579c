// Residual add + RMSNorm in one kernel (fused_kernels.hpp). One block per row: the first pass
// forms the new residual (x + delta, rounded to T as libtorch's add stores it), writes it and sums
// its squares in float32; the second pass normalises. rms_norm() in transformer.cpp computes
//   wide = float(h); normed = to_T(wide * rsqrt(mean(wide^2) + eps)); out = weight * normed
// and so does this, each product rounded where libtorch rounds it.
//
// At batch 1 this kernel is pure latency (one row of a few thousand elements, run twice per
// layer in every decode step), so a thread issues all its loads (x, delta and weight) before it
// uses any, and keeps its part of the residual in registers for the second pass instead of
// reading back what it wrote: `Items` elements per thread, fixed at compile time so that the
// loops unroll. Items == 0 is the general version for rows wider than 16 x the block.
//
// The kernel itself; add_rms_norm.cu launches it. Kept apart so that a host emulation
// (test/cuda_emulation) can run the same code without a GPU.

#pragma once

#include "runtime/model/cuda/dependent_launch.cuh"
#include "runtime/model/cuda/device_math.cuh"
#include "runtime/model/cuda/fused_kernels.hpp"

#include <type_traits>

namespace kbrl::model::cuda {

/// Threads per block for rows of `dim` elements.
inline int add_rms_norm_threads(int64_t dim) { return warp_multiple(dim, 512); }

/// Elements per thread the kernel is instantiated for at `threads` threads: the smallest of 1, 2,
/// 4, 8 and 16 that covers the row, or 0 (the general version) for wider rows.
inline int add_rms_norm_items(int64_t dim, int threads) {
  for (int items = 1; items <= 16; items *= 2)
    if (dim <= static_cast<int64_t>(items) * threads)
      return items;
  return 0;
}

/// Calls with_items(std::integral_constant<int, Items>{}) for the instantiation that `items`
/// (add_rms_norm_items) names, so that the launcher and the host emulation pick it the same way.
template <class WithItems>
void for_add_rms_norm_items(int items, WithItems&& with_items) {
  switch (items) {
  case 1:
    return with_items(std::integral_constant<int, 1>{});
  case 2:
    return with_items(std::integral_constant<int, 2>{});
  case 4:
    return with_items(std::integral_constant<int, 4>{});
  case 8:
    return with_items(std::integral_constant<int, 8>{});
  case 16:
    return with_items(std::integral_constant<int, 16>{});
  default:
    return with_items(std::integral_constant<int, 0>{});
  }
}

/// 1 / sqrt(mean + eps), the mean as libtorch's reduction forms it: the sum times 1 / dim.
__device__ __forceinline__ float rms_scale(float sum_of_squares, int64_t dim, float eps) {
  return rsqrtf(__fadd_rn(__fmul_rn(sum_of_squares, 1.0f / static_cast<float>(dim)), eps));
}

template <class T, int Items>
__global__ void add_rms_norm_kernel(const T* x, const T* delta, T* residual_out,
                                    T* __restrict__ normed_out,
                                    const T* __restrict__ weight, int64_t dim, float eps) {
  // No __restrict__ on x, delta and residual_out: residual_out may be x (in place).
  // Activations only after the kernel before has completed (dependent_launch.cuh).
  let_next_kernel_start();
  wait_for_previous_kernel();
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const T* xr = x + row * dim;
  const T* dr = delta != nullptr ? delta + row * dim : nullptr;
  T* rr = residual_out != nullptr ? residual_out + row * dim : nullptr;
  T* out = normed_out + row * dim;
  // Element i of the row is thread i % blockDim.x's item i / blockDim.x, in both versions, so
  // each thread's squares are summed in the same order either way.
  float squares = 0.0f;
  if constexpr (Items > 0) {
    float h[Items], d[Items], w[Items];
#pragma unroll
    for (int k = 0; k < Items; ++k) {
      const int64_t i = threadIdx.x + static_cast<int64_t>(k) * blockDim.x;
      const bool in_row = i < dim;
      h[k] = in_row ? to_float(xr[i]) : 0.0f;
      d[k] = in_row && dr != nullptr ? to_float(dr[i]) : 0.0f;
      w[k] = in_row ? to_float(weight[i]) : 0.0f;
    }
#pragma unroll
    for (int k = 0; k < Items; ++k) {
      const int64_t i = threadIdx.x + static_cast<int64_t>(k) * blockDim.x;
      if (i < dim) {
        if (dr != nullptr) {
          h[k] = round_to<T>(__fadd_rn(h[k], d[k]));
          rr[i] = from_float<T>(h[k]);
        }
        squares = __fadd_rn(squares, __fmul_rn(h[k], h[k]));
      }
    }
    const float scale = rms_scale(block_sum(squares, scratch), dim, eps);
#pragma unroll
    for (int k = 0; k < Items; ++k) {
      const int64_t i = threadIdx.x + static_cast<int64_t>(k) * blockDim.x;
      if (i < dim)
        out[i] = from_float<T>(__fmul_rn(w[k], round_to<T>(__fmul_rn(h[k], scale))));
    }
  } else {
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
      float h = to_float(xr[i]);
      if (dr != nullptr) {
        h = round_to<T>(__fadd_rn(h, to_float(dr[i])));
        rr[i] = from_float<T>(h); // each thread rereads only what it wrote itself
      }
      squares = __fadd_rn(squares, __fmul_rn(h, h));
    }
    const float scale = rms_scale(block_sum(squares, scratch), dim, eps);
    const T* hr = dr != nullptr ? rr : xr;
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
      const float normed = round_to<T>(__fmul_rn(to_float(hr[i]), scale));
      out[i] = from_float<T>(__fmul_rn(to_float(weight[i]), normed));
    }
  }
}

} // namespace kbrl::model::cuda
