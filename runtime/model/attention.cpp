#include "runtime/model/attention.hpp"

#include <ATen/ATen.h>
#include <torch/version.h>

#include <cmath>
#include <limits>
#include <optional>

// at::scaled_dot_product_attention arrived with torch 2.0, its enable_gqa argument with 2.5.
#if TORCH_VERSION_MAJOR >= 2
#define KBRL_HAVE_SDPA 1
#else
#define KBRL_HAVE_SDPA 0
#endif
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 5)
#define KBRL_HAVE_SDPA_GQA 1
#else
#define KBRL_HAVE_SDPA_GQA 0
#endif

namespace kbrl::model {

namespace {

/// softmax(q k^T / sqrt(d) where `mask`) v with matmuls, the softmax in float32 (float64 for
/// float64): torch < 2.0. `q` may be folded ([batch, kv_heads, group * queries, dim]); `mask`
/// broadcasts against the scores [batch, kv_heads, rows, keys].
[[maybe_unused]] at::Tensor matmul_attention(const at::Tensor& q, const at::Tensor& k,
                                             const at::Tensor& v, const at::Tensor& mask) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  auto scores = at::matmul(q, k.transpose(-1, -2)) * scale;
  scores = at::where(mask, scores, -std::numeric_limits<double>::infinity());
  const auto probs =
    at::softmax(scores, -1, at::promote_types(q.scalar_type(), at::kFloat)).to(q.scalar_type());
  return at::matmul(probs, v);
}

/// Causal attention over the queries' own tokens (grouped_attention() with an undefined mask).
at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  const int64_t batch = q.size(0), heads = q.size(1), queries = q.size(2), dim = q.size(3);
  const int64_t kv_heads = k.size(1), keys = k.size(2);
  TORCH_CHECK(keys == queries, "grouped_attention: causal attention (no mask) needs as many keys "
              "as queries, got ", keys, " keys for ", queries, " queries");
  const int64_t group = heads / kv_heads;
  (void)batch, (void)dim; // not every branch below needs them
#if KBRL_HAVE_SDPA_GQA
  return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0,
                                          /*is_causal=*/true, /*scale=*/std::optional<double>(),
                                          /*enable_gqa=*/group > 1);
#elif KBRL_HAVE_SDPA
  // No enable_gqa: repeat each key/value head for its query heads (transformers' repeat_kv).
  auto repeat = [&](const at::Tensor& t) {
    return group == 1 ? t
                      : t.unsqueeze(2)
                          .expand({batch, kv_heads, group, keys, dim})
                          .reshape({batch, heads, keys, dim});
  };
  return at::scaled_dot_product_attention(q, repeat(k), repeat(v), /*attn_mask=*/{},
                                          /*dropout_p=*/0.0, /*is_causal=*/true);
#else
  // Folded queries: row i * queries + s is query s, which sees keys j <= s.
  const auto index = at::arange(queries, q.options().dtype(at::kLong));
  const auto row_query = index.repeat({group});                          // [group * queries]
  const auto mask = row_query.unsqueeze(1) >= index.unsqueeze(0);         // [rows, keys]
  const auto folded_q = q.reshape({batch, kv_heads, group * queries, dim});
  return matmul_attention(folded_q, k, v, mask).reshape({batch, heads, queries, dim});
#endif
}

} // namespace

bool fused_attention_available() { return KBRL_HAVE_SDPA != 0; }

at::Tensor grouped_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                             const at::Tensor& mask) {
  const int64_t batch = q.size(0), heads = q.size(1), queries = q.size(2), dim = q.size(3);
  const int64_t kv_heads = k.size(1), keys = k.size(2);
  TORCH_CHECK(heads % kv_heads == 0, "grouped_attention: ", heads, " query heads over ", kv_heads,
              " key/value heads");
  if (!mask.defined())
    return causal_attention(q, k, v);
  const int64_t group = heads / kv_heads;
  // Query heads h = g * group + i share key/value head g: fold i into the query dimension.
  const auto folded_q = q.reshape({batch, kv_heads, group * queries, dim});
  TORCH_CHECK(mask.dim() == 4, "grouped_attention: mask must be [batch, 1, queries, keys], got ",
              mask.sizes());
  const bool folded_already = group == 1 || mask.size(2) == group * queries;
  const auto folded_mask = folded_already ? mask
                                          : mask.unsqueeze(2)
                                              .expand({batch, 1, group, queries, keys})
                                              .reshape({batch, 1, group * queries, keys});
  at::Tensor out;
#if KBRL_HAVE_SDPA
  out = at::scaled_dot_product_attention(folded_q, k, v, folded_mask);
#else
  out = matmul_attention(folded_q, k, v, folded_mask);
#endif
  return out.reshape({batch, heads, queries, dim});
}

at::Tensor fold_attention_mask(const at::Tensor& mask, int64_t group) {
  if (group == 1 || !mask.defined())
    return mask;
  const int64_t batch = mask.size(0), queries = mask.size(2), keys = mask.size(3);
  return mask.unsqueeze(2)
    .expand({batch, 1, group, queries, keys})
    .reshape({batch, 1, group * queries, keys});
}

at::Tensor additive_attention_mask(const at::Tensor& mask, at::ScalarType dtype) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "additive_attention_mask: expected a boolean mask, "
              "got ", mask.scalar_type());
  return at::zeros(mask.sizes(), mask.options().dtype(dtype))
    .masked_fill_(mask.logical_not(), -std::numeric_limits<double>::infinity());
}

at::Tensor causal_mask(const at::Tensor& valid) {
  const int64_t seq = valid.size(1);
  const auto index = at::arange(seq, valid.options().dtype(at::kLong));
  const auto causal = index.unsqueeze(1) >= index.unsqueeze(0);   // [seq, seq]: j <= i
  const auto diagonal = index.unsqueeze(1) == index.unsqueeze(0);  // [seq, seq]: j == i
  const auto key_ok = valid.to(at::kBool).unsqueeze(1).unsqueeze(2); // [batch, 1, 1, seq]
  return causal.unsqueeze(0).unsqueeze(0).logical_and(key_ok.logical_or(diagonal));
}

at::Tensor cache_mask(const at::Tensor& positions, int64_t key_len) {
  const auto keys = at::arange(key_len, positions.options().dtype(at::kLong));
  // [batch, 1, seq, 1] >= [key_len]
  return positions.to(at::kLong).unsqueeze(1).unsqueeze(-1) >= keys;
}

} // namespace kbrl::model
