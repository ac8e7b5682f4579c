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

/// SwiGLU of one element: to_T(to_T(silu(g)) * u) before the final rounding.
template <class T>
__device__ __forceinline__ float swiglu_element(float g, float u) {
  const float silu = round_to<T>(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g))));
  return __fmul_rn(silu, u);
}

/// SwiGLU's input gradients of one element (the file comment's formulas), before rounding.
template <class T>
__device__ __forceinline__ void swiglu_element_backward(float dy, float g, float u,
                                                        float& grad_gate, float& grad_up) {
  const float e = expf(-g);
  const float silu = round_to<T>(__fdiv_rn(g, __fadd_rn(1.0f, e)));
  const float sigmoid = 1.0f / (1.0f + e);
  grad_up = __fmul_rn(dy, silu);
  const float dsilu = round_to<T>(__fmul_rn(dy, u));
  grad_gate = dsilu * sigmoid * (1.0f + g * (1.0f - sigmoid));
}

/// Element i of 16 bytes of T set to to_T(v).
template <class T>
__device__ __forceinline__ void set_element(uint4& raw, int i, float v) {
  reinterpret_cast<T*>(&raw)[i] = from_float<T>(v);
}

/// out = silu(gate) * up, row by row (swiglu_layout: gate and up may be the two halves of one
/// stacked gate|up row). A block takes a row at a time (grid-stride over the rows), its threads
/// across the row, 16 bytes a load where `vectorized` (the launcher asks for it when every row
/// of every tensor starts 16-byte aligned) and one element at a time for the row's rest. The
/// first version went one element a thread over contiguous tensors: 541 us for 8 x 2048 x 8960
/// bf16 elements on an H200, a third of the copy bandwidth; the 16-byte one took 220 us.
template <class T>
__global__ void swiglu_pair_kernel(const T* __restrict__ gate, const T* __restrict__ up,
                                   T* __restrict__ out, swiglu_layout l, bool vectorized) {
  constexpr int V = vector16<T>::size;
  const int64_t vector_end = vectorized ? l.width / V * V : 0;
  for (int64_t row = blockIdx.x; row < l.rows; row += gridDim.x) {
    const T* g = gate + row * l.in_stride;
    const T* u = up + row * l.in_stride;
    T* o = out + row * l.out_stride;
    for (int64_t c = static_cast<int64_t>(threadIdx.x) * V; c < vector_end;
         c += static_cast<int64_t>(blockDim.x) * V) {
      const uint4 gv = vector16<T>::fetch(g + c), uv = vector16<T>::fetch(u + c);
      uint4 result;
#pragma unroll
      for (int i = 0; i < V; ++i)
        set_element<T>(result, i,
                       swiglu_element<T>(vector16<T>::element(gv, i), vector16<T>::element(uv, i)));
      *reinterpret_cast<uint4*>(o + c) = result;
    }
    for (int64_t c = vector_end + threadIdx.x; c < l.width; c += blockDim.x)
      o[c] = from_float<T>(swiglu_element<T>(to_float(g[c]), to_float(u[c])));
  }
}

