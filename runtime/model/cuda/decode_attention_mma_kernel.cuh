// Decode attention for many sequences on tensor cores: one block per (sequence, kv head, split
// of the keys) serves every query head of the kv head's group, as the grouped kernel
// (decode_attention_group_kernel.cuh) does, but its products run as mma.sync m16n8k16 with the
// keys as the M dimension and the group's heads (at most 8, padded with zero queries) as N:
//   scores^T [16 keys x 8 heads]  = K [16 keys x D] . Q^T [D x 8 heads]
//   out^T    [16 dims x 8 heads] += V^T [16 dims x 16 keys] . P^T [16 keys x 8 heads]
// The grouped kernel multiplied every key against 8 padded heads on CUDA cores, and that
// arithmetic kept it no faster than cuDNN's SDPA at batch 128 (BENCHMARKS.md). SDPA itself
// reads the whole key bucket behind a mask; this kernel reads each sequence's own positions.
//
// The cache is read straight into registers, 16 bytes a load, in orders chosen so that no
// shuffle or shared memory stands between a load and its instruction:
// - Scores: the sum over the head dimension may take the dimensions in any order, so lane 4 g +
//   t loads elements [32 c + 8 t, 32 c + 8 t + 8) of keys g and g + 8 and of its query head g,
//   and those eight elements serve as fragment columns {2t, 2t+1, 2t+8, 2t+9} of two
//   consecutive k16 steps (a row's 32-element chunk c is two steps).
// - Weighted values: the output's dimensions may be permuted too. Lane 4 g + t loads D / 8
//   consecutive elements (from g D / 8) of value rows 2t, 2t+1, 2t+8 and 2t+9; output tile i
//   takes element i of each as its row g and element D / 16 + i as its row g + 8. A fragment
//   register pairs two keys' elements, packed from two loads.
// - Probabilities: the score fragment holds [key][head]; the value product wants [head][key]
//   as its B operand: one movmatrix transposes each 8 x 8 half.
// The softmax is the flash-decoding one, float32, in base 2 (scores times scale / ln 2); each
// warp keeps its own running maximum and sum and its 16 x 8 output tiles over the keys it
// takes (16 at a time, warps interleaved), and the block merges its warps at the end into the
// partials decode_attention_merge_kernel combines. The probabilities are rounded to T for the
// value product (as SDPA's kernels do) and the sum counts the rounded values, so the weights
// that multiply the values sum to one.

#pragma once

#include "runtime/model/cuda/decode_attention_kernel.cuh"
#include "runtime/model/cuda/warp_mma.cuh"

