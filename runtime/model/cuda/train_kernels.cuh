// Kernels of the training path (fused_kernels.hpp): RMSNorm's backward, SwiGLU of separate
// gate and up tensors forward and backward, and RoPE forward and backward. Each replaces a chain of libtorch kernels (casts,
// pow, mean, rsqrt, products and their backward), reading its inputs once.
//
// RMSNorm's forward is add_rms_norm_kernel without a delta; its backward recomputes the row's
// scale from x (one more read of a row the backward reads anyway) instead of keeping it, and
// follows the composition in transformer.cpp (rms_norm) through autograd:
//   g      = to_T(grad_out * weight)            (the product's gradient, in T)
//   dx     = scale * g - scale^3 / dim * x * sum(g * x)     (float32, rounded to T once)
// The weight's gradient is not computed: the callers use these kernels for frozen weights only
// (LoRA training).
//
// SwiGLU: out = to_T(to_T(silu(gate)) * up), as at::silu(gate) * up; its backward gives
//   grad_up   = to_T(grad_out * to_T(silu(gate)))
//   grad_gate = to_T(to_T(grad_out * up) * sigmoid(gate) * (1 + gate * (1 - sigmoid(gate))))
// (at::silu_backward's formula, in float32).
//
// RoPE: out = to_T(fma(swapped(x), sin, to_T(x * cos))), as apply_rotary's at::addcmul(x * cos,
// x.roll(dim / 2, -1), sin) rounds it (swapped(x)[i] = x[(i + dim/2) % dim]; sin carries
// rotate_half's sign); its backward, the same composition's gradient,
//   grad_x[i] = to_T(to_T(g[i] * cos[i]) + to_T(g[j] * sin[j])),  j = (i + dim/2) % dim
// (rolling by half the head is its own inverse).
//
// The kernels themselves; train_kernels.cu launches them. Kept apart so that a host emulation
// (test/cuda_emulation) can run the same code without a GPU.

#pragma once

#include "runtime/model/cuda/add_rms_norm_kernel.cuh"
#include "runtime/model/cuda/device_math.cuh"
#include "runtime/model/cuda/fused_kernels.hpp"

namespace kbrl::model::cuda {

/// One block per row of `dim` elements (blockDim.x a multiple of 32).
template <class T>
__global__ void rms_norm_backward_kernel(const T* __restrict__ grad_out, const T* __restrict__ x,
                                         const T* __restrict__ weight, T* __restrict__ grad_x,
                                         int64_t dim, float eps) {
  __shared__ float squares_scratch[32];
  __shared__ float dot_scratch[32];
  const int64_t row = blockIdx.x;
  const T* xr = x + row * dim;
  const T* gr = grad_out + row * dim;
  T* out = grad_x + row * dim;
  float squares = 0.0f, dot = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    const float h = to_float(xr[i]);
    const float g = round_to<T>(__fmul_rn(to_float(gr[i]), to_float(weight[i])));
    squares = __fadd_rn(squares, __fmul_rn(h, h));
    dot = __fadd_rn(dot, __fmul_rn(g, h));
  }
  const float scale = rms_scale(block_sum(squares, squares_scratch), dim, eps);
  const float total = block_sum(dot, dot_scratch);
  const float c = scale * scale * scale * total / static_cast<float>(dim);
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    const float h = to_float(xr[i]);
    const float g = round_to<T>(__fmul_rn(to_float(gr[i]), to_float(weight[i])));
    out[i] = from_float<T>(scale * g - c * h);
  }
}

/// out = silu(gate) * up over `n` elements of three same-shaped contiguous tensors.
template <class T>
__global__ void swiglu_pair_kernel(const T* __restrict__ gate, const T* __restrict__ up,
                                   T* __restrict__ out, int64_t n) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const float g = to_float(gate[i]);
    const float silu = round_to<T>(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g))));
    out[i] = from_float<T>(__fmul_rn(silu, to_float(up[i])));
  }
}

/// The gradients of swiglu_pair_kernel's inputs for `grad_out`.
template <class T>
__global__ void swiglu_pair_backward_kernel(const T* __restrict__ grad_out,
                                            const T* __restrict__ gate, const T* __restrict__ up,
                                            T* __restrict__ grad_gate, T* __restrict__ grad_up,
                                            int64_t n) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const float g = to_float(gate[i]), u = to_float(up[i]), dy = to_float(grad_out[i]);
    const float e = expf(-g);
    const float silu = round_to<T>(__fdiv_rn(g, __fadd_rn(1.0f, e)));
    const float sigmoid = 1.0f / (1.0f + e);
    grad_up[i] = from_float<T>(__fmul_rn(dy, silu));
    const float dsilu = round_to<T>(__fmul_rn(dy, u));
    grad_gate[i] = from_float<T>(dsilu * sigmoid * (1.0f + g * (1.0f - sigmoid)));
  }
}

/// RoPE forward (backward = false: out = rotary(x)) or its input gradient (backward = true: x
/// is the upstream gradient, out the gradient of x), one thread per element.
template <class T>
__global__ void rotary_kernel(const T* __restrict__ x, const T* __restrict__ cos,
                              const T* __restrict__ sin, T* __restrict__ out, rotary_layout l,
                              bool backward) {
  const int64_t total = l.batch * l.heads * l.seq * l.dim, half = l.dim / 2;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += step) {
    const int64_t d = i % l.dim, s = (i / l.dim) % l.seq, h = (i / (l.dim * l.seq)) % l.heads;
    const int64_t b = i / (l.dim * l.seq * l.heads);
    const int64_t other = d < half ? d + half : d - half;
    const T* row = x + b * l.x_strides[0] + h * l.x_strides[1] + s * l.x_strides[2];
    const int64_t angle = (b * l.seq + s) * l.dim;
    const float direct = round_to<T>(__fmul_rn(to_float(row[d]), to_float(cos[angle + d])));
    float value;
    if (!backward) {
      // addcmul: the product added in float with one fused multiply-add (as rope_qkv_kernel)
      value = __fmaf_rn(to_float(row[other]), to_float(sin[angle + d]), direct);
    } else {
      value = __fadd_rn(direct, round_to<T>(__fmul_rn(to_float(row[other]),
                                                      to_float(sin[angle + other]))));
    }
    out[b * l.out_strides[0] + h * l.out_strides[1] + s * l.out_strides[2] + d] =
      from_float<T>(value);
  }
}

} // namespace kbrl::model::cuda
