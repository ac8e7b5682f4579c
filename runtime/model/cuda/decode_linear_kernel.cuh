// The linear layers of a one-token decode step as one GEMV kernel each (fused_kernels.hpp's
// decode_linear): out[n] = sum_k x[k] * w[n, k] (+ bias[n]), summed in float32 and rounded once
// to T, as cuBLAS's GEMM does (the order of the float32 sum differs). Its input x is the row
// itself (plain) or silu(gate[k]) * up[k] of a [gate | up] row, rounded exactly as
// swiglu_kernel.cuh rounds it (swiglu: the SwiGLU and the down projection in one kernel).
//
// Why not cuBLAS: at batch 1 its GEMV reaches about 1 TB/s on the 5-MB projections (q|k|v,
// o_proj: too few loads in flight) and splits the long down projection into a GEMM plus a reduce
// kernel; and every kernel boundary of a decode step costs a few microseconds. Here each block
// owns decode_linear_rows weight rows; its threads split the rows' 16-byte chunks among them,
// every thread issues all its rows' loads of a chunk before it uses any, and one block reduce
// sums the threads' parts. A block owns 4 rows, or 8 where decode_linear.cu's rows_per_block
// says (the SwiGLU input, short and tall weights); a thread's chunks are added in the same order
// either way.
// Measured on an H200 (bench/sampler_throughput/results/2026-11-28-decode-gemv): a version for
// 2-4 tokens was no faster than cuBLAS at 2 and 1.4x slower at 4, so one token only; folding the
// residual add + RMSNorm in (every block normalising the row itself) and loading a thread's next
// chunk ahead were both slower than this.
//
// decode_qkv_rope_kernel is the q|k|v projection with RoPE and the cache write in its epilogue.
//
// The norm folds (input rms_normed, add_to_out; decode_linear.hpp's norm_folds) give the norm
// kernels' bits (replayed_rms_scale), but are off by default: with PDL too, every block working
// out the row's scale after its wait made the gate|up GEMV (4,480 blocks) 40.7 us a call against
// about 24, the step 1.80 ms against 1.49 (H200, 2026-11-29,
// bench/sampler_throughput/results/2026-11-29-norm-folds).
//
// The kernels themselves; decode_linear.cu launches them. Kept apart so that a host emulation
// (test/cuda_emulation) can run the same code without a GPU.

#pragma once

#include "runtime/model/cuda/add_rms_norm_kernel.cuh"
#include "runtime/model/cuda/dependent_launch.cuh"
#include "runtime/model/cuda/device_math.cuh"
#include "runtime/model/cuda/fused_kernels.hpp"
#include "runtime/model/cuda/swiglu_kernel.cuh"

