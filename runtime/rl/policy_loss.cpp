#include "runtime/rl/policy_loss.hpp"

#include "messages/errors.hpp"

#include <ATen/ATen.h>

#include <cmath>

namespace kbrl::rl {

policy_loss_terms compute_policy_loss(const token_inputs& in, const policy_loss_options& o) {
  TORCH_CHECK(in.logprobs.defined() && in.logprobs.dim() == 1,
              "compute_policy_loss: logprobs must be [N]");
  TORCH_CHECK(in.weights.defined() && in.weights.sizes() == in.logprobs.sizes(),
              "compute_policy_loss: weights must match logprobs ", in.logprobs.sizes());
  const auto& lp = in.logprobs;
  const auto w = in.weights.to(lp.scalar_type());
  policy_loss_terms t;
  at::Tensor per_token;
  if (o.kind == policy_loss_kind::supervised) {
    per_token = -lp;
    t.clipped = at::zeros({}, lp.options());
    t.ratio = at::zeros({}, lp.options());
    t.max_ratio = at::zeros({}, lp.options());
  } else {
    TORCH_CHECK(in.sampler_logprobs.defined() && in.sampler_logprobs.sizes() == lp.sizes(),
                "compute_policy_loss: ", to_string(o.kind), " needs sampler_logprobs [N]");
    TORCH_CHECK(in.advantages.defined() && in.advantages.sizes() == lp.sizes(),
                "compute_policy_loss: ", to_string(o.kind), " needs advantages [N]");
    const auto adv = in.advantages.to(lp.scalar_type());
    const auto ratio = at::exp(lp - in.sampler_logprobs.to(lp.scalar_type()));
    const auto unclipped = ratio * adv;
    if (o.kind == policy_loss_kind::ppo_clip) {
      const auto clipped = at::clamp(ratio, 1.0 - o.eps_low, 1.0 + o.eps_high) * adv;
      per_token = -at::minimum(unclipped, clipped);
      t.clipped = (w * (clipped < unclipped).to(w.scalar_type())).sum().detach();
    } else {
      per_token = -unclipped;
      t.clipped = at::zeros({}, lp.options());
    }
    const auto r = ratio.detach();
    t.ratio = (w * r).sum();
    t.max_ratio = r.numel() ? r.max() : at::zeros({}, lp.options());
  }
  auto loss = (w * per_token).sum();
  t.policy = loss.detach();
  if (o.kl_coef > 0) {
    TORCH_CHECK(in.base_logprobs.defined() && in.base_logprobs.sizes() == lp.sizes(),
                "compute_policy_loss: kl_coef > 0 needs base_logprobs [N]");
    const auto delta = in.base_logprobs.to(lp.scalar_type()) - lp;
    const auto k3 = at::exp(delta) - delta - 1;
    const auto kl = (w * k3).sum();
    loss = loss + o.kl_coef * kl;
    t.kl = kl.detach();
  } else {
    t.kl = at::zeros({}, lp.options());
  }
  t.loss = loss;
  return t;
}

std::vector<double> aggregation_weights(const std::vector<int64_t>& lengths,
                                        loss_aggregation aggregation) {
  int64_t tokens = 0, sequences = 0;
  for (auto n : lengths)
    if (n > 0) {
      tokens += n;
      ++sequences;
    }
  std::vector<double> w;
  w.reserve(static_cast<std::size_t>(tokens));
  for (auto n : lengths)
    for (int64_t i = 0; i < n; ++i)
      w.push_back(aggregation == loss_aggregation::token
                    ? 1.0 / static_cast<double>(tokens)
                    : 1.0 / (static_cast<double>(sequences) * static_cast<double>(n)));
  return w;
}

} // namespace kbrl::rl
