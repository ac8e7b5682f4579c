#pragma once
// The operations of the inference path (transformer::forward without autograd on a CUDA device),
// each one kernel where the fused CUDA kernels are compiled in (runtime/model/cuda/) and the
// tensors allow it, and otherwise exactly the libtorch composition of run_layer() (the CPU, a
// libtorch without CUDA, float64, unusual layouts). Decoding a token runs ~40 small kernels per
// layer through run_layer(); with these it runs about a dozen:
//
//   add_rms_norm      residual add + RMSNorm                    (replaces ~9 kernels)
//   fused_projection  q|k|v or gate|up as one GEMM               (3 or 2 GEMMs -> 1)
//   rope_qkv          q/k RMSNorm (qwen3), RoPE, kv-cache write  (~20 kernels -> 1; for one
//                     sequence's decode step folded into the q|k|v GEMV, decode_linear.hpp)
//   swiglu            silu(gate) * up                            (2 -> 1)
//   decode_attention  one query per sequence over its cache      (SDPA's kernel -> 2 split-key
//                     kernels; one sequence, or several on request, see there)
//
// The fused kernels reproduce libtorch's roundings step by step (cuda/fused_kernels.hpp), so
// they agree with the composition bit for bit except for the order of float32 sums (RMSNorm);
// the one fused GEMM may also round differently from three separate ones.
//
// None of these record autograd history usable for training: they are for inference only, and
// transformer::forward uses them only while autograd is off.

#include "runtime/model/rotary.hpp"
#include "runtime/model/transformer.hpp"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace kbrl::model {

/// True when this build has the fused CUDA kernels (libtorch with CUDA, and nvcc found when
/// CMake configured the build); false: every operation below is its libtorch composition.
bool fused_kernels_compiled_in();

/// Whether `x` would run through a fused kernel (CUDA tensor, float32 / float16 / bfloat16, and
/// kernels compiled in). For tests and logs.
bool fused_kernel_applies(const at::Tensor& x);

/// The residual stream after an add and its RMSNorm.
struct normed_residual {
  at::Tensor residual; ///< x + delta (x itself when delta is undefined)
  at::Tensor normed;   ///< rms_norm(residual, weight, eps)
};

/// residual = x + delta, normed = rms_norm(residual, weight, eps) (transformer.hpp's rms_norm),
/// both in x's dtype. `delta` may be undefined (residual = x). x and delta [..., dim], weight
/// [dim]. One kernel on CUDA for a weight of x's dtype.
normed_residual add_rms_norm(const at::Tensor& x, const at::Tensor& delta,
                             const at::Tensor& weight, double eps);

/// silu(gate) * up for gate_up [..., 2 n] holding gate in [0, n) and up in [n, 2 n): [..., n].
/// One kernel on CUDA. Precondition (TORCH_CHECK): an even last dimension.
at::Tensor swiglu(const at::Tensor& gate_up);

/// The shape of a fused q|k|v projection: per token `heads` query heads, then `kv_heads` key
/// heads, then `kv_heads` value heads, `head_dim` each.
struct qkv_layout {
  int64_t heads = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
};

/// Attention's inputs made from a fused projection.
struct attention_inputs {
  at::Tensor q;      ///< [batch, heads, seq, head_dim], RMSNormed (q_norm) and rotated
  at::Tensor keys;   ///< the cache's [batch, kv_heads, max_len, head_dim], or fresh [.., seq, ..]
  at::Tensor values; ///< as keys
};

/// From qkv [batch, seq, (heads + 2 kv_heads) head_dim]: q and k each RMSNormed per head with
/// q_norm / k_norm when those are defined ([head_dim], qwen3), then rotated with `rotary`
/// (make_rotary_embedding of the tokens' positions, [batch, seq, head_dim]); v as it is. With
/// `cache_keys` / `cache_values` defined ([batch, kv_heads, max_len, head_dim]: the batch's
/// slots of one layer's cache), token (b, s)'s key and value are written at position
/// positions[b, s] there and the cache tensors are returned as keys/values; otherwise keys/values
/// are fresh [batch, kv_heads, seq, head_dim]. This is what run_layer() computes with views,
/// apply_rotary and scatter_, in one kernel on CUDA.
/// A position outside [0, max_len) is an error on the CPU (scatter_'s index check); the CUDA
/// kernel cannot raise one without a synchronisation and skips that token's write instead.
attention_inputs rope_qkv(const at::Tensor& qkv, const qkv_layout& layout,
                          const rotary_embedding& rotary, const at::Tensor& q_norm,
                          const at::Tensor& k_norm, double eps, const at::Tensor& positions,
                          const at::Tensor& cache_keys, const at::Tensor& cache_values);

