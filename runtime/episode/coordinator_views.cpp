#include "runtime/episode/coordinator_views.hpp"

#include "messages/errors.hpp"
#include "runtime/io/text.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace kbrl::episode {

namespace {

/// "step 3: 12 / 16, held-out after 2: 4 / 4", or "none".
std::string rounds_text(const step_pipeline& p) {
  std::vector<std::string> parts;
  for (auto& [key, r] : p.rounds())
    parts.push_back((r.eval ? "held-out after " : "step ") + std::to_string(r.step) + ": "
                    + std::to_string(r.collected.size()) + " / " + std::to_string(r.expected));
  return parts.empty() ? "none" : join(parts, ", ");
}

/// What steps wait for ("an evaluator to join"), or "nothing".
std::string waiting_for(const coordinator_settings& s) {
  auto missing = s.workers ? s.workers->missing() : std::string{};
  return missing.empty() ? "nothing" : missing + " to join (episodes wait for one)";
}

std::string of_steps(uint64_t step, uint64_t steps, const char* separator) {
  return std::to_string(step) + (steps > 0 ? separator + std::to_string(steps) : "");
}

} // namespace

actor_health health_of(coordinator_phase phase) {
  if (phase == coordinator_phase::failed)
    return actor_health::failed;
  return phase == coordinator_phase::starting ? actor_health::starting : actor_health::ok;
}

std::vector<status_detail> coordinator_status_details(const step_pipeline& p,
                                                      const std::deque<step_timeline>& recent) {
  auto& s = p.settings();
  return {{"step", of_steps(p.committed(), s.steps, " / ")},
          {"mode", p.async() ? "async (up to " + std::to_string(p.window())
                                 + " steps ahead of the learner)"
                             : std::string("sync")},
          {"episodes", rounds_text(p)},
          {"policy version", std::to_string(p.policy_version())},
          {"last reward", fmt::format("{:.3f}", p.last_reward())},
          {"last correct rate", fmt::format("{:.0f}%", 100 * p.last_correct())},
          {"groups dropped (flat)", std::to_string(p.groups_dropped())},
          {"trajectories dropped (stale)", std::to_string(p.stale_dropped())},
          {"last step timeline", last_timeline_text(recent)},
          {"waiting for", waiting_for(s)}};
}

caf::expected<std::string> timeline_view(coordinator_mode mode,
                                         const std::deque<step_timeline>& recent,
                                         const std::vector<std::string>& args) {
  size_t n = recent.size();
  if (!args.empty()) {
    try {
      n = static_cast<size_t>(std::stoul(args[0]));
    } catch (const std::exception&) {
      return make_error(errc::invalid_argument,
                        "timeline [N]: N is a number of steps, got '" + args[0] + "'");
    }
  }
  n = std::min(n, recent.size());
  std::vector<step_timeline> rows(recent.end() - static_cast<std::ptrdiff_t>(n), recent.end());
  return std::string(to_string(mode))
         + " mode; stage wall time (summed over requests); busy = share of the step's wall time "
           "each stage (sampler/evaluator/learner) worked\n"
         + render_timeline_table(rows);
}

caf::expected<std::string> trajectory_view(const latest_trajectories& latest,
                                           const std::vector<std::string>& args,
                                           const tok::tokenizer* tokenizer, answer_format format) {
  if (args.size() != 1)
    return make_error(errc::invalid_argument,
                      "usage: trajectory COORDINATOR PROBLEM (a problem id such as "
                      "level1/19_ReLU, or its name 19_ReLU)");
  trajectory_view_options o;
  o.format = std::move(format);
  return latest.render(
    args[0],
    [tokenizer](const std::vector<int32_t>& ids) {
      return tokenizer ? tokenizer->decode(ids) : std::string("(no tokenizer)");
    },
    o);
}

std::string start_note(const start_outcome& start, const step_pipeline& p) {
  if (start.kind == start_kind::learner_trained_next_step)
    return fmt::format("the learner already trained step {} (policy v{}) before this coordinator "
                       "stopped; it counts as done (its trajectories and metrics were not "
                       "recorded)",
                       p.committed(), p.policy_version());
  if (start.kind == start_kind::learner_version_differs)
    return fmt::format("coordinator.json says policy v{}, the learner publishes v{}: going on "
                       "with the learner's",
                       start.recorded_version, p.policy_version());
  return {};
}

std::string start_line(const step_pipeline& p) {
  return fmt::format("{} mode{}, starting after step {} with policy v{}",
                     to_string(p.settings().mode),
                     p.async() ? " (up to " + std::to_string(p.window())
                                   + " steps ahead of the learner)"
                               : std::string{},
                     p.committed(), p.policy_version());
}

std::string progress_line(const step_round& r, const step_pipeline& p, double elapsed_s) {
  auto& s = p.settings();
  const auto& m = r.summary;
  double per_step = elapsed_s / static_cast<double>(std::max<uint64_t>(1, r.step - p.first_step()));
  std::string eta;
  if (s.steps > r.step)
    eta = fmt::format(", about {:.0f} s left", per_step * static_cast<double>(s.steps - r.step));
  auto dropped = static_cast<size_t>(metric_value(m, "groups/dropped_flat"));
  auto value = [&](const char* name) { return metric_value(m, name); };
  return fmt::format("step {}: reward {:.3f} (std {:.3f}), correct {:.0f}%, compiled {:.0f}%, "
                     "{} of {} groups trained on, policy v{}, {:.1f} s per step{}",
                     of_steps(r.step, s.steps, "/"), value("reward/mean"), value("reward/std"),
                     100 * value("rate/correct"), 100 * value("rate/compiled"),
                     s.problems_per_step - std::min(s.problems_per_step, dropped),
                     s.problems_per_step, p.policy_version(), per_step, eta);
}

} // namespace kbrl::episode
