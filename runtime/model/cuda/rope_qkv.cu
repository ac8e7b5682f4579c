// RoPE on q and k plus the key/value write, from the fused qkv projection, in one kernel
// (fused_kernels.hpp). It replaces run_layer()'s view / q_norm, k_norm / transpose /
// apply_rotary / scatter_ into the cache: one block per (token, head) of the projection's
// heads + 2 kv_heads, one thread per rotating pair (i, i + head_dim / 2).

#include "runtime/model/cuda/device_math.cuh"
#include "runtime/model/cuda/fused_kernels.hpp"

namespace kbrl::model::cuda {

namespace {

template <class T>
__global__ void rope_qkv_kernel(const T* __restrict__ qkv, const T* __restrict__ cos,
                                const T* __restrict__ sin, const T* __restrict__ q_norm,
                                const T* __restrict__ k_norm, float eps, T* __restrict__ q_out,
                                kv_destination kv, qkv_shape s) {
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
  // x * cos + rotate_half(x) * sin, rotate_half(x) = [-x_hi, x_lo]; every op stored in T.
  const float out_lo = __fadd_rn(round_to<T>(__fmul_rn(lo, to_float(c[i]))),
                                 round_to<T>(__fmul_rn(-hi, to_float(sn[i]))));
  const float out_hi = __fadd_rn(round_to<T>(__fmul_rn(hi, to_float(c[i + half]))),
                                 round_to<T>(__fmul_rn(lo, to_float(sn[i + half]))));
  dst[i] = from_float<T>(out_lo);
  dst[i + half] = from_float<T>(out_hi);
}

template <class T>
cudaError_t launch(const void* qkv, const void* cos, const void* sin, const void* q_norm,
                   const void* k_norm, float eps, void* q_out, const kv_destination& kv,
                   const qkv_shape& s, cudaStream_t stream) {
  if (s.head_dim <= 0 || s.head_dim % 2 != 0 || s.head_dim > 2048 || s.heads <= 0
      || s.kv_heads <= 0 || s.batch < 0 || s.seq <= 0
      || s.row_stride < (s.heads + 2 * s.kv_heads) * s.head_dim)
    return cudaErrorInvalidValue;
  const int64_t blocks = s.batch * s.seq * (s.heads + 2 * s.kv_heads);
  if (blocks == 0)
    return cudaSuccess;
  if (blocks > 0x7fffffffLL)
    return cudaErrorInvalidValue;
  const int threads = warp_multiple(s.head_dim / 2, 1024);
  rope_qkv_kernel<T><<<static_cast<unsigned>(blocks), threads, 0, stream>>>(
    static_cast<const T*>(qkv), static_cast<const T*>(cos), static_cast<const T*>(sin),
    static_cast<const T*>(q_norm), static_cast<const T*>(k_norm), eps, static_cast<T*>(q_out),
    kv, s);
  return cudaGetLastError();
}

} // namespace

cudaError_t rope_qkv(element_type type, const void* qkv, const void* cos, const void* sin,
                     const void* q_norm, const void* k_norm, float eps, void* q_out,
                     const kv_destination& kv, const qkv_shape& shape, cudaStream_t stream) {
  switch (type) {
  case element_type::f32:
    return launch<float>(qkv, cos, sin, q_norm, k_norm, eps, q_out, kv, shape, stream);
  case element_type::f16:
    return launch<__half>(qkv, cos, sin, q_norm, k_norm, eps, q_out, kv, shape, stream);
  case element_type::bf16:
    return launch<__nv_bfloat16>(qkv, cos, sin, q_norm, k_norm, eps, q_out, kv, shape, stream);
  }
  return cudaErrorInvalidValue;
}

} // namespace kbrl::model::cuda
