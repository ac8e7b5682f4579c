#pragma once
// The projections of one input on the training path (transformer::run_layer): q|k|v of the
// attention input, gate|up of the MLP input, and o_proj and down_proj alone, each with its LoRA
// term, as one autograd node over the stacked weights (attention_block::qkv_weight,
// mlp_block::gate_up_weight).
//
// Through separate linear_layer::forward calls, autograd adds up the input's gradient piece by
// piece: the base GEMM's and the LoRA term's for each projection, then the projections' sums
// (q + k + v): five full-size bfloat16 adds per layer for q|k|v, three for gate|up, one each for
// o and down. Here the forward runs one GEMM for the stacked projections and the backward one
// over the stacked weight; the LoRA terms' rank-r GEMMs write their share first and the
// compute-bound base GEMM adds onto it (beta 1), so no pass reads and writes a whole output
// just to add a term (bias-free groups; with a bias the base GEMM comes first, as in
// linear_layer::forward). What each part computes is linear_layer::forward's with its LoRA term
// in the input's dtype (lora_factors::compute_in_input_dtype); only GEMM shapes and orders, and
// so float32 sum orders and roundings, differ. Measured (BENCHMARKS.md, H200): a Qwen2.5-7B
// 4 x 2048 step 1.73x peft with this node, against 1.70x without it.

#include "runtime/model/transformer.hpp"

#include <ATen/core/Tensor.h>

#include <vector>

namespace kbrl::model {

/// parts[i]->forward(x) for each part, [..., out_i] each (views of one [..., sum out_i] result
/// when stacked). `weight` / `bias` are the parts' weights / biases stacked (rows_of), or for a
/// single part its own; undefined `bias` where the parts have none.
///
/// One autograd node (`fused`, the default being train_kernels_wanted()) where it applies: the
/// stacking holds, the base weights take no gradient, and every LoRA term computes in x's dtype
/// without dropout (compute_in_input_dtype, or factors already in x's dtype). Elsewhere the
/// parts' own forward(), so callers use it unconditionally.
std::vector<at::Tensor> train_projections(const at::Tensor& x, const at::Tensor& weight,
                                          const at::Tensor& bias,
                                          const std::vector<const linear_layer*>& parts);
std::vector<at::Tensor> train_projections(const at::Tensor& x, const at::Tensor& weight,
                                          const at::Tensor& bias,
                                          const std::vector<const linear_layer*>& parts,
                                          bool fused);

/// The parts' outputs side by side, [..., sum out_i]: train_projections() without the split,
/// so that a consumer of the stacked result (train_swiglu_stacked) hands its gradient back as
/// one tensor. Where the node does not apply, the parts' forward() concatenated.
at::Tensor train_stacked_projection(const at::Tensor& x, const at::Tensor& weight,
                                    const at::Tensor& bias,
                                    const std::vector<const linear_layer*>& parts);
at::Tensor train_stacked_projection(const at::Tensor& x, const at::Tensor& weight,
                                    const at::Tensor& bias,
                                    const std::vector<const linear_layer*>& parts, bool fused);

/// Whether train_projections() would run as one autograd node for these arguments.
bool stacked_projection_applies(const at::Tensor& x, const at::Tensor& weight,
                                const at::Tensor& bias,
                                const std::vector<const linear_layer*>& parts);

} // namespace kbrl::model
