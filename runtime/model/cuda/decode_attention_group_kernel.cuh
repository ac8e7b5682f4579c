// Decode attention for many sequences: one block per (sequence, kv head, split of the keys)
// serves every query head of the kv head's group, so each cached key and value row is read from
// memory once per step. decode_attention_kernel.cuh's first kernel (one block per query head)
// reads a kv head's rows once for every query head of its group: 6-7x the cache traffic for
// Qwen2 shapes, which made batch 32 and 128 decode steps slower than SDPA's.
//
// A block walks its split's keys in chunks of decode_keys_per_block (one key per thread for
// the scores), keeping per query head the running maximum score, the running sum of
// exponentials and the weighted value sums (rescaled when the maximum grows, as flash decoding
// does), and leaves the same partials as decode_attention_partial_kernel: the merge kernel
// there combines the splits. Long caches get long splits (decode_attention_group_keys_per_split
// picks enough blocks to fill the device and no more), so the partials stay small next to the
// cache they summarize.
//
// Scores, softmax and the weighted sums are float32; the order of the sums differs from the
// per-head kernel's, so the two agree within float32 rounding, not bit for bit.

#pragma once

#include "runtime/model/cuda/decode_attention_kernel.cuh"

namespace kbrl::model::cuda {

/// The most query heads one kv head may serve (the group) in the grouped kernel.
constexpr int decode_max_group = 8;

/// Partials as decode_attention_partial_kernel leaves them ([batch * heads * splits,
/// head_dim + 2]). Block index: (b * kv_heads + kv_head) * splits + split, blockDim.x ==
/// decode_keys_per_block; split s covers keys [s * keys_per_split, (s + 1) * keys_per_split).
template <class T>
__global__ void decode_attention_group_partial_kernel(const T* __restrict__ q, decode_kv kv,
                                                      const int64_t* __restrict__ positions,
                                                      float* __restrict__ partials,
                                                      decode_attention_shape shape,
                                                      int64_t keys_per_split) {
  constexpr int V = vector16<T>::size;
  constexpr int U = decode_loads_in_flight;
  constexpr int K = decode_keys_per_block;
  constexpr int warps = K / 32;
  __shared__ float q_shared[decode_max_group * decode_max_head_dim];
  __shared__ float p_shared[decode_max_group * K]; // scores, then their exponentials
  __shared__ float running_max[decode_max_group];
  __shared__ float running_sum[decode_max_group];
  __shared__ float rescale[decode_max_group];
  __shared__ float sums[K * V]; // the row groups' value sums of one head, to be added

  const int64_t splits = shape.splits, dim = shape.head_dim;
  const int64_t group = shape.heads / shape.kv_heads;
  const int64_t split = blockIdx.x % splits, bk = blockIdx.x / splits;
  const int64_t b = bk / shape.kv_heads, kv_head = bk % shape.kv_heads;
  const int64_t first_head = b * shape.heads + kv_head * group; // row of q and of the partials
  int64_t valid = positions[b] + 1; // the query sees cached positions [0, its own]
  valid = valid < 1 ? 1 : (valid > shape.key_len ? shape.key_len : valid);
  const int64_t begin = split * keys_per_split;
  const int64_t end = begin + keys_per_split < valid ? begin + keys_per_split : valid;

  for (int64_t i = threadIdx.x; i < group * dim; i += blockDim.x)
    q_shared[i] = to_float(q[first_head * dim + i]);
  if (threadIdx.x < decode_max_group) {
    running_max[threadIdx.x] = -INFINITY;
    running_sum[threadIdx.x] = 0.0f;
  }
  __syncthreads();

  const T* keys = static_cast<const T*>(kv.keys) + b * kv.batch_stride + kv_head * kv.head_stride;
  const T* values =
    static_cast<const T*>(kv.values) + b * kv.batch_stride + kv_head * kv.head_stride;

  // The value sums: the block's threads form `row_groups` groups of head_dim / V threads;
  // thread (r, c) sums columns [c V, c V + V) over rows r, r + row_groups, ... of each chunk.
  const int64_t per_row = dim / V, row_groups = K / per_row;
  const int64_t r = threadIdx.x / per_row, c = threadIdx.x % per_row;
  float acc[decode_max_group][V];
#pragma unroll
  for (int h = 0; h < decode_max_group; ++h)
#pragma unroll
    for (int i = 0; i < V; ++i)
      acc[h][i] = 0.0f;

  for (int64_t first = begin; first < end; first += K) {
    const int64_t count = end - first < K ? end - first : K;

    // Scores: thread t reads key first + t once and scores it against every head of the group.
    float dot[decode_max_group];
#pragma unroll
    for (int h = 0; h < decode_max_group; ++h)
      dot[h] = 0.0f;
    if (threadIdx.x < count) {
      const T* k = keys + (first + threadIdx.x) * kv.position_stride;
      const int64_t chunks = dim / V;
      for (int64_t base = 0; base < chunks; base += U) {
        uint4 raw[U];
#pragma unroll
        for (int u = 0; u < U; ++u)
          raw[u] = base + u < chunks ? vector16<T>::fetch(k + (base + u) * V) : uint4{0, 0, 0, 0};
#pragma unroll
        for (int u = 0; u < U; ++u)
          if (base + u < chunks) {
#pragma unroll
            for (int i = 0; i < V; ++i) {
              const float key = vector16<T>::element(raw[u], i);
              const float* qcol = q_shared + (base + u) * V + i;
#pragma unroll
              for (int h = 0; h < decode_max_group; ++h)
                if (h < group)
                  dot[h] += qcol[h * dim] * key;
            }
          }
      }
    }
#pragma unroll
    for (int h = 0; h < decode_max_group; ++h)
      if (h < group)
        p_shared[h * K + threadIdx.x] = threadIdx.x < count ? dot[h] * shape.scale : -INFINITY;
    __syncthreads();

    // Softmax bookkeeping: warp w takes heads w, w + warps, ...; every warp runs the same
    // rounds (its shuffles are the whole block's, as the host emulation needs).
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int64_t round = 0; round * warps < group; ++round) {
      const int64_t h = round * warps + warp;
      const bool mine = h < group;
      float top = -INFINITY;
      if (mine)
        for (int j = lane; j < K; j += 32)
          top = fmaxf(top, p_shared[h * K + j]);
      for (int offset = 16; offset > 0; offset >>= 1)
        top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, offset));
      const float old_max = mine ? running_max[h] : -INFINITY;
      const float new_max = fmaxf(old_max, top);
      float total = 0.0f;
      if (mine)
        for (int j = lane; j < K; j += 32) {
          const float s = p_shared[h * K + j];
          const float p = s == -INFINITY ? 0.0f : expf(s - new_max);
          p_shared[h * K + j] = p;
          total += p;
        }
      for (int offset = 16; offset > 0; offset >>= 1)
        total += __shfl_xor_sync(0xffffffffu, total, offset);
      if (mine && lane == 0) {
        // no valid key yet on either side: nothing to rescale (and no inf - inf)
        const float factor = old_max == -INFINITY ? 0.0f : expf(old_max - new_max);
        rescale[h] = factor;
        running_sum[h] = running_sum[h] * factor + total;
        running_max[h] = new_max;
      }
    }
    __syncthreads();

    // Weighted values: each value row is read once and added into every head's sums.