namespace kbrl::model::cuda {

constexpr int decode_mma_warps = 4;
/// Keys a warp takes at a time (the mma's M); a block takes decode_mma_warps times as many.
constexpr int decode_mma_keys = 16;
/// The most query heads one kv head may serve (the mma's N; fused_kernels.hpp's constant).
constexpr int decode_mma_max_group = static_cast<int>(decode_mma_max_group_size);

/// Partials as decode_attention_partial_kernel leaves them ([batch * heads * splits, D + 2]).
/// Block index: (b * kv_heads + kv_head) * splits + split, blockDim.x == 32 * decode_mma_warps;
/// split s covers keys [s * keys_per_split, (s + 1) * keys_per_split). shape.heads / kv_heads
/// <= 8 and shape.head_dim == D (64 or 128); T is __half or __nv_bfloat16.
template <class T, int D>
__global__ void __launch_bounds__(32 * decode_mma_warps, 4)
  decode_attention_mma_partial_kernel(const T* __restrict__ q, decode_kv kv,
                                      const int64_t* __restrict__ positions,
                                      float* __restrict__ partials, decode_attention_shape shape,
                                      int64_t keys_per_split) {
  // Activations only after the kernel before has completed (dependent_launch.cuh).
  let_next_kernel_start();
  wait_for_previous_kernel();
  constexpr int W = decode_mma_warps;
  constexpr int chunks = D / 32;     // a key row's 32-element chunks (two k16 steps each)
  constexpr int value_loads = D / 64; // 16-byte loads of a lane's D / 8 elements of a value row
  constexpr int tiles = D / 16;       // output tiles of 16 dimensions (M of the value product)
  static_assert(D == 64 || D == 128, "instances for head_dim 64 and 128");
  __shared__ float out_shared[W][decode_mma_max_group][D];
  __shared__ float max_shared[W][decode_mma_max_group];
  __shared__ float sum_shared[W][decode_mma_max_group];

  const int64_t splits = shape.splits;
  const int group = static_cast<int>(shape.heads / shape.kv_heads);
  const auto span = decode_group_span_of(blockIdx.x, positions, shape, keys_per_split);
  const int64_t split = span.split, b = span.b, kv_head = span.kv_head;
  const int64_t first_head = span.first_head; // row of q and of the partials
  const int64_t begin = span.begin, end = span.end;
  constexpr int block_keys = W * decode_mma_keys;
  // The same number of rounds for every warp (a warp past `end` loads nothing and scores -inf)
  const int rounds = end > begin ? static_cast<int>((end - begin + block_keys - 1) / block_keys)
                                 : 0;

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;

  // Query head g's elements [32 c + 8 t, 32 c + 8 t + 8): the B operand of the score product.
  uint4 query[chunks];
#pragma unroll
  for (int c = 0; c < chunks; ++c)
    query[c] = g < group ? vector16<T>::fetch(q + (first_head + g) * D + 32 * c + 8 * t)
                         : uint4{0, 0, 0, 0};

  const T* keys = static_cast<const T*>(kv.keys) + b * kv.batch_stride + kv_head * kv.head_stride;
  const T* values =
    static_cast<const T*>(kv.values) + b * kv.batch_stride + kv_head * kv.head_stride;
  const float scale = shape.scale * 1.4426950408889634f; // scores in base 2

  // This lane's heads are 2t and 2t + 1 (the fragments' columns).
  float running_max[2] = {-INFINITY, -INFINITY}, running_sum[2] = {0.0f, 0.0f};
  float out[tiles][4];
#pragma unroll
  for (int i = 0; i < tiles; ++i)
    out[i][0] = out[i][1] = out[i][2] = out[i][3] = 0.0f;

  for (int round = 0; round < rounds; ++round) {
    const int64_t first = begin + (static_cast<int64_t>(round) * W + warp) * decode_mma_keys;
    // Every load of the tile first: key rows g and g + 8, value rows 2t, 2t+1, 2t+8, 2t+9.
    const int64_t key_a = first + g, key_b = first + g + 8;
    uint4 ka[chunks], kb[chunks];
#pragma unroll
    for (int c = 0; c < chunks; ++c) {
      ka[c] = key_a < end ? vector16<T>::fetch(keys + key_a * kv.position_stride + 32 * c + 8 * t)
                          : uint4{0, 0, 0, 0};
      kb[c] = key_b < end ? vector16<T>::fetch(keys + key_b * kv.position_stride + 32 * c + 8 * t)
                          : uint4{0, 0, 0, 0};
    }
    uint4 vrow[4][value_loads];
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int64_t key = first + 2 * t + (r & 1) + (r >> 1) * 8;
#pragma unroll
      for (int u = 0; u < value_loads; ++u)
        vrow[r][u] = key < end ? vector16<T>::fetch(values + key * kv.position_stride
                                                    + g * (D / 8) + 8 * u)
                               : uint4{0, 0, 0, 0}; // zeros: a stale row could hold inf
    }

    // Scores [key g, g + 8][head 2t, 2t + 1].
    float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int c = 0; c < chunks; ++c)
#pragma unroll
      for (int step = 0; step < 2; ++step) {
        const uint32_t a[4] = {word_of(ka[c], 2 * step), word_of(kb[c], 2 * step),
                               word_of(ka[c], 2 * step + 1), word_of(kb[c], 2 * step + 1)};
        const uint32_t bq[2] = {word_of(query[c], 2 * step), word_of(query[c], 2 * step + 1)};
        mma_16816<T>(s, a, bq);
      }
    s[0] = key_a < end ? s[0] * scale : -INFINITY;
    s[1] = key_a < end ? s[1] * scale : -INFINITY;
    s[2] = key_b < end ? s[2] * scale : -INFINITY;
    s[3] = key_b < end ? s[3] * scale : -INFINITY;

