#pragma once
// The linear layers of a one-token decode step as one GEMV kernel each
// (cuda/decode_linear_kernel.cuh says why cuBLAS is slow there), with the SwiGLU folded into the
// down projection and, for one sequence, RoPE and the kv-cache write folded into the q|k|v
// projection (decode_rope_qkv). Everywhere else, and with KBRL_DECODE_LINEAR=cublas (read once, to compare on
// a device), exactly the operations one by one (at::linear, swiglu()). Inference only: no
// autograd history.

#include "runtime/model/fused_ops.hpp"

#include <ATen/core/Tensor.h>

#include <optional>
#include <vector>

namespace kbrl::model {

/// at::linear(x, weight, bias): on CUDA in float16 / bfloat16 for one token (x's leading
/// dimensions' product 1), a contiguous weight and 16-byte aligned rows, the GEMV kernel
/// (float32 sums rounded once, in another order than cuBLAS's: within one rounding of the
/// dtype); otherwise at::linear.
at::Tensor decode_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

/// at::linear(swiglu(gate_up), weight, bias): with the GEMV kernel one kernel that computes
/// silu(gate) * up as it reads it, rounded as swiglu() rounds it; otherwise the two operations.
at::Tensor swiglu_linear(const at::Tensor& gate_up, const at::Tensor& weight,
                         const at::Tensor& bias);

/// rope_qkv(fused_projection(x, weight, bias, parts), layout, rotary, no q/k norm, positions,
/// cache_keys, cache_values) for a decode step of one sequence (x [1, 1, hidden], cache_keys /
/// cache_values its slot [1, kv_heads, max_len, head_dim] of a layer's cache): on CUDA in
/// float16 / bfloat16, without LoRA on the parts and with the GEMV kernel chosen, one kernel
/// with the same results as the two (cuda/decode_linear_kernel.cuh, decode_qkv_rope_kernel).
/// With input_norm defined, x is the residual row and the kernel applies
/// add_rms_norm(x, {}, input_norm, eps) itself (the same bits);
/// nothing where that does not apply: the caller then runs the two. KBRL_DECODE_QKV_ROPE=off
/// (read once) always leaves it to the two, for comparisons on a device.
std::optional<attention_inputs> decode_rope_qkv(
  const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
  const std::vector<const linear_layer*>& parts, const qkv_layout& layout,
  const rotary_embedding& rotary, const at::Tensor& positions, const at::Tensor& cache_keys,
  const at::Tensor& cache_values, const at::Tensor& input_norm = {}, double eps = 0.0);

// A decode step's residual adds and norms folded into its GEMVs (one sequence, one token): the
// residual add done where the delta is made (decode_linear_add_to), the norm by every block of
// the GEMV that reads the normalised row (decode_linear_normed; decode_rope_qkv with
// input_norm), with add_rms_norm()'s arithmetic: the same bits as the norm kernels, up to two
// kernels fewer per layer. Off unless asked for: measured on an H200 (BENCHMARKS.md), every
// block normalising the row itself made the 4,480-block gate|up GEMV 1.7x slower, the step
// 1.80 ms against 1.49 ms.

/// Which folds a decode step uses: KBRL_DECODE_NORMS (read once) = "all" (both norms and both
/// residual adds), "qkv" (the input norm into the q|k|v GEMV, the MLP's residual add into the
/// down projection; the post-attention norm stays a kernel), anything else none (the default).
enum class norm_folds { none, qkv, all };

/// The folds chosen (none where the GEMV kernels are not built or not chosen); each call below
/// still says whether it applied.
norm_folds decode_norms_fold();

/// decode_linear(add_rms_norm(row, {}, norm_weight, eps).normed, weight, bias) as one kernel
/// for one token's residual row, or nothing where that does not apply (the caller then runs the
/// two).
std::optional<at::Tensor> decode_linear_normed(const at::Tensor& row, const at::Tensor& norm_weight,
                                               double eps, const at::Tensor& weight,
                                               const at::Tensor& bias);

/// residual (one token's row, contiguous) becomes add_rms_norm(residual, delta, ...).residual
/// for delta = decode_linear(x, weight, bias) (swiglu_linear(x, ...) with swiglu_input), in
/// place, as one kernel; false where that does not apply (nothing was done).
bool decode_linear_add_to(at::Tensor& residual, const at::Tensor& x, bool swiglu_input,
                          const at::Tensor& weight, const at::Tensor& bias);

} // namespace kbrl::model
