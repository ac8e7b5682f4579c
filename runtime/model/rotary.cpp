#include "runtime/model/rotary.hpp"

#include <ATen/ATen.h>

#include <cmath>

namespace kbrl::model {

at::Tensor rope_inverse_frequencies(const model_config& config) {
  const int64_t dim = config.head_dim;
  // transformers: 1.0 / (base ** (arange(0, dim, 2).float() / dim)), in float32.
  const auto exponents = at::arange(0, dim, 2, at::kLong).to(at::kFloat) / static_cast<double>(dim);
  auto inv_freq = at::pow(config.rope_theta, exponents).reciprocal();
  if (!config.rope_scaling)
    return inv_freq;
  // transformers' _compute_llama3_parameters, step by step.
  const auto& s = *config.rope_scaling;
  const double old_context = static_cast<double>(s.original_max_position_embeddings);
  const double low_freq_wavelen = old_context / s.low_freq_factor;
  const double high_freq_wavelen = old_context / s.high_freq_factor;
  const auto wavelen = (2 * M_PI) / inv_freq;
  auto scaled = at::where(wavelen > low_freq_wavelen, inv_freq / s.factor, inv_freq);
  const auto smooth = (old_context / wavelen - s.low_freq_factor)
                      / (s.high_freq_factor - s.low_freq_factor);
  const auto smoothed = (1 - smooth) * scaled / s.factor + smooth * scaled;
  const auto medium = (wavelen >= high_freq_wavelen).logical_and(wavelen <= low_freq_wavelen);
  return at::where(medium, smoothed, scaled);
}

rotary_embedding make_rotary_embedding(const at::Tensor& inv_freq, const at::Tensor& positions,
                                       at::ScalarType dtype) {
  const auto angles = positions.to(at::kFloat).unsqueeze(-1) * inv_freq.to(positions.device());
  const auto both = at::cat({angles, angles}, -1); // [batch, seq, head_dim]
  const auto sin = angles.sin();
  return {both.cos().to(dtype), at::cat({sin.neg(), sin}, -1).to(dtype)};
}

at::Tensor apply_rotary(const at::Tensor& x, const rotary_embedding& rotary) {
  // roll by half the head: [x1, x2] -> [x2, x1]. cos/sin are [batch, seq, head_dim]: broadcast
  // over the heads.
  const auto swapped = x.roll(x.size(-1) / 2, -1);
  return at::addcmul(x * rotary.cos.unsqueeze(1), swapped, rotary.sin.unsqueeze(1));
}

} // namespace kbrl::model
