// The learner's per-token log-probability and its gradient in one pass over the logits
// (fused_kernels.hpp, token_logprob_gradient). For a row of logits x (in T, the model's dtype),
// its target token t and the sampling temperature tau, with z = x / tau in float32:
//   out        = z[t] - max(z) - log(sum exp(z - max(z)))       (log_softmax(z)[t])
//   x (in place) <- to_T((onehot(t) - exp(log_softmax(z))) / tau)  (d out / d x)
// which is what the composition computes through autograd: logits widened to float32, divided by
// tau, log_softmax, gather; backward: gather's one-hot, log_softmax's backward
// (grad - exp(output) * sum(grad)), the division's, and the cast back to T. The composition reads
// and writes about 38 bytes an element through seven kernels (cast, log_softmax, fill, scatter,
// softmax backward, division, cast); this reads a row twice and writes it once.
//
// The sum of exponentials is kept online (running maximum and the sum scaled to it) in one pass,
// so its float32 rounding differs from log_softmax's two-pass sum; a target outside [0, vocab)
// gives out = NaN and no one-hot (the composition's gather would stop the device instead).
//
// The kernel itself; the launcher is in logprob.cu. Kept apart so that a host emulation
// (test/cuda_emulation) can run the same code without a GPU.

#pragma once

#include "runtime/model/cuda/device_math.cuh"
#include "runtime/model/cuda/fused_kernels.hpp"

#include <cstdint>

namespace kbrl::model::cuda {

/// A running maximum and the sum of exp(z - max) of the values seen so far.
struct max_and_sum {
  float max;
  float sum;
};

__device__ __forceinline__ max_and_sum combine(max_and_sum a, max_and_sum b) {
  if (b.max == -INFINITY)
    return a;
  if (a.max == -INFINITY)
    return b;
  const float m = fmaxf(a.max, b.max);
  return {m, a.sum * expf(a.max - m) + b.sum * expf(b.max - m)};
}

__device__ __forceinline__ max_and_sum add_value(max_and_sum a, float z) {
  if (z == -INFINITY) // contributes nothing (and -inf - -inf would be NaN)
    return a;
  if (z <= a.max)
    return {a.max, a.sum + expf(z - a.max)};
  return {z, a.sum * expf(a.max - z) + 1.0f};
}

/// combine() over the block, returned to every thread (blockDim.x a multiple of 32, at most
/// 1024; `scratch` 32 entries; once per kernel).
__device__ __forceinline__ max_and_sum block_max_and_sum(max_and_sum v, max_and_sum* scratch) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    const max_and_sum other{__shfl_xor_sync(0xffffffffu, v.max, offset),
                            __shfl_xor_sync(0xffffffffu, v.sum, offset)};
    v = combine(v, other);
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0)
    scratch[warp] = v;
  __syncthreads();
  const int warps = blockDim.x >> 5;
  v = lane < warps ? scratch[lane] : max_and_sum{-INFINITY, 0.0f};
  for (int offset = 16; offset > 0; offset >>= 1) {
    const max_and_sum other{__shfl_xor_sync(0xffffffffu, v.max, offset),
                            __shfl_xor_sync(0xffffffffu, v.sum, offset)};
    v = combine(v, other);
  }
  return v;
}

/// z = x / tau as the composition's float32 division gives it (tau 1: x itself).
__device__ __forceinline__ float scaled(float x, float tau) {
  return tau == 1.0f ? x : __fdiv_rn(x, tau);
}

/// One block per row of `vocab` logits (grid-stride over the rows), 16 bytes a load where
/// `vectorized` (the launcher asks for it when vocab is a multiple of the vector and the
/// logits are 16-byte aligned).
template <class T>
__global__ void token_logprob_gradient_kernel(T* __restrict__ logits,
                                              const int64_t* __restrict__ targets,
                                              float* __restrict__ out, int64_t rows,
                                              int64_t vocab, float tau, bool vectorized) {
  constexpr int V = vector16<T>::size;
  __shared__ max_and_sum scratch[32];
  const int64_t vector_end = vectorized ? vocab / V * V : 0;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    T* x = logits + row * vocab;
    max_and_sum mine{-INFINITY, 0.0f};
    for (int64_t c = static_cast<int64_t>(threadIdx.x) * V; c < vector_end;
         c += static_cast<int64_t>(blockDim.x) * V) {
      const uint4 raw = vector16<T>::fetch(x + c);
#pragma unroll
      for (int i = 0; i < V; ++i)
        mine = add_value(mine, scaled(vector16<T>::element(raw, i), tau));
    }
    for (int64_t c = vector_end + threadIdx.x; c < vocab; c += blockDim.x)
      mine = add_value(mine, scaled(to_float(x[c]), tau));
    const max_and_sum all = block_max_and_sum(mine, scratch);
    const float log_sum = logf(all.sum);
    const int64_t target = targets[row];
    const bool valid = target >= 0 && target < vocab;
    if (threadIdx.x == 0)
      out[row] = valid ? __fsub_rn(__fsub_rn(scaled(to_float(x[target]), tau), all.max), log_sum)
                       : NAN;
    __syncthreads(); // x[target] is read before the gradient overwrites it

    auto gradient = [&](float xc, int64_t c) {
      const float logp = __fsub_rn(__fsub_rn(scaled(xc, tau), all.max), log_sum);
      const float g = __fsub_rn(c == target ? 1.0f : 0.0f, expf(logp));
      return tau == 1.0f ? g : __fdiv_rn(g, tau);
    };
    for (int64_t c = static_cast<int64_t>(threadIdx.x) * V; c < vector_end;
         c += static_cast<int64_t>(blockDim.x) * V) {
      const uint4 raw = vector16<T>::fetch(x + c);
      uint4 result;
#pragma unroll
      for (int i = 0; i < V; ++i)
        reinterpret_cast<T*>(&result)[i] =
          from_float<T>(gradient(vector16<T>::element(raw, i), c + i));
      *reinterpret_cast<uint4*>(x + c) = result;
    }
    for (int64_t c = vector_end + threadIdx.x; c < vocab; c += blockDim.x)
      x[c] = from_float<T>(gradient(to_float(x[c]), c));
    __syncthreads(); // scratch is reused by the next row
  }
}

} // namespace kbrl::model::cuda