namespace kbrl::model::cuda {

/// Weight rows (output features) per block, where a launcher does not choose another count
/// (decode_linear.cu's rows_per_block takes 4 or 8).
inline constexpr int decode_linear_rows = 4;
/// Threads per block at most (a multiple of 32; fewer for a short row): the kernels' launch
/// bound. Instances with a higher bound (MaxThreads) are for comparisons
/// (bench/sampler_throughput/gemv_shapes.cu): 512 threads made the down projection slower.
inline constexpr int decode_linear_max_threads = 256;

/// An RMSNorm folded into a GEMV's input (decode_linear_input::rms_normed): the norm's weight
/// and epsilon; scale is worked out by the block once the input row is there.
template <class T>
struct folded_norm {
  const T* weight = nullptr;
  float eps = 0.0f;
  float scale = 0.0f;
};

/// Chunk `chunk` (16 bytes of T) of the input row as float32: x's own, silu(gate) * up of a
/// [gate | up] row of 2 * in_features elements, or x normalised by `norm`.
template <class T, decode_linear_input Input>
__device__ __forceinline__ void decode_linear_values(const T* x, int64_t in_features,
                                                     int64_t chunk, const folded_norm<T>& norm,
                                                     float* values) {
  using vec = vector16<T>;
  const int64_t at = chunk * vec::size;
  const auto a = vec::fetch(x + at);
  if constexpr (Input == decode_linear_input::rms_normed) {
    const auto w = vec::fetch(norm.weight + at);
#pragma unroll
    for (int e = 0; e < vec::size; ++e)
      values[e] = rms_normed_value<T>(vec::element(a, e), vec::element(w, e), norm.scale);
  } else if constexpr (Input == decode_linear_input::swiglu) {
    const auto b = vec::fetch(x + in_features + at);
#pragma unroll
    for (int e = 0; e < vec::size; ++e)
      values[e] = to_float(swiglu_value<T>(vec::element(a, e), vec::element(b, e)));
  } else {
#pragma unroll
    for (int e = 0; e < vec::size; ++e)
      values[e] = vec::element(a, e);
  }
}

/// A block's share of a one-token GEMV: rows[r] (r < Rows, each in_features long) against x
/// (decode_linear_values). Thread r < Rows returns row r's float32 sum, the others 0. Each
/// thread's first weight chunk is loaded before the wait for the kernel before
/// (dependent_launch.cuh), x only after it. For rms_normed input the block first works out the
/// norm's scale from the whole row (replayed_rms_scale). Every thread of the block calls this.
template <class T, decode_linear_input Input, int Rows = decode_linear_rows,
          int MaxThreads = decode_linear_max_threads>
__device__ __forceinline__ float decode_linear_block_sums(const T* __restrict__ x,
                                                          const T* const* rows,
                                                          int64_t in_features,
                                                          folded_norm<T> norm = {}) {
  using vec = vector16<T>;
  __shared__ float partial[MaxThreads / 32][Rows];
  const int64_t chunks = in_features / vec::size;
  // The weights do not depend on the kernels before this one: the thread's first chunk (for
  // rows of up to 2,048 bf16 elements its only one) is loaded while the kernel before may still
  // be running; x only after that kernel has completed.
  const int64_t first = threadIdx.x;
  typename vec::raw first_weights[Rows];
  if (first < chunks)
#pragma unroll
    for (int r = 0; r < Rows; ++r)
      first_weights[r] = vec::fetch(rows[r] + first * vec::size);
  wait_for_previous_kernel();
  if constexpr (Input == decode_linear_input::rms_normed) {
    __shared__ float norm_scratch[32];
    norm.scale = replayed_rms_scale(x, in_features, norm.eps, norm_scratch);
  }

  float acc[Rows] = {};
  const auto accumulate = [&](int64_t c, const typename vec::raw* weights) {
    float input[vec::size];
    decode_linear_values<T, Input>(x, in_features, c, norm, input);
#pragma unroll
    for (int r = 0; r < Rows; ++r)
#pragma unroll
      for (int e = 0; e < vec::size; ++e)
        acc[r] = fmaf(vec::element(weights[r], e), input[e], acc[r]);
  };
  if (first < chunks)
    accumulate(first, first_weights);
  for (int64_t c = first + blockDim.x; c < chunks; c += blockDim.x) {
    typename vec::raw weights[Rows];
#pragma unroll
    for (int r = 0; r < Rows; ++r)
      weights[r] = vec::fetch(rows[r] + c * vec::size);
    accumulate(c, weights);
  }

  // Each warp's sums, then the warps' sums in a fixed order: the result does not depend on
  // scheduling.
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int r = 0; r < Rows; ++r) {
    float v = acc[r];
    for (int offset = 16; offset > 0; offset >>= 1)
      v += __shfl_xor_sync(0xffffffffu, v, offset);
    if (lane == 0)
      partial[warp][r] = v;
  }
  __syncthreads();
  float sum = 0.0f;
  if (threadIdx.x < Rows)
    for (int k = 0; k < static_cast<int>(blockDim.x >> 5); ++k)
      sum += partial[k][threadIdx.x];
  return sum;
}

/// One block per Rows rows of w [out_features, in_features]; x the input row
/// (decode_linear_values; norm's weight and eps for rms_normed input), out [out_features].
/// in_features a multiple of 16 / sizeof(T), x, w (and norm.weight) 16-byte aligned (the
/// launcher checks). blockDim.x a multiple of 32, at most MaxThreads.
/// add_to_out: out[n] becomes out[n] + the result, rounded as add_rms_norm_kernel rounds its
/// residual add (the residual add of a decode step, done where the delta is made).
template <class T, decode_linear_input Input, int Rows = decode_linear_rows,
          int MaxThreads = decode_linear_max_threads>
__global__ void __launch_bounds__(MaxThreads)
decode_linear_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
                     T* __restrict__ out, int64_t out_features, int64_t in_features,
                     folded_norm<T> norm, bool add_to_out) {
  let_next_kernel_start();
  const int64_t first_row = static_cast<int64_t>(blockIdx.x) * Rows;
  // A block's last rows may lie past out_features: they read the last row again (no branch in
  // the loop) and are not written.
  const T* rows[Rows];
#pragma unroll
  for (int r = 0; r < Rows; ++r) {
    const int64_t row = first_row + r < out_features ? first_row + r : out_features - 1;
    rows[r] = w + row * in_features;
  }
  float sum = decode_linear_block_sums<T, Input, Rows, MaxThreads>(x, rows, in_features, norm);
  const int r = threadIdx.x;
  if (r < Rows && first_row + r < out_features) {
    if (bias != nullptr)
      sum += to_float(bias[first_row + r]);
    T* dst = out + first_row + r;
    // the delta as stored in T, then add_rms_norm_kernel's add: round_to<T>(residual + delta)
    *dst = add_to_out ? from_float<T>(__fadd_rn(to_float(*dst), round_to<T>(sum)))
                      : from_float<T>(sum);
  }
}

