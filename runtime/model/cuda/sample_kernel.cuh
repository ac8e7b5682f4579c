// Sampling a token per row of logits in two kernels, the exponential race without a noise
// tensor. sampling.hpp states the rule: token = argmax(logits / T - log E) over the vocabulary
// with E ~ Exponential(1) per entry (argmax(logits) for a greedy row), and its log-probability
// logits[token] / T - logsumexp(logits / T).
//
// The libtorch composition this replaces (sampling.cpp, kept for the CPU and for top-k/top-p)
// launched one exponential_ kernel per row with the row's generator, then log_softmax, log,
// subtraction and argmax over [rows, vocab] float32 copies: at batch 128 with a 152k vocabulary,
// 128 launches of 3 us of device time each, plus their host-side cost, every decode step.
//
// Here row r's noise for vocabulary entry v is word v % 4 of Philox4x32-10 at counter (v / 4,
// offset_r) under key seed_r, where (seed_r, offset_r) is reserved from the row's own generator
// for this call: a row's token depends on its logits and its generator only, never on the batch.
// E = -log1p(-w) with w = (word + 1/2) 2^-32, never 0 (a zero E would win whatever its logit).
//
// Kernel 1: block (r, s) takes entries [s * sample_block_entries, ...) of row r and leaves the
// slice's maximum, sum of exp(x - maximum) and race winner (score, index; the lower index among
// equal scores). Kernel 2: one thread per row merges the row's slices in order (the same slices
// and order whatever the batch, so the log-probability does not depend on it either) and writes
// [2, rows] float32: the token (exact below 2^24) and its log-probability.

#pragma once

#include "runtime/model/cuda/device_math.cuh"
#include "runtime/model/cuda/fused_kernels.hpp"
#include "runtime/model/cuda/philox.cuh"

