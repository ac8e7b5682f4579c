// Residual add + RMSNorm in one kernel (fused_kernels.hpp). One block per row: the first pass
// forms the new residual (x + delta, rounded to T as libtorch's add stores it), writes it and sums
// its squares in float32; the second pass normalises. rms_norm() in transformer.cpp computes
//   wide = float(h); normed = to_T(wide * rsqrt(mean(wide^2) + eps)); out = weight * normed
// and so does this, each product rounded where libtorch rounds it.
//
// The kernel itself; add_rms_norm.cu launches it. Kept apart so that a host emulation
// (test/cuda_emulation) can run the same code without a GPU.

#pragma once

#include "runtime/model/cuda/device_math.cuh"
#include "runtime/model/cuda/fused_kernels.hpp"

namespace kbrl::model::cuda {

template <class T>
__global__ void add_rms_norm_kernel(const T* x, const T* delta, T* residual_out,
                                    T* __restrict__ normed_out,
                                    const T* __restrict__ weight, int64_t dim, float eps) {
  // No __restrict__ on x, delta and residual_out: residual_out may be x (in place).
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const T* xr = x + row * dim;
  const T* dr = delta != nullptr ? delta + row * dim : nullptr;
  T* rr = residual_out != nullptr ? residual_out + row * dim : nullptr;
  float squares = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    float h = to_float(xr[i]);
    if (dr != nullptr) {
      h = round_to<T>(__fadd_rn(h, to_float(dr[i])));
      rr[i] = from_float<T>(h); // each thread rereads only what it wrote itself
    }
    squares = __fadd_rn(squares, __fmul_rn(h, h));
  }
  const float total = block_sum(squares, scratch);
  // mean as libtorch's reduction forms it: the sum times 1 / dim.
  const float mean = __fmul_rn(total, 1.0f / static_cast<float>(dim));
  const float scale = rsqrtf(__fadd_rn(mean, eps));
  const T* hr = dr != nullptr ? rr : xr;
  T* out = normed_out + row * dim;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    const float normed = round_to<T>(__fmul_rn(to_float(hr[i]), scale));
    out[i] = from_float<T>(__fmul_rn(to_float(weight[i]), normed));
  }
}

} // namespace kbrl::model::cuda
