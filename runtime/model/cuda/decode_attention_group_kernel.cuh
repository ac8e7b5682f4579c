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
// The group (padded to G = 4, 6 or 8 heads; padded heads have a zero query and are not written)
// and the head dimension D are template arguments. The first version took both at run time: its
// loops over heads carried a branch per head and an address computed per element, 11k
// instructions per warp, 212 registers (2 blocks per SM), and 112 us per layer at batch 32
// where SDPA took 21 (H200, Nsight Compute). Here the query is stored [element][head] and the
// probabilities [key][head], so one 16-byte shared load gives four heads' factors (8 bytes, two,
// for G = 6); the value rows are read 8 bytes per thread, a warp per 256-byte row.
//
// Scores, softmax and the weighted sums are float32; the order of the sums differs from the
// per-head kernel's, so the two agree within float32 rounding, not bit for bit.

#pragma once

#include "runtime/model/cuda/decode_attention_kernel.cuh"

namespace kbrl::model::cuda {

/// The most query heads one kv head may serve (the group) in the grouped kernel.
constexpr int decode_max_group = 8;

/// G consecutive floats of shared memory, 16 bytes a load where G is a multiple of 4, else 8 bytes
/// (G even; the arrays' rows of G floats keep 8-byte alignment).
template <int G>
__device__ __forceinline__ void load_heads(const float* from, float (&to)[G]) {
  static_assert(G % 2 == 0, "heads are loaded two or four at a time");
  if constexpr (G % 4 == 0) {
#pragma unroll
    for (int g = 0; g < G / 4; ++g) {
      const float4 v = reinterpret_cast<const float4*>(from)[g];
      to[4 * g] = v.x;
      to[4 * g + 1] = v.y;
      to[4 * g + 2] = v.z;
      to[4 * g + 3] = v.w;
    }
  } else {
#pragma unroll
    for (int g = 0; g < G / 2; ++g) {
      const float2 v = reinterpret_cast<const float2*>(from)[g];
      to[2 * g] = v.x;
      to[2 * g + 1] = v.y;
    }
  }
}

template <int G>
__device__ __forceinline__ void store_heads(float* to, const float (&from)[G]) {
  if constexpr (G % 4 == 0) {
#pragma unroll
    for (int g = 0; g < G / 4; ++g)
      reinterpret_cast<float4*>(to)[g] =
        make_float4(from[4 * g], from[4 * g + 1], from[4 * g + 2], from[4 * g + 3]);
  } else {
#pragma unroll
    for (int g = 0; g < G / 2; ++g)
      reinterpret_cast<float2*>(to)[g] = make_float2(from[2 * g], from[2 * g + 1]);
  }
}

__device__ __forceinline__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

/// Partials as decode_attention_partial_kernel leaves them ([batch * heads * splits, D + 2]).
/// Block index: (b * kv_heads + kv_head) * splits + split, blockDim.x == decode_keys_per_block;
/// split s covers keys [s * keys_per_split, (s + 1) * keys_per_split). shape.heads / kv_heads
/// <= G and shape.head_dim == D (the launcher picks G and D).
template <class T, int G, int D>
__global__ void __launch_bounds__(decode_keys_per_block, 4)
  decode_attention_group_partial_kernel(const T* __restrict__ q, decode_kv kv,
                                        const int64_t* __restrict__ positions,
                                        float* __restrict__ partials,
                                        decode_attention_shape shape, int64_t keys_per_split) {
  // Activations only after the kernel before has completed (dependent_launch.cuh).
  let_next_kernel_start();
  wait_for_previous_kernel();
  constexpr int K = decode_keys_per_block; // keys per chunk, and threads
  constexpr int warps = K / 32;
  constexpr int KV = vector16<T>::size;      // key elements per load
  constexpr int key_loads = D / KV;          // loads per key row
  constexpr int KU = key_loads < 8 ? key_loads : 8; // key loads in flight
  constexpr int VV = vector8<T>::size;       // value elements per load
  constexpr int per_row = D / VV;            // threads per value row
  constexpr int row_groups = K / per_row;    // value rows read at once
  constexpr int rows = K / row_groups;       // value rows per thread per chunk
  constexpr int VU = rows < 8 ? rows : 8;    // value loads in flight
  static_assert(D % KV == 0 && key_loads % KU == 0 && K % per_row == 0 && rows % VU == 0,
                "unsupported head dimension");
  __shared__ __align__(16) float q_shared[D * G]; // [element][head]
  __shared__ __align__(16) float p_shared[K * G]; // [key][head]: exp(score - running max)
  __shared__ float max_scratch[warps * G];
  __shared__ float sum_scratch[warps * G];
  __shared__ float sums[G * row_groups * D]; // [head][row group][element]

  const int64_t splits = shape.splits;
  const int group = static_cast<int>(shape.heads / shape.kv_heads);
  const auto span = decode_group_span_of(blockIdx.x, positions, shape, keys_per_split);
  const int64_t split = span.split, b = span.b, kv_head = span.kv_head;
  const int64_t first_head = span.first_head; // row of q and of the partials
  const int64_t begin = span.begin, end = span.end;

  for (int i = threadIdx.x; i < D * G; i += K) {
    const int element = i / G, h = i % G;
    q_shared[i] = h < group ? to_float(q[(first_head + h) * D + element]) : 0.0f;
  }
  __syncthreads();

  const T* keys = static_cast<const T*>(kv.keys) + b * kv.batch_stride + kv_head * kv.head_stride;
  const T* values =
    static_cast<const T*>(kv.values) + b * kv.batch_stride + kv_head * kv.head_stride;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  // The value sums: thread (r, c) sums columns [c VV, c VV + VV) over rows r, r + row_groups, ...
  const int r = threadIdx.x / per_row, c = threadIdx.x % per_row;

  // Every thread keeps the same running maximum and sum per head (from the same shared sums).
  float running_max[G], running_sum[G], acc[G][VV];
#pragma unroll
  for (int h = 0; h < G; ++h) {
    running_max[h] = -INFINITY;
    running_sum[h] = 0.0f;
#pragma unroll
    for (int i = 0; i < VV; ++i)
      acc[h][i] = 0.0f;
  }

  for (int64_t first = begin; first < end; first += K) {
    const int count = static_cast<int>(end - first < K ? end - first : K);

    // Scores: thread t reads key first + t once and scores it against every head.
    float p[G];
#pragma unroll
    for (int h = 0; h < G; ++h)
      p[h] = 0.0f;
    if (threadIdx.x < count) {
      const T* k = keys + (first + threadIdx.x) * kv.position_stride;
#pragma unroll
      for (int base = 0; base < key_loads; base += KU) {
        uint4 raw[KU];
#pragma unroll
        for (int u = 0; u < KU; ++u)
          raw[u] = vector16<T>::fetch(k + (base + u) * KV);
#pragma unroll
        for (int u = 0; u < KU; ++u)
#pragma unroll
          for (int i = 0; i < KV; ++i) {
            const float key = vector16<T>::element(raw[u], i);
            float qh[G];
            load_heads<G>(q_shared + ((base + u) * KV + i) * G, qh);
#pragma unroll
            for (int h = 0; h < G; ++h)
              p[h] += qh[h] * key;
          }
      }
#pragma unroll
      for (int h = 0; h < G; ++h)
        p[h] *= shape.scale;
    } else {
#pragma unroll
      for (int h = 0; h < G; ++h)
        p[h] = -INFINITY;
    }

    // The chunk's maximum per head; every thread folds it into the running maximum.
#pragma unroll
    for (int h = 0; h < G; ++h) {
      const float top = warp_max(p[h]);
      if (lane == 0)
        max_scratch[warp * G + h] = top;
    }
    __syncthreads();
    float factor[G];
#pragma unroll
    for (int h = 0; h < G; ++h) {
      float top = max_scratch[h];
#pragma unroll
      for (int w = 1; w < warps; ++w)
        top = fmaxf(top, max_scratch[w * G + h]);
      const float new_max = fmaxf(running_max[h], top); // finite: key `first` is valid
      // no valid key before this chunk: nothing to rescale (and no inf - inf)
      factor[h] = running_max[h] == -INFINITY ? 0.0f : expf(running_max[h] - new_max);
      running_max[h] = new_max;
      p[h] = p[h] == -INFINITY ? 0.0f : expf(p[h] - new_max);
    }
    store_heads<G>(p_shared + threadIdx.x * G, p);
#pragma unroll
    for (int h = 0; h < G; ++h) {
      const float total = warp_sum(p[h]);
      if (lane == 0)
        sum_scratch[warp * G + h] = total;
    }
    __syncthreads();
#pragma unroll
    for (int h = 0; h < G; ++h) {
      float total = 0.0f;
#pragma unroll
      for (int w = 0; w < warps; ++w)
        total += sum_scratch[w * G + h];
      running_sum[h] = running_sum[h] * factor[h] + total;
#pragma unroll
      for (int i = 0; i < VV; ++i)
        acc[h][i] *= factor[h];
    }

    // Weighted values: each value row is read once and added into every head's sums. Rows past
    // `count` load as zeros and have probability 0.
    const T* column = values + first * kv.position_stride + c * VV;
#pragma unroll
    for (int base = 0; base < rows; base += VU) {
      uint2 raw[VU];
#pragma unroll
      for (int u = 0; u < VU; ++u) {
        const int j = r + (base + u) * row_groups;
        raw[u] = j < count ? vector8<T>::fetch(column + j * kv.position_stride) : uint2{0, 0};
      }
#pragma unroll
      for (int u = 0; u < VU; ++u) {
        const int j = r + (base + u) * row_groups;
        float weight[G];
        load_heads<G>(p_shared + j * G, weight);
#pragma unroll
        for (int i = 0; i < VV; ++i) {
          const float v = vector8<T>::element(raw[u], i);
#pragma unroll
          for (int h = 0; h < G; ++h)
            acc[h][i] += weight[h] * v;
        }
      }
    }
    __syncthreads(); // p_shared and the scratch are the next chunk's
  }

  // The row groups' sums added per head; the partial rows as the merge kernel reads them.
#pragma unroll
  for (int h = 0; h < G; ++h)
#pragma unroll
    for (int i = 0; i < VV; ++i)
      sums[(h * row_groups + r) * D + c * VV + i] = acc[h][i];
  __syncthreads();
  for (int i = threadIdx.x; i < group * D; i += K) {
    const int h = i / D, element = i % D;
    float total = 0.0f;
#pragma unroll
    for (int g = 0; g < row_groups; ++g)
      total += sums[(h * row_groups + g) * D + element];
    partials[((first_head + h) * splits + split) * (D + 2) + element] = total;
  }
#pragma unroll
  for (int h = 0; h < G; ++h)
    if (h < group && threadIdx.x == h) {
      float* out = partials + ((first_head + h) * splits + split) * (D + 2);
      out[D] = running_max[h]; // -inf for a split past the sequence: the merge skips it
      out[D + 1] = running_sum[h];
    }
}

/// The grouped kernel for `group` query heads per kv head and head_dim `dim`, or nullptr where
/// no instance serves them (group above 8; dim other than 64, 128 or 256).
template <class T>
using decode_group_kernel = void (*)(const T*, decode_kv, const int64_t*, float*,
                                     decode_attention_shape, int64_t);

template <class T, int G>
decode_group_kernel<T> decode_group_kernel_for_dim(int64_t dim) {
  switch (dim) {
  case 64:
    return decode_attention_group_partial_kernel<T, G, 64>;
  case 128:
    return decode_attention_group_partial_kernel<T, G, 128>;
  case 256:
    return decode_attention_group_partial_kernel<T, G, 256>;
  default:
    return nullptr;
  }
}

template <class T>
decode_group_kernel<T> decode_group_kernel_for(int64_t group, int64_t dim) {
  if (group >= 1 && group <= 4)
    return decode_group_kernel_for_dim<T, 4>(dim);
  if (group > 4 && group <= 6) // Qwen2-1.5B's 6: a quarter fewer products than padded to 8
    return decode_group_kernel_for_dim<T, 6>(dim);
  if (group > 6 && group <= decode_max_group)
    return decode_group_kernel_for_dim<T, 8>(dim);
  return nullptr;
}

} // namespace kbrl::model::cuda