#pragma unroll
    for (int h = 0; h < decode_max_group; ++h)
      if (h < group) {
        const float f = rescale[h];
#pragma unroll
        for (int i = 0; i < V; ++i)
          acc[h][i] *= f;
      }
    if (r < row_groups) {
      const T* column = values + first * kv.position_stride + c * V;
      for (int64_t base = r; base < count; base += U * row_groups) {
        uint4 raw[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int64_t j = base + u * row_groups;
          raw[u] = j < count ? vector16<T>::fetch(column + j * kv.position_stride)
                             : uint4{0, 0, 0, 0};
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int64_t j = base + u * row_groups;
          if (j < count) {
#pragma unroll
            for (int h = 0; h < decode_max_group; ++h)
              if (h < group) {
                const float w = p_shared[h * K + j];
#pragma unroll
                for (int i = 0; i < V; ++i)
                  acc[h][i] += w * vector16<T>::element(raw[u], i);
              }
          }
        }
      }
    }
    __syncthreads(); // p_shared is the next chunk's
  }

  // Each head's row groups added; the partial row as the merge kernel reads it.
  for (int64_t h = 0; h < group; ++h) {
    if (r < row_groups) {
      float mine[V];
#pragma unroll
      for (int g = 0; g < decode_max_group; ++g)
        if (g == h) {
#pragma unroll
          for (int i = 0; i < V; ++i)
            mine[i] = acc[g][i];
        }
#pragma unroll
      for (int i = 0; i < V; ++i)
        sums[r * dim + c * V + i] = mine[i];
    }
    __syncthreads();
    float* out = partials + ((first_head + h) * splits + split) * (dim + 2);
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
      float s = 0.0f;
      for (int64_t k = 0; k < row_groups; ++k)
        s += sums[k * dim + i];
      out[i] = s;
    }
    if (threadIdx.x == 0) {
      out[dim] = running_max[h]; // -inf for a split past the sequence: the merge skips it
      out[dim + 1] = running_sum[h];
    }
    __syncthreads();
  }
}

} // namespace kbrl::model::cuda
