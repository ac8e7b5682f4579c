#pragma once
// Keys and values of attention, kept between forward passes so that decoding a token costs one
// token's work. The cache is allocated once, for a fixed number of slots (sequences) of a fixed
// maximum length, and never reallocated: the decode step always sees tensors of the same shapes
// at the same addresses, which is what capturing it in a CUDA graph later needs.
//
// Layout, per layer, for keys and for values alike:
//   [slots, num_key_value_heads, max_len, head_dim]
// Slot s holds one sequence; position p of that sequence lives at [s, :, p, :]. A slot does not
// record its own length: whoever fills it (the generation engine) knows how many positions are
// valid and builds the attention mask from that (attention.hpp's cache_mask).

#include "runtime/model/model_config.hpp"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace kbrl::model {

/// Preallocated attention keys and values for `slots` sequences of up to `max_len` tokens.
class kv_cache {
public:
  /// Allocates (zero-filled) the cache for `config`'s layers and heads with `options` (device
  /// and dtype: the model's run dtype). Throws c10::Error if the memory cannot be had.
  /// Preconditions (TORCH_CHECK): slots > 0, max_len > 0.
  kv_cache(const model_config& config, int64_t slots, int64_t max_len,
           const at::TensorOptions& options);

  int64_t slots() const { return slots_; }
  int64_t max_len() const { return max_len_; }
  int64_t layers() const { return static_cast<int64_t>(keys_.size()); }

  /// Layer `layer`'s keys / values, [slots, kv_heads, max_len, head_dim].
  const at::Tensor& keys(int64_t layer) const { return keys_.at(layer); }
  const at::Tensor& values(int64_t layer) const { return values_.at(layer); }

  /// Bytes held by all layers' keys and values.
  int64_t bytes() const;

private:
  int64_t slots_ = 0;
  int64_t max_len_ = 0;
  std::vector<at::Tensor> keys_;
  std::vector<at::Tensor> values_;
};

/// Where a forward pass writes the keys and values of its tokens and which cached positions its
/// attention reads. Row b of the batch is slot `first_slot + b`; its token at batch position s
/// is stored at cache position positions[b, s] (the RoPE position), and every query attends to
/// cached positions [0, key_len) allowed by the mask.
struct cache_span {
  kv_cache* cache = nullptr;  ///< nullptr: no cache, attention over the batch's own tokens
  int64_t first_slot = 0;     ///< slot of batch row 0; rows use consecutive slots
  int64_t key_len = 0;        ///< cached positions read, 1..max_len
};

} // namespace kbrl::model
