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

} // namespace kbrl::model::cuda
