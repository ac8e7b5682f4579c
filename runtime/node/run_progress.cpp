#include "runtime/node/run_progress.hpp"

#include "messages/status_details.hpp"
#include "runtime/episode/step_pipeline.hpp"
#include "runtime/io/clock.hpp"

#include <fmt/format.h>

#include <cstdlib>

namespace kbrl {

namespace {

double metric(const std::vector<metric_record>& records, const std::string& name,
              double fallback = 0) {
  return episode::metric_value(records, name, fallback);
}

} // namespace

std::string progress_line(const std::vector<metric_record>& m, uint64_t step, uint64_t steps,
                          double step_seconds, double mean_step_seconds) {
  double episodes = metric(m, "episodes"), tokens = metric(m, "tokens");
  auto line = fmt::format(
    "step {}{}: mean reward {:.3f} (best {:.3f}), {:.0f}% correct, {:.0f}% compiled, "
    "{:.0f}% well-formed; {:.0f} episodes, {} for the step ({:.1f} episodes/min, {:.0f} "
    "tokens/s)",
    step, steps > 0 ? "/" + std::to_string(steps) : "", metric(m, "reward/mean"),
    metric(m, "reward/max"), 100 * metric(m, "rate/correct"), 100 * metric(m, "rate/compiled"),
    100 * metric(m, "rate/format"), episodes, human_duration(step_seconds),
    step_seconds > 0 ? 60 * episodes / step_seconds : 0.0,
    step_seconds > 0 ? tokens / step_seconds : 0.0);
  double dropped = metric(m, "groups/dropped_flat", -1);
  if (dropped > 0)
    line += fmt::format("; {:.0f} group(s) with equal rewards not trained on", dropped);
  if (steps > step)
    line += "; about " + human_duration(mean_step_seconds * static_cast<double>(steps - step))
            + " left";
  return line;
}

bool checkpoint_is_current(const std::vector<status_detail>& details) {
  auto step = detail_of(details, "step", "0");
  auto last = detail_of(details, "last checkpoint", "none");
  auto expected = fmt::format("step-{:06d}", std::atoll(step.c_str()));
  return last.size() >= expected.size()
         && last.compare(last.size() - expected.size(), expected.size(), expected) == 0;
}

} // namespace kbrl
