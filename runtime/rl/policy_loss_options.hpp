#pragma once
// The settings of the policy loss (policy_loss.hpp defines the losses), without torch, so that
// settings and configs can carry them.

#include <caf/expected.hpp>

#include <cstdint>
#include <string>

namespace kbrl::rl {

/// Which per-token loss (policy_loss.hpp).
enum class policy_loss_kind : uint8_t { policy_gradient, ppo_clip, supervised };

/// How per-token losses are weighted into one number (policy_loss.hpp).
enum class loss_aggregation : uint8_t { token, sequence };

/// "pg", "ppo", "sft": the spellings of the run config.
const char* to_string(policy_loss_kind kind);
/// "token", "sequence".
const char* to_string(loss_aggregation aggregation);

/// The loss spelled `name` ("pg", "ppo", "sft"); errc::invalid_argument otherwise.
caf::expected<policy_loss_kind> parse_policy_loss_kind(const std::string& name);
/// The aggregation spelled `name` ("token", "sequence"); errc::invalid_argument otherwise.
caf::expected<loss_aggregation> parse_loss_aggregation(const std::string& name);

/// Settings of the loss.
struct policy_loss_options {
  policy_loss_kind kind = policy_loss_kind::ppo_clip;
  double eps_low = 0.2;   ///< ppo_clip: ratio clipped below at 1 - eps_low, in [0, 1)
  double eps_high = 0.28; ///< ppo_clip: ratio clipped above at 1 + eps_high, >= 0
  double kl_coef = 0;     ///< weight of the KL term, >= 0; 0: no base log-probabilities needed
};

/// Checks the ranges above; errc::invalid_argument naming the field.
caf::expected<void> check_policy_loss_options(const policy_loss_options& options);

} // namespace kbrl::rl