    // The tile's maximum per head (over the lanes of the same t), the running softmax.
    float top[2] = {fmaxf(s[0], s[2]), fmaxf(s[1], s[3])};
#pragma unroll
    for (int offset = 4; offset < 32; offset <<= 1) {
      top[0] = fmaxf(top[0], __shfl_xor_sync(0xffffffffu, top[0], offset));
      top[1] = fmaxf(top[1], __shfl_xor_sync(0xffffffffu, top[1], offset));
    }
    float p[4], factor[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float new_max = fmaxf(running_max[h], top[h]);
      // -inf: no key seen yet (nothing to rescale, no inf - inf)
      factor[h] = new_max == -INFINITY ? 1.0f : exp2f(running_max[h] - new_max);
      p[h] = new_max == -INFINITY ? 0.0f : round_to<T>(exp2f(s[h] - new_max));
      p[h + 2] = new_max == -INFINITY ? 0.0f : round_to<T>(exp2f(s[h + 2] - new_max));
      running_max[h] = new_max;
      running_sum[h] = running_sum[h] * factor[h] + p[h] + p[h + 2];
    }
#pragma unroll
    for (int i = 0; i < tiles; ++i) {
      out[i][0] *= factor[0];
      out[i][1] *= factor[1];
      out[i][2] *= factor[0];
      out[i][3] *= factor[1];
    }

    // P^T as the B operand: [key 2t, 2t+1][head g] and [key 2t+8, 2t+9][head g].
    const uint32_t bp[2] = {transpose_8x8(pack_rounded<T>(p[0], p[1])),
                            transpose_8x8(pack_rounded<T>(p[2], p[3]))};
#pragma unroll
    for (int i = 0; i < tiles; ++i) {
      // Row g of tile i is element i of this lane's slice, row g + 8 element tiles + i.
      const int lo = i, hi = tiles + i;
      const uint32_t a[4] = {
        pack_halves(element_bits(vrow[0][lo / 8], lo % 8), element_bits(vrow[1][lo / 8], lo % 8)),
        pack_halves(element_bits(vrow[0][hi / 8], hi % 8), element_bits(vrow[1][hi / 8], hi % 8)),
        pack_halves(element_bits(vrow[2][lo / 8], lo % 8), element_bits(vrow[3][lo / 8], lo % 8)),
        pack_halves(element_bits(vrow[2][hi / 8], hi % 8), element_bits(vrow[3][hi / 8], hi % 8))};
      mma_16816<T>(out[i], a, bp);
    }
  }

  // The warp's sums over its lanes of the same t; then the block's warps merged per head.
#pragma unroll
  for (int offset = 4; offset < 32; offset <<= 1) {
    running_sum[0] += __shfl_xor_sync(0xffffffffu, running_sum[0], offset);
    running_sum[1] += __shfl_xor_sync(0xffffffffu, running_sum[1], offset);
  }
  if (g == 0)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      max_shared[warp][2 * t + h] = running_max[h];
      sum_shared[warp][2 * t + h] = running_sum[h];
    }
#pragma unroll
  for (int i = 0; i < tiles; ++i) {
    const int lo = g * (D / 8) + i, hi = g * (D / 8) + tiles + i;
    out_shared[warp][2 * t][lo] = out[i][0];
    out_shared[warp][2 * t + 1][lo] = out[i][1];
    out_shared[warp][2 * t][hi] = out[i][2];
    out_shared[warp][2 * t + 1][hi] = out[i][3];
  }
  __syncthreads();
  for (int i = threadIdx.x; i < group * (D + 2); i += 32 * W) {
    const int h = i / (D + 2), element = i % (D + 2);
    float top = -INFINITY;
#pragma unroll
    for (int w = 0; w < W; ++w)
      top = fmaxf(top, max_shared[w][h]);
    float total = 0.0f;
#pragma unroll
    for (int w = 0; w < W; ++w) {
      // a warp that saw no key has maximum -inf and sums 0: factor 0 (1 when no warp saw one)
      const float f = top == -INFINITY ? 1.0f : exp2f(max_shared[w][h] - top);
      total += (element < D ? out_shared[w][h][element] : sum_shared[w][h]) * f;
    }
    float* row = partials + ((first_head + h) * splits + split) * (D + 2);
    // the merge kernel's maximum is in natural units: exp(m ln 2 - top ln 2) = 2^(m - top)
    row[element] = element == D ? (top == -INFINITY ? -INFINITY : top * 0.6931471805599453f)
                                : total;
  }
}

/// The MMA kernel for head_dim `dim`, or nullptr where no instance serves it (not 64 or 128).
template <class T>
using decode_mma_kernel = void (*)(const T*, decode_kv, const int64_t*, float*,
                                   decode_attention_shape, int64_t);

template <class T>
decode_mma_kernel<T> decode_mma_kernel_for(int64_t dim) {
  switch (dim) {
  case 64:
    return decode_attention_mma_partial_kernel<T, 64>;
  case 128:
    return decode_attention_mma_partial_kernel<T, 128>;
  default:
    return nullptr;
  }
}

} // namespace kbrl::model::cuda
