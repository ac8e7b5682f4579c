// Attention of one new token per sequence over its kv cache (the decode step), split over the
// keys ("flash decoding"): the first kernel gives each block of threads 128 consecutive cached
// positions of one (sequence, query head) and leaves a partial result (the running maximum of
// the scores, the sum of their exponentials and the weighted sum of the values); the second
// merges a head's partials. A decode step's attention has too little work per head for
// at::scaled_dot_product_attention's kernels, which spend ~19 us per layer on a 768-key cache
// at batch 1 (H100); split this way the work is heads x key blocks blocks instead of one per
// head.
//
// The work is latency-bound (a thread reads 16 x 16 bytes of keys, then of values), so each
// thread issues up to `decode_loads_in_flight` 16-byte loads before it uses any of them: the
// first version waited on one load at a time and took 11.8 + 3.2 us per layer there, this one
// 6.5 + 3.4 us. Each block reads its kv head's cache for one query head, so a group of query
// heads reads it several times over: at batch 32 and 128 that made decode steps slower than
// SDPA's (measured), and fused_ops.cpp uses these kernels for one sequence only. One block per
// kv head and key block, serving the whole group, is decode_attention_group_kernel.cuh (opt-in:
// not yet faster than SDPA at batch 128, BENCHMARKS.md).
//
// Scores, softmax and the weighted sum are float32 throughout (the reference rounds the
// probabilities to T before multiplying with the values, so results agree within T's rounding,
// not bit for bit).
//
// The kernels themselves; decode_attention.cu launches them. Kept apart so that a host emulation
// (test/cuda_emulation) can run the same code without a GPU.

#pragma once

#include "runtime/model/cuda/dependent_launch.cuh"
#include "runtime/model/cuda/device_math.cuh"
#include "runtime/model/cuda/fused_kernels.hpp"