/// The gradients of swiglu_pair_kernel's inputs for `grad_out` (laid out as out), written as
/// gate and up are laid out (`vectorized` as there, for all five tensors).
template <class T>
__global__ void swiglu_pair_backward_kernel(const T* __restrict__ grad_out,
                                            const T* __restrict__ gate, const T* __restrict__ up,
                                            T* __restrict__ grad_gate, T* __restrict__ grad_up,
                                            swiglu_layout l, bool vectorized) {
  constexpr int V = vector16<T>::size;
  const int64_t vector_end = vectorized ? l.width / V * V : 0;
  for (int64_t row = blockIdx.x; row < l.rows; row += gridDim.x) {
    const T* dy = grad_out + row * l.out_stride;
    const T* g = gate + row * l.in_stride;
    const T* u = up + row * l.in_stride;
    T* dg = grad_gate + row * l.in_stride;
    T* du = grad_up + row * l.in_stride;
    for (int64_t c = static_cast<int64_t>(threadIdx.x) * V; c < vector_end;
         c += static_cast<int64_t>(blockDim.x) * V) {
      const uint4 dyv = vector16<T>::fetch(dy + c);
      const uint4 gv = vector16<T>::fetch(g + c), uv = vector16<T>::fetch(u + c);
      uint4 dgv, duv;
#pragma unroll
      for (int i = 0; i < V; ++i) {
        float a, b;
        swiglu_element_backward<T>(vector16<T>::element(dyv, i), vector16<T>::element(gv, i),
                                   vector16<T>::element(uv, i), a, b);
        set_element<T>(dgv, i, a);
        set_element<T>(duv, i, b);
      }
      *reinterpret_cast<uint4*>(dg + c) = dgv;
      *reinterpret_cast<uint4*>(du + c) = duv;
    }
    for (int64_t c = vector_end + threadIdx.x; c < l.width; c += blockDim.x) {
      float a, b;
      swiglu_element_backward<T>(to_float(dy[c]), to_float(g[c]), to_float(u[c]), a, b);
      dg[c] = from_float<T>(a);
      du[c] = from_float<T>(b);
    }
  }
}

/// Pairs of elements (d, d + dim / 2) one thread of rotary_kernel takes in a row.
constexpr int rotary_pairs_per_thread = 4;

/// RoPE forward (backward = false: out = rotary(x)) or its input gradient (backward = true: x
/// is the upstream gradient, out the gradient of x). A thread takes rotary_pairs_per_thread
/// consecutive d of a row's first half and their partners d + dim / 2, which each need the
/// other: the row's place (batch, head, position) is worked out once per 8 elements. The first
/// version worked it out for every element with four 64-bit divisions: 135 us a call on an
/// H200 where the bytes need about 21.
template <class T>
__global__ void rotary_kernel(const T* __restrict__ x, const T* __restrict__ cos,
                              const T* __restrict__ sin, T* __restrict__ out, rotary_layout l,
                              bool backward) {
  constexpr int P = rotary_pairs_per_thread;
  const int64_t half = l.dim / 2, per_row = (half + P - 1) / P;
  const int64_t units = l.batch * l.heads * l.seq * per_row;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t unit = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; unit < units;
       unit += step) {
    const int64_t row = unit / per_row, first = (unit % per_row) * P;
    const int64_t s = row % l.seq, bh = row / l.seq, h = bh % l.heads, b = bh / l.heads;
    const T* in = x + b * l.x_strides[0] + h * l.x_strides[1] + s * l.x_strides[2];
    T* to = out + b * l.out_strides[0] + h * l.out_strides[1] + s * l.out_strides[2];
    const T* c = cos + (b * l.seq + s) * l.dim;
    const T* sn = sin + (b * l.seq + s) * l.dim;
#pragma unroll
    for (int k = 0; k < P; ++k) {
      const int64_t d = first + k, e = d + half; // e: d's partner in the second half
      if (d >= half)
        break;
      const float xd = to_float(in[d]), xe = to_float(in[e]);
      const float direct_d = round_to<T>(__fmul_rn(xd, to_float(c[d])));
      const float direct_e = round_to<T>(__fmul_rn(xe, to_float(c[e])));
      if (!backward) {
        // addcmul: the product added in float with one fused multiply-add (as rope_qkv_kernel)
        to[d] = from_float<T>(__fmaf_rn(xe, to_float(sn[d]), direct_d));
        to[e] = from_float<T>(__fmaf_rn(xd, to_float(sn[e]), direct_e));
      } else {
        to[d] = from_float<T>(__fadd_rn(direct_d, round_to<T>(__fmul_rn(xe, to_float(sn[e])))));
        to[e] = from_float<T>(__fadd_rn(direct_e, round_to<T>(__fmul_rn(xd, to_float(sn[d])))));
      }
    }
  }
}

} // namespace kbrl::model::cuda
