// RoPE on q and k plus the key/value write, from the fused qkv projection, in one kernel
// (fused_kernels.hpp). It replaces run_layer()'s view / q_norm, k_norm / transpose /
// apply_rotary / scatter_ into the cache: one block per (token, head) of the projection's
// heads + 2 kv_heads, one thread per rotating pair (i, i + head_dim / 2).
//
// The kernel itself; rope_qkv.cu launches it. Kept apart so that a host emulation
// (test/cuda_emulation) can run the same code without a GPU.

#pragma once

#include "runtime/model/cuda/dependent_launch.cuh"
#include "runtime/model/cuda/device_math.cuh"
#include "runtime/model/cuda/fused_kernels.hpp"

namespace kbrl::model::cuda {

template <class T>
__global__ void rope_qkv_kernel(const T* __restrict__ qkv, const T* __restrict__ cos,
                                const T* __restrict__ sin, const T* __restrict__ q_norm,
                                const T* __restrict__ k_norm, float eps, T* __restrict__ q_out,
                                kv_destination kv, qkv_shape s) {
  // Activations only after the kernel before has completed (dependent_launch.cuh).
  let_next_kernel_start();
  wait_for_previous_kernel();
  __shared__ float scratch[32];
  const int64_t heads_all = s.heads + 2 * s.kv_heads;
  const int64_t token = blockIdx.x / heads_all;         // b * seq + position in the batch row
  const int64_t slot = blockIdx.x - token * heads_all;  // which of the projection's heads
  const int64_t b = token / s.seq, t = token - b * s.seq;
  const int64_t half = s.head_dim / 2;
  const int64_t i = threadIdx.x;
  const bool active = i < half; // the block is rounded up to whole warps
  const T* src = qkv + token * s.row_stride + slot * s.head_dim;

  const bool is_q = slot < s.heads;
  const bool is_k = !is_q && slot < s.heads + s.kv_heads;
  T* dst = nullptr;
  if (is_q) {
    dst = q_out + ((b * s.heads + slot) * s.seq + t) * s.head_dim;
  } else {
    int64_t p = t;
    if (kv.positions != nullptr) {
      p = kv.positions[token];
      if (p < 0 || p >= kv.position_limit)
        return; // the whole block: no reduction below is left waiting
    }
    const int64_t kv_head = is_k ? slot - s.heads : slot - s.heads - s.kv_heads;
    const int64_t offset = b * kv.batch_stride + kv_head * kv.head_stride + p * kv.position_stride;
    dst = static_cast<T*>(is_k ? kv.keys : kv.values) + offset;
    if (!is_k) { // values: copied as they are
      if (active) {
        dst[i] = src[i];
        dst[i + half] = src[i + half];
      }
      return;
    }
  }

  float lo = active ? to_float(src[i]) : 0.0f;
  float hi = active ? to_float(src[i + half]) : 0.0f;
  const T* norm = is_q ? q_norm : k_norm;
  if (norm != nullptr) { // the same for the whole block
    // rms_norm over the head: float32 mean of squares, normed stored in T, times the weight.
    const float squares = active ? __fadd_rn(__fmul_rn(lo, lo), __fmul_rn(hi, hi)) : 0.0f;
    const float total = block_sum(squares, scratch);
    const float mean = __fmul_rn(total, 1.0f / static_cast<float>(s.head_dim));
    const float scale = rsqrtf(__fadd_rn(mean, eps));
    if (active) {
      lo = round_to<T>(__fmul_rn(to_float(norm[i]), round_to<T>(__fmul_rn(lo, scale))));
      hi = round_to<T>(__fmul_rn(to_float(norm[i + half]), round_to<T>(__fmul_rn(hi, scale))));
    }
  }
  if (!active)
    return;
  const T* c = cos + token * s.head_dim;
  const T* sn = sin + token * s.head_dim;
  // x * cos + swap_halves(x) * sin, where the sin table carries rotate_half's sign (-sin on
  // the low half, see rotary.hpp). Rounded as apply_rotary's libtorch ops round: x * cos is
  // stored in T, then addcmul adds the product in float (one fused multiply-add) and rounds once.
  const float out_lo = __fmaf_rn(hi, to_float(sn[i]), round_to<T>(__fmul_rn(lo, to_float(c[i]))));
  const float out_hi =
    __fmaf_rn(lo, to_float(sn[i + half]), round_to<T>(__fmul_rn(hi, to_float(c[i + half]))));
  dst[i] = from_float<T>(out_lo);
  dst[i + half] = from_float<T>(out_hi);
}

} // namespace kbrl::model::cuda
