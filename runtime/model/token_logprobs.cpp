#include "runtime/model/token_logprobs.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <vector>

namespace kbrl::model {

at::Tensor token_logprobs(const transformer& model, const at::Tensor& hidden,
                          const at::Tensor& targets, double temperature, int64_t chunk) {
  TORCH_CHECK(hidden.dim() == 3, "token_logprobs: hidden must be [batch, seq, hidden], got ",
              hidden.sizes());
  TORCH_CHECK(targets.dim() == 2 && targets.size(0) == hidden.size(0)
                && targets.size(1) == hidden.size(1),
              "token_logprobs: targets ", targets.sizes(), " do not match hidden ", hidden.sizes());
  TORCH_CHECK(chunk > 0, "token_logprobs: chunk must be > 0, got ", chunk);
  TORCH_CHECK(temperature >= 0, "token_logprobs: temperature must be >= 0, got ", temperature);
  const double t = temperature > 0 ? temperature : 1.0;
  const int64_t seq = hidden.size(1);
  std::vector<at::Tensor> parts;
  for (int64_t begin = 0; begin < seq; begin += chunk) {
    const int64_t n = std::min(chunk, seq - begin);
    const auto logits = model.logits(hidden.narrow(1, begin, n)); // float32 [batch, n, vocab]
    const auto logp = at::log_softmax(t == 1.0 ? logits : logits / t, -1);
    parts.push_back(logp.gather(-1, targets.narrow(1, begin, n).to(at::kLong).unsqueeze(-1))
                      .squeeze(-1));
  }
  return parts.empty() ? at::zeros({hidden.size(0), 0}, hidden.options().dtype(at::kFloat))
                       : at::cat(parts, 1);
}

} // namespace kbrl::model
