#pragma once
// Rotary position embeddings (RoPE) as Hugging Face transformers computes them for Qwen2, Qwen3
// and Llama 3: the first and second halves of each head are the two coordinates of head_dim/2
// rotating pairs (the "rotate_half" layout, not interleaved pairs), pair i turning by
// position * inv_freq[i], with inv_freq[i] = 1 / rope_theta^(2i / head_dim). Llama 3's "llama3"
// scaling then divides the low frequencies by `factor` and interpolates the middle band.
// Everything is computed in float32 in the order transformers uses, so angles agree to the last
// bit or two; cos and sin are cast to the run dtype only at the end, as there.

#include "runtime/model/model_config.hpp"

#include <ATen/core/Tensor.h>

namespace kbrl::model {

/// inv_freq of `config` (with llama3 scaling applied if configured): float32 [head_dim / 2] on
/// the CPU.
at::Tensor rope_inverse_frequencies(const model_config& config);

/// cos and sin of every position's angles, [batch, seq, head_dim] in the run dtype. `sin`
/// carries the sign that rotate_half gives it: -sin on the first half, +sin on the second, so
/// that apply_rotary() needs no negation of its own (see there).
struct rotary_embedding {
  at::Tensor cos;
  at::Tensor sin;
};

/// The rotary embedding of `positions` ([batch, seq] integer positions) with `inv_freq` (on the
/// device of `positions`), cast to `dtype`.
rotary_embedding make_rotary_embedding(const at::Tensor& inv_freq, const at::Tensor& positions,
                                       at::ScalarType dtype);

/// `x` rotated: x * cos + rotate_half(x) * sin, for x [batch, heads, seq, head_dim], computed
/// as x * cos + swap_halves(x) * signed_sin: rotate_half(x) = [-x2, x1] times sin = [s, s]
/// (both halves hold the same angles) is [x2, x1] times [-s, s]. Three kernels (roll, mul,
/// addcmul) instead of five (neg, cat, mul, mul, add), and fewer in the backward.
at::Tensor apply_rotary(const at::Tensor& x, const rotary_embedding& rotary);

} // namespace kbrl::model
