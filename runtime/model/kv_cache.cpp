#include "runtime/model/kv_cache.hpp"

#include <ATen/ATen.h>

namespace kbrl::model {

kv_cache::kv_cache(const model_config& config, int64_t slots, int64_t max_len,
                   const at::TensorOptions& options)
  : slots_(slots), max_len_(max_len) {
  TORCH_CHECK(slots > 0, "kv_cache: slots must be > 0, got ", slots);
  TORCH_CHECK(max_len > 0, "kv_cache: max_len must be > 0, got ", max_len);
  const std::vector<int64_t> shape{slots, config.num_key_value_heads, max_len, config.head_dim};
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    keys_.push_back(at::zeros(shape, options));
    values_.push_back(at::zeros(shape, options));
  }
}

int64_t kv_cache::bytes() const {
  int64_t total = 0;
  for (const auto& t : keys_)
    total += t.numel() * t.element_size();
  for (const auto& t : values_)
    total += t.numel() * t.element_size();
  return total;
}

} // namespace kbrl::model
