#pragma once
// Launchers of the fused CUDA kernels of the inference path (fused_ops.hpp takes at::Tensor and
// calls these). Plain pointers, sizes and a stream: this header and the .cu files behind it know
// nothing of libtorch, so that nvcc compiles them alone.
//
// Every kernel reproduces the libtorch composition it replaces operation by operation: each
// intermediate result that libtorch rounds to the run dtype (bf16, fp16) is rounded here at the
// same point, products and sums are formed with __fmul_rn / __fadd_rn (no contraction into an
// FMA, which libtorch's separate kernels cannot do), and RMSNorm accumulates in float32. So the
// results equal libtorch's bit for bit except where a float32 sum is reduced in another order
// (the RMSNorm mean of squares).
//
// All tensors are contiguous unless a stride says otherwise; strides and sizes count elements.
// Each launcher returns the launch's cudaError_t (cudaSuccess: launched; errors of the kernel
// itself surface at the next synchronisation, as for any CUDA kernel).

#include <cuda_runtime_api.h>

#include <cstdint>

namespace kbrl::model::cuda {

/// The element types the kernels are compiled for.
enum class element_type { f32, f16, bf16 };

/// residual = x + delta (delta null: residual = x, and nothing is written to residual_out),
/// normed = weight * to_T(float(residual) * rsqrt(mean(float(residual)^2) + eps)), per row.
///   x, delta, residual_out  [rows, dim]; residual_out may be x itself (in place)
///   weight                  [dim]
///   normed_out              [rows, dim], must not overlap the others
cudaError_t add_rms_norm(element_type type, const void* x, const void* delta, void* residual_out,
                         void* normed_out, const void* weight, int64_t rows, int64_t dim,
                         float eps, cudaStream_t stream);

/// out = silu(gate) * up over rows of gate_up = [gate | up] ([rows, 2 * width]); out
/// [rows, width]. silu computed in float32 as x / (1 + exp(-x)) and rounded to T, then the
/// product rounded to T (at::silu(gate) * up).
cudaError_t swiglu(element_type type, const void* gate_up, void* out, int64_t rows, int64_t width,
                   cudaStream_t stream);

/// Where rope_qkv() writes keys and values: for token (b, s) of the batch and key/value head h,
/// element i lies at base + b * batch_stride + h * head_stride + p * position_stride + i, with
/// p = positions[b * seq + s] when `positions` is given (a kv cache: tokens with p outside
/// [0, position_limit) are not written) and p = s otherwise (fresh [batch, kv_heads, seq, dim]).
struct kv_destination {
  void* keys = nullptr;
  void* values = nullptr;
  int64_t batch_stride = 0;
  int64_t head_stride = 0;
  int64_t position_stride = 0;
  const int64_t* positions = nullptr; ///< [batch * seq], or null
  int64_t position_limit = 0;
};

/// The shapes of rope_qkv().
struct qkv_shape {
  int64_t batch = 0, seq = 0;
  int64_t heads = 0, kv_heads = 0, head_dim = 0; ///< head_dim even, at most 2048
  int64_t row_stride = 0; ///< elements between tokens of qkv, >= (heads + 2 kv_heads) head_dim
};

/// From the fused projection qkv ([batch * seq tokens, row_stride]; per token q heads, then k
/// heads, then v heads, head_dim each): optionally RMSNorm per q and k head (q_norm / k_norm
/// weights [head_dim], null: none), then RoPE on q and k in the rotate_half layout,
///   out[i]        = x[i] * cos[i] - x[i + half] * sin[i]
///   out[i + half] = x[i + half] * cos[i + half] + x[i] * sin[i + half]
/// (each product and the sum rounded to T, as apply_rotary's tensor ops do), with cos/sin
/// [batch * seq, head_dim] in T (make_rotary_embedding's). q goes to q_out [batch, heads, seq,
/// head_dim] (contiguous); k (rotated) and v (as is) go to `kv`.
cudaError_t rope_qkv(element_type type, const void* qkv, const void* cos, const void* sin,
                     const void* q_norm, const void* k_norm, float eps, void* q_out,
                     const kv_destination& kv, const qkv_shape& shape, cudaStream_t stream);

/// The kv cache decode_attention() reads: element i of cached position p of key/value head h of
/// sequence b lies at base + b * batch_stride + h * head_stride + p * position_stride + i.
struct decode_kv {
  const void* keys = nullptr;
  const void* values = nullptr;
  int64_t batch_stride = 0;
  int64_t head_stride = 0;
  int64_t position_stride = 0;
};

/// The shapes of decode_attention().
struct decode_attention_shape {
  int64_t batch = 0, heads = 0, kv_heads = 0;
  int64_t head_dim = 0; ///< a multiple of 16 / sizeof(T), at most 256
  int64_t key_len = 0;  ///< cached positions that may be read
  int64_t splits = 0;   ///< decode_attention_splits(key_len)
  float scale = 0;      ///< the scores' factor, 1 / sqrt(head_dim) for the usual attention
};

/// How many partial results decode_attention() makes per (sequence, head) for a cache of
/// `key_len` positions: its workspace holds batch * heads * splits * (head_dim + 2) floats.
int64_t decode_attention_splits(int64_t key_len);

/// Attention of one query per sequence over its cache: for q [batch, heads, head_dim]
/// (contiguous), query head h reads key/value head h / (heads / kv_heads) at cached positions
/// [0, positions[b]] (clamped to [0, key_len)), softmax(q k^T * scale) v in float32, written
/// to out [batch, heads, head_dim] in T. `partials` is the float32 workspace (see
/// decode_attention_splits). cudaErrorInvalidValue when head_dim or the cache's alignment (16
/// bytes for every cached row) does not suit the kernels.
cudaError_t decode_attention(element_type type, const void* q, const decode_kv& kv,
                             const int64_t* positions, float* partials, void* out,
                             const decode_attention_shape& shape, cudaStream_t stream);

/// What decode_linear() multiplies by its weight.
enum class decode_linear_input {
  plain,  ///< x itself
  swiglu, ///< x is [gate | up] (2 in_features): silu(gate) * up, rounded as swiglu() rounds it
  /// x is a residual row, normalised first as add_rms_norm() without delta normalises it
  /// (decode_linear_folds: the norm's weight and epsilon), with the same bits
  rms_normed,
};

/// What decode_linear() and decode_qkv_rope() do around the GEMV when a decode step's residual
/// adds and norms are folded into its projections (transformer.cpp, decode_linear.hpp).
struct decode_linear_folds {
  const void* norm_weight = nullptr; ///< input rms_normed: RMSNorm's weight [in_features]
  float eps = 0.0f;                  ///< input rms_normed: its epsilon
  /// out += the result, in place, rounded as add_rms_norm() rounds its residual add
  /// (decode_linear() only)
  bool add_to_out = false;
};

/// out = input weight^T + bias (bias null: none) for one token, as at::linear computes it:
/// float32 sums rounded once to T (in another order than cuBLAS's). x the token's row, weight
/// [out_features, in_features] contiguous, out [out_features]. decode_linear_kernel.cuh says
/// why. cudaErrorInvalidValue for float32, in_features not a multiple of 16 / sizeof(T), or x or
/// weight not 16-byte aligned: the caller then runs cuBLAS.
cudaError_t decode_linear(element_type type, decode_linear_input input, const void* x,
                          const void* weight, const void* bias, void* out, int64_t in_features,
                          int64_t out_features, cudaStream_t stream,
                          const decode_linear_folds& folds = {});

/// decode_linear() of one token over a fused q|k|v weight [(heads + 2 kv_heads) head_dim,
/// in_features], then rope_qkv() without q/k norm on its output, as one kernel with the same
/// results (decode_linear_kernel.cuh): q rotated into q_out [heads, head_dim], k rotated and v
/// into the cache at kv.positions[0]. cos and sin [head_dim]. cudaErrorInvalidValue where
/// shape.batch or shape.seq is not 1, head_dim is not a multiple of 4, kv has no positions, or
/// decode_linear() would refuse: the caller then runs the two.
/// With folds.norm_weight, x is the residual row and is normalised first (input rms_normed).
cudaError_t decode_qkv_rope(element_type type, const void* x, const void* weight,
                            const void* bias, const void* cos, const void* sin, void* q_out,
                            const kv_destination& kv, const qkv_shape& shape,
                            int64_t in_features, cudaStream_t stream,
                            const decode_linear_folds& folds = {});

/// RMSNorm's input gradient for frozen weights (train_kernels.cuh): for rows x [rows, dim]
/// normalised as add_rms_norm() does without delta, and grad_out the gradient of its result,
/// grad_x [rows, dim]. All contiguous, in T.
cudaError_t rms_norm_backward(element_type type, const void* grad_out, const void* x,
                              const void* weight, void* grad_x, int64_t rows, int64_t dim,
                              float eps, cudaStream_t stream);

/// Where swiglu_pair() finds its elements: `rows` rows of `width`; a row of gate and up (and of
/// their gradients) lies `in_stride` elements after the previous one (2 * width when gate and up
/// are the halves of one stacked gate|up row, width for separate contiguous tensors), a row of
/// out and grad_out `out_stride` elements after the previous one.
struct swiglu_layout {
  int64_t rows = 0, width = 0, in_stride = 0, out_stride = 0;
};

/// out = silu(gate) * up, rounded as at::silu(gate) * up (train_kernels.cuh).
cudaError_t swiglu_pair(element_type type, const void* gate, const void* up, void* out,
                        const swiglu_layout& layout, cudaStream_t stream);

/// The gradients of swiglu_pair()'s gate and up for grad_out (laid out as out), written where
/// gate and up lie in their own tensors (the same layout).
cudaError_t swiglu_pair_backward(element_type type, const void* grad_out, const void* gate,
                                 const void* up, void* grad_gate, void* grad_up,
                                 const swiglu_layout& layout, cudaStream_t stream);

/// The learner's per-token log-probabilities and their gradients (logprob_kernel.cuh): for each
/// of `rows` rows of `vocab` logits in T (contiguous) and its target token, out[row] (float32) =
/// log_softmax(logits / temperature)[target], and the row overwritten with the gradient of
/// out[row] with respect to it, rounded to T. cudaErrorInvalidValue for temperature <= 0.
cudaError_t token_logprob_gradient(element_type type, void* logits, const int64_t* targets,
                                   float* out, int64_t rows, int64_t vocab, float temperature,
                                   cudaStream_t stream);

/// Where rotary() finds a head's row: x and out as [batch, heads, seq, dim] with their own
/// strides (the last dimension contiguous), cos and sin contiguous [batch, seq, dim].
struct rotary_layout {
  int64_t batch = 0, heads = 0, seq = 0, dim = 0;
  int64_t x_strides[3] = {0, 0, 0};   ///< batch, head, position (elements)
  int64_t out_strides[3] = {0, 0, 0}; ///< the same for out
};

/// RoPE of the training path (train_kernels.cuh): with backward false out = x * cos +
/// swap_halves(x) * sin rounded as apply_rotary() does; with backward true x is the gradient
/// of such a result and out the gradient of its input. dim even; out must not overlap x.
cudaError_t rotary(element_type type, const void* x, const void* cos, const void* sin, void* out,
                   const rotary_layout& layout, bool backward, cudaStream_t stream);

/// Cached positions a decode attention block scores at a time (one thread per key); the
/// kernels' decode_keys_per_block.
inline constexpr int64_t decode_chunk_keys = 128;

/// The keys each block of decode_attention_grouped() takes for `batch` sequences of `kv_heads`
/// cached heads and `key_len` positions on a device of `multiprocessors` SMs: whole chunks, as
/// few splits as still give every SM several blocks (fewer partials to write and merge). Its
/// splits: ceil(key_len / keys_per_split).
inline int64_t decode_attention_group_keys_per_split(int64_t batch, int64_t kv_heads,
                                                     int64_t key_len, int64_t multiprocessors) {
  constexpr int64_t blocks_per_multiprocessor = 4; // enough to hide a block's start and tail
  const int64_t chunks = (key_len + decode_chunk_keys - 1) / decode_chunk_keys;
  const int64_t sequences = batch * kv_heads;
  const int64_t wanted = multiprocessors * blocks_per_multiprocessor;
  if (sequences <= 0 || chunks <= 1 || sequences * chunks <= wanted)
    return decode_chunk_keys;
  int64_t per_split = (sequences * chunks) / wanted; // >= 1 here
  per_split = per_split > chunks ? chunks : per_split;
  return per_split * decode_chunk_keys;
}

/// decode_attention() with one block per (sequence, kv head, split of `keys_per_split` keys)
/// serving all heads / kv_heads (at most 8) query heads of the group: each cached row is read
/// once per step. shape.splits must be ceil(key_len / keys_per_split); the workspace and the
/// result are decode_attention()'s. cudaErrorInvalidValue for a group above 8, a head_dim other
/// than 64, 128 or 256 (the kernel's instances) or a misaligned cache.
cudaError_t decode_attention_grouped(element_type type, const void* q, const decode_kv& kv,
                                     const int64_t* positions, float* partials, void* out,
                                     const decode_attention_shape& shape, int64_t keys_per_split,
                                     cudaStream_t stream);

/// The most query heads per kv head decode_attention_mma() serves (the mma's N dimension).
inline constexpr int64_t decode_mma_max_group_size = 8;

/// The keys each block of decode_attention_mma() takes: a multiple of its 64-key rounds, as few
/// splits of equal length as still give the device `multiprocessors` x 4 blocks, and one round
/// per split while there are fewer blocks than that.
inline int64_t decode_attention_mma_keys_per_split(int64_t batch, int64_t kv_heads,
                                                   int64_t key_len, int64_t multiprocessors) {
  constexpr int64_t round = 64;                    // decode_mma_warps x decode_mma_keys
  constexpr int64_t blocks_per_multiprocessor = 4; // the kernel's occupancy
  const int64_t rounds = (key_len + round - 1) / round;
  const int64_t sequences = batch * kv_heads;
  if (sequences <= 0 || rounds <= 1)
    return round;
  const int64_t wanted = multiprocessors * blocks_per_multiprocessor;
  int64_t splits = (wanted + sequences - 1) / sequences;
  splits = splits < 1 ? 1 : (splits > rounds ? rounds : splits);
  return (rounds + splits - 1) / splits * round;
}

/// decode_attention_grouped() on tensor cores (cuda/decode_attention_mma_kernel.cuh): the same
/// blocks, splits, workspace and result, for __half and bfloat16 caches with head_dim 64 or 128
/// and at most 8 query heads per kv head. keys_per_split must be a multiple of 64 (the four
/// warps' 16 keys). cudaErrorInvalidValue for float32, another shape, a misaligned cache, or a
/// binary whose kernels were not compiled for sm_80 or newer (the mma instructions need it):
/// the caller then runs another path.
cudaError_t decode_attention_mma(element_type type, const void* q, const decode_kv& kv,
                                 const int64_t* positions, float* partials, void* out,
                                 const decode_attention_shape& shape, int64_t keys_per_split,
                                 cudaStream_t stream);

/// One row's settings for race_sample(): its Philox stream (seed and offset, reserved from the
/// row's generator for this call) and temperature; a greedy row takes the argmax of its logits
/// (temperature 1, no noise).
struct sample_row {
  uint64_t seed = 0;
  uint64_t offset = 0;
  float temperature = 1.0f; ///< the logits are divided by it (as log_softmax(logits / T))
  int32_t greedy = 0;
};

/// Vocabulary entries per block of race_sample()'s first kernel.
inline constexpr int64_t sample_slice_entries = 4096;

/// race_sample()'s workspace: rows * sample_slices(vocab) * 4 floats.
inline int64_t sample_slices(int64_t vocab) {
  return (vocab + sample_slice_entries - 1) / sample_slice_entries;
}

/// One token per row of `logits` ([rows, vocab], rows row_stride apart) by the exponential race
/// (cuda/sample_kernel.cuh states it), with `settings` [rows] on the device: result [2, rows]
/// float32 gets the tokens and their log-probabilities (log-softmax of logits / T over the
/// whole vocabulary). cudaErrorInvalidValue for a vocabulary of 2^24 entries or more (tokens
/// travel as float32).
cudaError_t race_sample(element_type type, const void* logits, int64_t row_stride, int64_t rows,
                        int64_t vocab, const sample_row* settings, float* partials, float* result,
                        cudaStream_t stream);

} // namespace kbrl::model::cuda