/// Attention of one query per sequence over its kv cache, as a decode step needs it: q [batch,
/// heads, 1, head_dim], keys/values the cache's [batch, kv_heads, key_len, head_dim], positions
/// [batch, 1] (the queries' own positions), `mask` cache_mask(positions, key_len) in any form
/// grouped_attention() takes (folded, additive). Query b attends to cached positions [0,
/// positions[b]], what that mask allows. Returns [batch, heads, 1, head_dim] in q's dtype. On
/// CUDA, in float16 / bfloat16 with head_dim 64 or 128 and at most 8 query heads per kv head, a
/// tensor-core kernel that serves a whole GQA group per block and reads each sequence's
/// positions only (cuda/decode_attention_mma_kernel.cuh; its probabilities are rounded to the
/// dtype, as SDPA's are); otherwise, for one sequence, a split-key kernel per query head
/// (cuda/decode_attention_kernel.cuh; float32 softmax); both within the dtype's rounding of
/// grouped_attention's result, not bit-equal; otherwise grouped_attention() with `mask`.
/// `from_environment` reads KBRL_DECODE_ATTENTION once (unset: standard; `sdpa`; `grouped`).
enum class decode_attention_kind {
  from_environment,
  standard, ///< the tensor-core kernel where it applies, else the per-head kernel for one
            ///< sequence and grouped_attention() for several
  sdpa,     ///< grouped_attention() always
  grouped,  ///< the per-head kernel for one sequence, the CUDA-core grouped kernel
            ///< (cuda/decode_attention_group_kernel.cuh) for several (the kernels before the
            ///< tensor-core one, for comparisons)
};
at::Tensor decode_attention(const at::Tensor& q, const at::Tensor& keys, const at::Tensor& values,
                            const at::Tensor& positions, const at::Tensor& mask,
                            decode_attention_kind kind = decode_attention_kind::from_environment);

/// True when the weights (or the biases) of `parts` are consecutive row blocks of `fused`, in
/// order and covering it: what fuse_rows() leaves behind. All undefined (no biases) counts as
/// true.
bool rows_of(const at::Tensor& fused, const std::vector<const at::Tensor*>& parts);

/// True when `weight` and `bias` are exactly the rows of `parts`' weights and biases (rows_of)
/// and no part has LoRA: one GEMM over them is the whole projection.
bool fused_without_lora(const at::Tensor& weight, const at::Tensor& bias,
                        const std::vector<const linear_layer*>& parts);

/// Concatenates the tensors `parts` point to along dimension 0 into one new tensor and rebinds
/// each to its narrow() view of it: the same values, one allocation, and the parts still seen
/// as separate tensors by everything else. Undefined parts: returns an undefined tensor and
/// changes nothing. Preconditions (TORCH_CHECK): all defined or all undefined, one dtype and
/// device, equal trailing shapes.
at::Tensor fuse_rows(const std::vector<at::Tensor*>& parts);

/// The outputs of linear layers that read the same `x`, side by side along the last dimension
/// ([..., sum of out_features]): one GEMM with `weight` / `bias` when the layers' weights and
/// biases lie in them (rows_of; decode_linear() for a decode step's few rows), then each layer's LoRA term added onto its slice; otherwise
/// each layer's forward(), concatenated. LoRA dropout is not applied here (an inference path):
/// the caller keeps layers with dropout on the unfused path.
at::Tensor fused_projection(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                            const std::vector<const linear_layer*>& parts);

} // namespace kbrl::model