namespace kbrl::model::cuda {

/// Keys per block of the first kernel, and its threads: one thread per key for the scores.
constexpr int decode_keys_per_block = 128;
static_assert(decode_keys_per_block == decode_chunk_keys, "fused_kernels.hpp counts on it");
/// The largest head_dim the kernels take (their shared arrays are sized for it).
constexpr int decode_max_head_dim = 256;

/// The maximum of `v` over the block, returned to every thread (as block_sum; its own scratch).
__device__ __forceinline__ float block_max(float v, float* scratch) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0)
    scratch[warp] = v;
  __syncthreads();
  const int warps = blockDim.x >> 5;
  v = lane < warps ? scratch[lane] : -INFINITY;
  for (int offset = 16; offset > 0; offset >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

/// What block `block` of a kernel with one block per (sequence, kv head, split of
/// `keys_per_split` keys) serves (the grouped and tensor-core kernels): sequence b, kv head,
/// the row of q and of the partials of its first query head, and its keys [begin, end), end
/// clamped to the query's own position (begin >= end: none).
struct decode_group_span {
  int64_t split, b, kv_head, first_head, begin, end;
};

__device__ __forceinline__ decode_group_span decode_group_span_of(
  int64_t block, const int64_t* positions, const decode_attention_shape& shape,
  int64_t keys_per_split) {
  decode_group_span span;
  const int64_t group = shape.heads / shape.kv_heads;
  span.split = block % shape.splits;
  const int64_t bk = block / shape.splits;
  span.b = bk / shape.kv_heads;
  span.kv_head = bk % shape.kv_heads;
  span.first_head = span.b * shape.heads + span.kv_head * group;
  int64_t valid = positions[span.b] + 1; // the query sees cached positions [0, its own]
  valid = valid < 1 ? 1 : (valid > shape.key_len ? shape.key_len : valid);
  span.begin = span.split * keys_per_split;
  span.end = span.begin + keys_per_split < valid ? span.begin + keys_per_split : valid;
  return span;
}

/// Loads each thread issues before it uses the first (registers: 4 per load).
constexpr int decode_loads_in_flight = 16;

/// Partials: per (sequence, head, split) `head_dim` weighted value sums, then the maximum score
/// and the sum of exp(score - maximum), float32: [batch * heads * splits, head_dim + 2].
/// Block index: (b * heads + h) * splits + split. blockDim.x == decode_keys_per_block.
template <class T>
__global__ void decode_attention_partial_kernel(const T* __restrict__ q, decode_kv kv,
                                                const int64_t* __restrict__ positions,
                                                float* __restrict__ partials,
                                                decode_attention_shape shape) {
  // Activations only after the kernel before has completed (dependent_launch.cuh).
  let_next_kernel_start();
  wait_for_previous_kernel();
  constexpr int V = vector16<T>::size;
  __shared__ float q_shared[decode_max_head_dim];
  __shared__ float p_shared[decode_keys_per_block];
  __shared__ float sums[decode_keys_per_block * V]; // [groups][head_dim] of the value sums
  __shared__ float max_scratch[32];
  __shared__ float sum_scratch[32];

  const int64_t splits = shape.splits, dim = shape.head_dim;
  const int64_t split = blockIdx.x % splits, bh = blockIdx.x / splits;
  const int64_t b = bh / shape.heads, h = bh % shape.heads;
  const int64_t kv_head = h / (shape.heads / shape.kv_heads);
  int64_t valid = positions[b] + 1; // the query sees cached positions [0, its own]
  valid = valid < 1 ? 1 : (valid > shape.key_len ? shape.key_len : valid);
  const int64_t first = split * decode_keys_per_block;
  int64_t count = valid - first;
  count = count < 0 ? 0 : (count > decode_keys_per_block ? decode_keys_per_block : count);

  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x)
    q_shared[i] = to_float(q[bh * dim + i]);
  __syncthreads();

  const T* keys = static_cast<const T*>(kv.keys) + b * kv.batch_stride + kv_head * kv.head_stride;
  const T* values =
    static_cast<const T*>(kv.values) + b * kv.batch_stride + kv_head * kv.head_stride;

  // Scores: thread t takes key first + t, its row in rounds of decode_loads_in_flight loads.
  constexpr int U = decode_loads_in_flight;
  float score = -INFINITY;
  if (threadIdx.x < count) {
    const T* k = keys + (first + threadIdx.x) * kv.position_stride;
    const int64_t chunks = dim / V;
    float dot = 0.0f;
    for (int64_t base = 0; base < chunks; base += U) {
      uint4 raw[U];
#pragma unroll
      for (int u = 0; u < U; ++u)
        raw[u] = base + u < chunks ? vector16<T>::fetch(k + (base + u) * V) : uint4{0, 0, 0, 0};
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (base + u < chunks) {
#pragma unroll
          for (int i = 0; i < V; ++i)
            dot += q_shared[(base + u) * V + i] * vector16<T>::element(raw[u], i);
        }
    }
    score = dot * shape.scale;
  }
  const float top = block_max(score, max_scratch);
  const float p = threadIdx.x < count ? expf(score - top) : 0.0f;
  const float total = block_sum(p, sum_scratch);
  p_shared[threadIdx.x] = p;
  __syncthreads();

  // Weighted values: the block's threads form `groups` groups of head_dim / V threads; thread
  // (g, c) sums columns [c V, c V + V) over keys g, g + groups, ...; then the groups are added.
  const int64_t per_row = dim / V, groups = blockDim.x / per_row;
  const int64_t g = threadIdx.x / per_row, c = threadIdx.x % per_row;
  float acc[V];
#pragma unroll
  for (int i = 0; i < V; ++i)
    acc[i] = 0.0f;
  if (g < groups) {
    // Keys g, g + groups, ..., in rounds of U loads; summed in that order.
    const T* column = values + first * kv.position_stride + c * V;
    for (int64_t base = g; base < count; base += U * groups) {
      uint4 raw[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int64_t j = base + u * groups;
        raw[u] = j < count ? vector16<T>::fetch(column + j * kv.position_stride)
                           : uint4{0, 0, 0, 0};
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int64_t j = base + u * groups;
        if (j < count) {
          const float w = p_shared[j];
#pragma unroll
          for (int i = 0; i < V; ++i)
            acc[i] += w * vector16<T>::element(raw[u], i);
        }
      }
    }
#pragma unroll
    for (int i = 0; i < V; ++i)
      sums[g * dim + c * V + i] = acc[i];
  }
  __syncthreads();
  float* out = partials + static_cast<int64_t>(blockIdx.x) * (dim + 2);
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    float s = 0.0f;
    for (int64_t k = 0; k < groups; ++k)
      s += sums[k * dim + i];
    out[i] = s;
  }
  if (threadIdx.x == 0) {
    out[dim] = count > 0 ? top : -INFINITY;
    out[dim + 1] = total;
  }
}

/// out[b, h, :] = the merged partials of (b, h), in T. Block index: b * heads + h.
template <class T>
__global__ void decode_attention_merge_kernel(const float* __restrict__ partials,
                                              T* __restrict__ out, decode_attention_shape shape) {
  // Activations only after the kernel before has completed (dependent_launch.cuh).
  let_next_kernel_start();
  wait_for_previous_kernel();
  const int64_t splits = shape.splits, dim = shape.head_dim;
  const float* mine = partials + static_cast<int64_t>(blockIdx.x) * splits * (dim + 2);
  float top = -INFINITY;
  for (int64_t s = 0; s < splits; ++s)
    top = fmaxf(top, mine[s * (dim + 2) + dim]);
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    float weighted = 0.0f, total = 0.0f;
    // A split past the sequence's last position has maximum -inf and sum 0: its factor is 0.
#pragma unroll 8
    for (int64_t s = 0; s < splits; ++s) {
      const float* part = mine + s * (dim + 2);
      const float f = expf(part[dim] - top);
      weighted += part[i] * f;
      total += part[dim + 1] * f;
    }
    out[static_cast<int64_t>(blockIdx.x) * dim + i] = from_float<T>(weighted / total);
  }
}

} // namespace kbrl::model::cuda