namespace kbrl::model::cuda {

constexpr int sample_threads = 256;
/// Vocabulary entries per block of the first kernel (16 a thread).
constexpr int sample_block_entries = 16 * sample_threads;
static_assert(sample_block_entries == sample_slice_entries, "fused_kernels.hpp counts on it");

/// A slice's running state; merged with `merge` (associative up to float rounding).
struct sample_state {
  float max = -INFINITY; ///< of x = logit / T
  float sum = 0.0f;      ///< of exp(x - max)
  float best = -INFINITY; ///< the race's best score
  int index = -1;         ///< its entry, -1: none yet
};

__device__ __forceinline__ void add_entry(sample_state& st, float x, float score, int v) {
  if (x > st.max) { // also the first finite x (max -inf): sum becomes exp(0)
    st.sum = st.sum * expf(st.max - x) + 1.0f;
    st.max = x;
  } else if (x > -INFINITY) {
    st.sum += expf(x - st.max);
  }
  // NaN scores never win; -inf ones only while nothing else has (index -1)
  if (score > st.best || (st.index < 0 && !(score != score)) || (score == st.best && v < st.index)) {
    st.best = score;
    st.index = v;
  }
}

__device__ __forceinline__ sample_state merge(const sample_state& a, const sample_state& b) {
  sample_state out;
  out.max = fmaxf(a.max, b.max);
  out.sum = out.max == -INFINITY
              ? 0.0f
              : (a.sum == 0.0f ? 0.0f : a.sum * expf(a.max - out.max))
                  + (b.sum == 0.0f ? 0.0f : b.sum * expf(b.max - out.max));
  const bool take_b = b.index >= 0
                      && (a.index < 0 || b.best > a.best || (b.best == a.best && b.index < a.index));
  out.best = take_b ? b.best : a.best;
  out.index = take_b ? b.index : a.index;
  return out;
}

/// The noise score term -log E for entry v of a stream (word: its Philox word).
__device__ __forceinline__ float race_noise(uint32_t word) {
  const float w = (static_cast<float>(word) + 0.5f) * 2.3283064365386963e-10f; // 2^-32
  const float e = -log1pf(-w); // E ~ Exponential(1): -log(1 - w), accurate for small w
  return -logf(e);
}

/// Kernel 1. Grid: rows * slices blocks (block r * slices + s), sample_threads threads.
/// partials: [rows * slices, 4] float32 (max, sum, best, index).
template <class T>
__global__ void __launch_bounds__(sample_threads)
  sample_slice_kernel(const T* __restrict__ logits, int64_t row_stride, int64_t vocab,
                      const sample_row* __restrict__ rows, float* __restrict__ partials,
                      int64_t slices) {
  __shared__ float scratch[4][sample_threads / 32];
  const int64_t r = blockIdx.x / slices, slice = blockIdx.x % slices;
  const sample_row row = rows[r];
  const T* x = logits + r * row_stride;
  const int64_t first = slice * sample_block_entries;
  const int64_t last = first + sample_block_entries < vocab ? first + sample_block_entries : vocab;
  sample_state st;
  // Four consecutive entries a step (one Philox call), from first + 4 t.
  for (int64_t v0 = first + 4 * threadIdx.x; v0 < last; v0 += 4 * sample_threads) {
    philox_words words{};
    if (!row.greedy)
      words = philox_group(row.seed, row.offset, static_cast<uint64_t>(v0 / 4));
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t v = v0 + i;
      if (v < last) {
        const float xv = to_float(x[v]) / row.temperature;
        add_entry(st, xv, row.greedy ? xv : xv + race_noise(words.w[i]), static_cast<int>(v));
      }
    }
  }
  // The block's state: warps by shuffles, then the warps' states through shared memory.
  for (int offset = 16; offset > 0; offset >>= 1) {
    sample_state other;
    other.max = __shfl_xor_sync(0xffffffffu, st.max, offset);
    other.sum = __shfl_xor_sync(0xffffffffu, st.sum, offset);
    other.best = __shfl_xor_sync(0xffffffffu, st.best, offset);
    other.index = __shfl_xor_sync(0xffffffffu, st.index, offset);
    st = merge(st, other);
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) {
    scratch[0][warp] = st.max;
    scratch[1][warp] = st.sum;
    scratch[2][warp] = st.best;
    scratch[3][warp] = static_cast<float>(st.index); // exact: vocab < 2^24
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    sample_state all;
    for (int w = 0; w < sample_threads / 32; ++w) {
      sample_state other;
      other.max = scratch[0][w];
      other.sum = scratch[1][w];
      other.best = scratch[2][w];
      other.index = static_cast<int>(scratch[3][w]);
      all = merge(all, other);
    }
    float* out = partials + blockIdx.x * 4;
    out[0] = all.max;
    out[1] = all.sum;
    out[2] = all.best;
    out[3] = static_cast<float>(all.index);
  }
}

/// Kernel 2: thread r merges row r's slices in order. result: [2, rows] (token, log-probability);
/// a row with no finite logit gets token 0 and a NaN log-probability.
template <class T>
__global__ void sample_merge_kernel(const T* __restrict__ logits, int64_t row_stride,
                                    const sample_row* __restrict__ rows,
                                    const float* __restrict__ partials, int64_t slices,
                                    int64_t count, float* __restrict__ result) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= count)
    return;
  sample_state all;
  for (int64_t s = 0; s < slices; ++s) {
    const float* p = partials + (r * slices + s) * 4;
    sample_state other;
    other.max = p[0];
    other.sum = p[1];
    other.best = p[2];
    other.index = static_cast<int>(p[3]);
    all = merge(all, other);
  }
  const int token = all.index < 0 ? 0 : all.index;
  const float x = to_float(logits[r * row_stride + token]) / rows[r].temperature;
  result[r] = static_cast<float>(token);
  result[count + r] = all.sum > 0.0f ? x - (all.max + logf(all.sum)) : NAN;
}

} // namespace kbrl::model::cuda
