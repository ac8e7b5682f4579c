// SwiGLU of the fused gate/up projection in one kernel (fused_kernels.hpp): out = silu(gate) *
// up, computed as libtorch's at::silu(gate) * up does it: silu in float32 as
// x / (1 + exp(-x)) and stored in T, then the product of the two T values stored in T.
//
// The kernel itself; swiglu.cu launches it. Kept apart so that a host emulation
// (test/cuda_emulation) can run the same code without a GPU.

#pragma once

#include "runtime/model/cuda/device_math.cuh"
#include "runtime/model/cuda/fused_kernels.hpp"

namespace kbrl::model::cuda {

/// silu(g) * u rounded as at::silu(gate) * up rounds it (decode_linear_kernel.cuh's SwiGLU input
/// uses it too, so the fused down projection reads the values this kernel would have stored).
template <class T>
__device__ __forceinline__ T swiglu_value(float g, float u) {
  const float silu = round_to<T>(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g))));
  return from_float<T>(__fmul_rn(silu, u));
}

template <class T>
__global__ void swiglu_kernel(const T* __restrict__ gate_up, T* __restrict__ out, int64_t rows,
                              int64_t width) {
  const int64_t total = rows * width;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += step) {
    const int64_t row = i / width, col = i - row * width;
    const T* in = gate_up + row * 2 * width;
    out[i] = swiglu_value<T>(to_float(in[col]), to_float(in[width + col]));
  }
}

} // namespace kbrl::model::cuda
