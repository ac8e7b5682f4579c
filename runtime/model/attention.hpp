#pragma once
// Scaled dot-product attention with grouped-query heads, and the boolean masks it takes.
//
// Masks are boolean, true where a query may attend to a key, shaped [batch, 1, queries, keys]
// (shared by all heads). Every query must be allowed at least one key: a row with none has no
// softmax (the fused kernels return NaN for it). The mask builders below guarantee that.
//
// An undefined mask means plain causal attention over the queries' own tokens (keys == queries,
// query i sees keys j <= i): no mask tensor exists, and at::scaled_dot_product_attention gets
// is_causal, the only form its flash kernel accepts. It serves right-padded batches too (the
// learner's micro-batches): a real token never sees the padding, which only follows it, and a
// padding query's output is meaningless either way (causal_mask() lets it see itself, this lets
// it see everything before it; neither is read). Left padding and a kv cache need a mask.
//
// With libtorch >= 2.0 the attention runs through at::scaled_dot_product_attention (fused
// kernels where the inputs allow them); older versions (this machine's 1.13) compute
// softmax(q k^T / sqrt(d)) v with matmuls, the softmax in float32 as transformers' eager path
// does. Grouped-query attention never copies the cache: with a mask, the query heads that share
// one key/value head are folded into the query dimension ([batch, kv_heads, group * queries,
// head_dim]), so the keys and values are used as they lie in the cache. Causal attention cannot
// fold (is_causal aligns the mask to the folded rows): libtorch >= 2.5 passes enable_gqa, which
// the flash kernel handles natively; 2.0 - 2.4 expand the key/value heads (a copy).

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace kbrl::model {

/// softmax(q k^T / sqrt(head_dim), masked) v.
///   q     [batch, heads, queries, head_dim]
///   k, v  [batch, kv_heads, keys, head_dim], kv_heads dividing heads; query head h uses
///         key/value head h / (heads / kv_heads), as transformers' repeat_kv arranges them
///   mask  bool [batch, 1, queries, keys], or that mask already folded for the head groups by
///         fold_attention_mask() ([batch, 1, group * queries, keys]), so that a forward over
///         many layers folds it once instead of once per layer; or undefined: causal attention
///         over the queries' own tokens (keys must equal queries; see above)
/// Returns [batch, heads, queries, head_dim] in q's dtype.
at::Tensor grouped_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                             const at::Tensor& mask);

/// `mask` (bool [batch, 1, queries, keys]) repeated for the `group` query heads that share one
/// key/value head, as grouped_attention() lays them out: [batch, 1, group * queries, keys]
/// (row i * queries + s is query s). group 1, or an undefined (causal) mask: `mask` itself.
at::Tensor fold_attention_mask(const at::Tensor& mask, int64_t group);

/// A boolean mask (true: attend) as the additive one the fused kernel adds to the scores: 0
/// where true, -inf where false, in `dtype` (the query's). at::scaled_dot_product_attention
/// makes exactly this from a boolean mask in every call; a forward that passes it to every
/// layer converts once (one kernel instead of one per layer). Only for the fused path
/// (fused_attention_available()): the matmul fallback wants the boolean mask.
at::Tensor additive_attention_mask(const at::Tensor& mask, at::ScalarType dtype);

/// The mask of a batch attending to itself: query i may see key j <= i where key j is a real
/// token (`valid` bool [batch, seq], true for real tokens, false for padding). A padding query
/// sees itself too, so that no row is empty; its output is meaningless and should be ignored.
/// Returns bool [batch, 1, seq, seq].
at::Tensor causal_mask(const at::Tensor& valid);

/// The mask of queries at `positions` ([batch, seq] integers) attending to cached positions
/// [0, key_len): each may see the positions up to and including its own. Returns bool
/// [batch, 1, seq, key_len].
at::Tensor cache_mask(const at::Tensor& positions, int64_t key_len);

/// True when grouped_attention() runs through the fused at::scaled_dot_product_attention.
bool fused_attention_available();

} // namespace kbrl::model
