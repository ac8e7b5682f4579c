// AdamW's and the schedule's settings: spellings, the schedule's factor, checks (no torch).
#include "runtime/train/optimizer_options.hpp"

#include "messages/errors.hpp"
#include "runtime/io/text.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace kbrl::train {

const char* to_string(lr_schedule_kind kind) {
  return kind == lr_schedule_kind::constant ? "constant" : "cosine";
}

caf::expected<lr_schedule_kind> parse_lr_schedule_kind(const std::string& name) {
  if (name == "constant")
    return lr_schedule_kind::constant;
  if (name == "cosine")
    return lr_schedule_kind::cosine;
  return make_error(errc::invalid_argument,
                    "schedule: expected constant or cosine, got \"" + name + "\"");
}

double lr_schedule::factor(int64_t step) const {
  if (warmup_steps > 0 && step <= warmup_steps)
    return static_cast<double>(step) / static_cast<double>(warmup_steps);
  if (kind == lr_schedule_kind::constant)
    return 1.0;
  const double span = static_cast<double>(std::max<int64_t>(1, total_steps - warmup_steps));
  const double progress = std::min(1.0, static_cast<double>(step - warmup_steps) / span);
  return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + std::cos(M_PI * progress));
}

caf::expected<void> check_optimizer_options(const adamw_options& a, const lr_schedule& s) {
  std::vector<std::string> bad;
  auto finite = [](double x) { return std::isfinite(x); };
  if (!(a.lr > 0) || !finite(a.lr))
    bad.push_back("lr must be > 0, got " + std::to_string(a.lr));
  if (!(a.beta1 >= 0 && a.beta1 < 1))
    bad.push_back("adam_beta1 must be in [0, 1), got " + std::to_string(a.beta1));
  if (!(a.beta2 >= 0 && a.beta2 < 1))
    bad.push_back("adam_beta2 must be in [0, 1), got " + std::to_string(a.beta2));
  if (!(a.eps > 0) || !finite(a.eps))
    bad.push_back("adam_eps must be > 0, got " + std::to_string(a.eps));
  if (!(a.weight_decay >= 0) || !finite(a.weight_decay))
    bad.push_back("weight_decay must be >= 0, got " + std::to_string(a.weight_decay));
  if (s.warmup_steps < 0)
    bad.push_back("warmup_steps must be >= 0, got " + std::to_string(s.warmup_steps));
  if (s.kind == lr_schedule_kind::cosine && s.total_steps <= s.warmup_steps)
    bad.push_back("total_steps (" + std::to_string(s.total_steps)
                  + ") must exceed warmup_steps (" + std::to_string(s.warmup_steps)
                  + ") for the cosine schedule");
  if (!(s.min_ratio >= 0 && s.min_ratio <= 1))
    bad.push_back("min_lr_ratio must be in [0, 1], got " + std::to_string(s.min_ratio));
  if (!bad.empty())
    return make_error(errc::invalid_argument, "optimizer: " + join(bad, "; "));
  return {};
}

} // namespace kbrl::train
