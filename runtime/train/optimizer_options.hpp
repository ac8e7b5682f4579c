#pragma once
// The settings of AdamW and of the learning-rate schedule (optimizer.hpp has the formulas and the
// optimiser), without torch, so that settings and configs can carry them.

#include <caf/expected.hpp>

#include <cstdint>
#include <string>

namespace kbrl::train {

/// Hyper-parameters of AdamW (PyTorch's defaults apart from the learning rate).
struct adamw_options {
  double lr = 2e-5;           ///< base learning rate, > 0 (learner.lr's default)
  double beta1 = 0.9;         ///< in [0, 1)
  double beta2 = 0.999;       ///< in [0, 1)
  double eps = 1e-8;          ///< > 0
  double weight_decay = 0.0;  ///< decoupled, >= 0
};

/// The shape of the learning rate over steps (optimizer.hpp).
enum class lr_schedule_kind : uint8_t { constant, cosine };

/// "constant" or "cosine".
const char* to_string(lr_schedule_kind kind);
/// The kind spelled `name`; errc::invalid_argument otherwise.
caf::expected<lr_schedule_kind> parse_lr_schedule_kind(const std::string& name);

/// Warm-up then constant or cosine decay.
struct lr_schedule {
  lr_schedule_kind kind = lr_schedule_kind::constant;
  int64_t warmup_steps = 0;   ///< >= 0
  int64_t total_steps = 1000; ///< cosine: the step at which the decay ends; > warmup_steps
  double min_ratio = 0.0;     ///< cosine: the factor reached at total_steps, in [0, 1]

  /// The factor of optimiser step `step` (1-based).
  double factor(int64_t step) const;
};

/// Checks the ranges of AdamW's options and the schedule; errc::invalid_argument naming each
/// bad field.
caf::expected<void> check_optimizer_options(const adamw_options& adamw,
                                            const lr_schedule& schedule);

} // namespace kbrl::train
