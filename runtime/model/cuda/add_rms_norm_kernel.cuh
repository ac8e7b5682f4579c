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
__host__ __device__ inline int add_rms_norm_threads(int64_t dim) {
  return warp_multiple(dim, 512);
}

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

/// The scale add_rms_norm_kernel computes for a row h of `dim` elements (h already holding the
/// residual add), bit for bit, in a block of another size: a kernel that normalises its input
/// row itself (decode_linear_kernel.cuh) gets the same normalised values as the norm kernel
/// would have written. The norm kernel's launch of add_rms_norm_threads(dim) threads is
/// replayed: thread t of this block plays its threads t, t + blockDim.x, ..., each summing its
/// squares in the kernel's order, and block_sum's two stages run on the played threads' values.
/// blockDim.x a multiple of 32 (so a played thread's lane is its player's); every thread of the
/// block calls this and gets the scale. `scratch` holds 32 floats of shared memory.
template <class T>
__device__ __forceinline__ float replayed_rms_scale(const T* h, int64_t dim, float eps,
                                                    float* scratch) {
  const int played = add_rms_norm_threads(dim);
  const int lane = threadIdx.x & 31;
  for (int first = 0; first < played; first += blockDim.x) {
    const int t = first + static_cast<int>(threadIdx.x);
    float squares = 0.0f;
    if (t < played)
      for (int64_t i = t; i < dim; i += played) {
        const float v = to_float(h[i]);
        squares = __fadd_rn(squares, __fmul_rn(v, v));
      }
    // block_sum's first stage, for the played warp t / 32 (the same in all lanes of this warp)
    for (int offset = 16; offset > 0; offset >>= 1)
      squares += __shfl_xor_sync(0xffffffffu, squares, offset);
    if (lane == 0 && t < played)
      scratch[t >> 5] = squares;
  }
  __syncthreads();
  // its second stage, as every warp of the norm kernel's block computes it
  float v = lane < (played >> 5) ? scratch[lane] : 0.0f;
  for (int offset = 16; offset > 0; offset >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return rms_scale(v, dim, eps);
}

/// Element i of a row h normalised as add_rms_norm_kernel writes it (scale from
/// replayed_rms_scale, w the norm's weight at i), as float.
template <class T>
__device__ __forceinline__ float rms_normed_value(float h, float w, float scale) {
  return round_to<T>(__fmul_rn(w, round_to<T>(__fmul_rn(h, scale))));
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