/// The row of a fused q|k|v weight that row r (< decode_linear_rows) of block `block` of
/// decode_qkv_rope_kernel computes: the block takes two rotating pairs, pair p being element
/// j = p mod half of head p / half, and its rows j and j + half of that head (half =
/// head_dim / 2); even r the pair's low row, odd r its high one.
/// 32-bit arithmetic (the launcher checks that the rows fit): every thread works this out for
/// its rows before it can issue its first weight load.
__device__ __forceinline__ int64_t decode_qkv_rope_row(unsigned block, int r, unsigned head_dim) {
  const unsigned half = head_dim / 2;
  const unsigned pair = block * (decode_linear_rows / 2) + static_cast<unsigned>(r) / 2;
  const unsigned head = pair / half, j = pair - head * half;
  return static_cast<int64_t>(head * head_dim + j + static_cast<unsigned>(r & 1) * half);
}

/// decode_linear_kernel over a fused q|k|v weight for one token of one sequence, with
/// rope_qkv_kernel's work (without q/k norm) in its epilogue: q rotated into q_out [heads,
/// head_dim], k rotated and v as it is into the cache at position kv.positions[0] (not written
/// outside [0, kv.position_limit)). Rows are taken in rotating pairs (decode_qkv_rope_row), so
/// each pair's two sums meet in one warp; every value is rounded as the two kernels round it
/// (the projection to T, then rope_qkv's steps): the same bits, one kernel and one launch fewer
/// per layer. s.batch = s.seq = 1; head_dim a multiple of 4; cos and sin [head_dim] as
/// rope_qkv_kernel reads them. Input plain or rms_normed (x the residual row, `norm` the
/// layer's input norm: the norm kernel before it folded in too).
template <class T, decode_linear_input Input>
__global__ void __launch_bounds__(decode_linear_max_threads)
decode_qkv_rope_kernel(const T* __restrict__ x, const T* __restrict__ w,
                       const T* __restrict__ bias, const T* __restrict__ cos,
                       const T* __restrict__ sin, T* __restrict__ q_out, kv_destination kv,
                       qkv_shape s, int64_t in_features, folded_norm<T> norm) {
  constexpr int Rows = decode_linear_rows;
  let_next_kernel_start();
  const unsigned block = blockIdx.x, head_dim = static_cast<unsigned>(s.head_dim);
  const T* rows[Rows];
#pragma unroll
  for (int r = 0; r < Rows; ++r)
    rows[r] = w + decode_qkv_rope_row(block, r, head_dim) * in_features;
  float sum = decode_linear_block_sums<T, Input>(x, rows, in_features, norm);
  const int r = threadIdx.x;
  if (r < Rows && bias != nullptr)
    sum += to_float(bias[decode_qkv_rope_row(block, r, head_dim)]);
  const float value = to_float(from_float<T>(sum)); // the projection's output, as stored in T
  const float partner = __shfl_xor_sync(0xffffffffu, value, 1);
  if (r >= Rows || (r & 1) != 0)
    return;
  const float lo = value, hi = partner;
  const int64_t half = s.head_dim / 2;
  const int64_t low_row = decode_qkv_rope_row(block, r, head_dim);
  const int64_t head = low_row / s.head_dim, i = low_row - head * s.head_dim;
  const bool is_q = head < s.heads, is_k = !is_q && head < s.heads + s.kv_heads;
  T* dst;
  if (is_q) {
    dst = q_out + head * s.head_dim;
  } else {
    const int64_t p = kv.positions[0];
    if (p < 0 || p >= kv.position_limit)
      return;
    const int64_t kv_head = is_k ? head - s.heads : head - s.heads - s.kv_heads;
    dst = static_cast<T*>(is_k ? kv.keys : kv.values) + kv_head * kv.head_stride
          + p * kv.position_stride;
    if (!is_k) { // values: as they are
      dst[i] = from_float<T>(lo);
      dst[i + half] = from_float<T>(hi);
      return;
    }
  }
  // rope_qkv_kernel's arithmetic, step for step
  const float out_lo = __fmaf_rn(hi, to_float(sin[i]), round_to<T>(__fmul_rn(lo, to_float(cos[i]))));
  const float out_hi =
    __fmaf_rn(lo, to_float(sin[i + half]), round_to<T>(__fmul_rn(hi, to_float(cos[i + half]))));
  dst[i] = from_float<T>(out_lo);
  dst[i + half] = from_float<T>(out_hi);
}

} // namespace kbrl::model::cuda
