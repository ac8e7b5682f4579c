// The policy loss's settings: spellings and checks (no torch).
#include "runtime/rl/policy_loss_options.hpp"

#include "messages/errors.hpp"

#include <cmath>
#include <string>

namespace kbrl::rl {

const char* to_string(policy_loss_kind kind) {
  switch (kind) {
    case policy_loss_kind::policy_gradient: return "pg";
    case policy_loss_kind::ppo_clip: return "ppo";
    case policy_loss_kind::supervised: return "sft";
  }
  return "?";
}

const char* to_string(loss_aggregation aggregation) {
  return aggregation == loss_aggregation::token ? "token" : "sequence";
}

caf::expected<policy_loss_kind> parse_policy_loss_kind(const std::string& name) {
  if (name == "pg")
    return policy_loss_kind::policy_gradient;
  if (name == "ppo")
    return policy_loss_kind::ppo_clip;
  if (name == "sft")
    return policy_loss_kind::supervised;
  return make_error(errc::invalid_argument,
                    "loss: expected pg, ppo or sft, got \"" + name + "\"");
}

caf::expected<loss_aggregation> parse_loss_aggregation(const std::string& name) {
  if (name == "token")
    return loss_aggregation::token;
  if (name == "sequence")
    return loss_aggregation::sequence;
  return make_error(errc::invalid_argument,
                    "aggregation: expected token or sequence, got \"" + name + "\"");
}

caf::expected<void> check_policy_loss_options(const policy_loss_options& o) {
  std::string problems;
  auto bad = [&](const std::string& what) { problems += (problems.empty() ? "" : "; ") + what; };
  if (!(o.eps_low >= 0 && o.eps_low < 1))
    bad("eps_low must be in [0, 1), got " + std::to_string(o.eps_low));
  if (!(o.eps_high >= 0) || !std::isfinite(o.eps_high))
    bad("eps_high must be >= 0, got " + std::to_string(o.eps_high));
  if (!(o.kl_coef >= 0) || !std::isfinite(o.kl_coef))
    bad("kl_coef must be >= 0, got " + std::to_string(o.kl_coef));
  if (!problems.empty())
    return make_error(errc::invalid_argument, "policy loss: " + problems);
  return {};
}

} // namespace kbrl::rl
