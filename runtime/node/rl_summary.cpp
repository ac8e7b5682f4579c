#include "runtime/node/rl_summary.hpp"

#include "runtime/episode/coordinator_checkpoint.hpp"
#include "runtime/io/clock.hpp"
#include "runtime/report/metrics_jsonl.hpp"
#include "runtime/train/checkpoint_list.hpp"

#include <fmt/format.h>

#include <filesystem>

namespace kbrl {

namespace fs = std::filesystem;

std::string rl_run_summary(const std::string& run_dir, uint64_t steps, uint64_t first_step,
                           double seconds) {
  auto cp = read_coordinator_checkpoint(run_dir);
  uint64_t reached = cp ? cp->step : 0;
  bool done = steps > 0 && reached >= steps;
  std::string text;
  if (done && reached == first_step)
    text = fmt::format("The RL run had already reached step {} of {}: nothing to do.", reached,
                       steps);
  else
    text = fmt::format("The RL run {} after step {}{} ({} step(s) in this run, {}).",
                       done ? "finished" : "stopped", reached,
                       steps > 0 ? " of " + std::to_string(steps) : "",
                       reached > first_step ? reached - first_step : 0, human_duration(seconds));

  auto metrics = run_dir + "/metrics.jsonl";
  auto reward = report::metric_by_step(metrics, "reward/mean");
  auto correct = report::metric_by_step(metrics, "rate/correct");
  if (!reward.empty()) {
    auto first = reward.begin(), last = std::prev(reward.end());
    text += fmt::format(" Mean reward {:.3f} at step {} -> {:.3f} at step {}", first->second,
                        first->first, last->second, last->first);
    if (correct.count(first->first) && correct.count(last->first))
      text += fmt::format("; correct {:.0f}% -> {:.0f}%", 100 * correct[first->first],
                          100 * correct[last->first]);
    text += ".";
  }
  auto held_out = report::metric_by_step(metrics, "eval/rate/correct");
  if (!held_out.empty())
    text += fmt::format(" Held-out problems: {:.0f}% correct after step {}.",
                        100 * held_out.rbegin()->second, held_out.rbegin()->first);

  text += " Run directory " + run_dir + ": metrics.jsonl, traces.jsonl, coordinator.json";
  if (fs::exists(run_dir + "/tensorboard"))
    text += "; TensorBoard: tensorboard --logdir " + run_dir + "/tensorboard";
  auto latest = train::latest_checkpoint(fs::path(run_dir) / "learner" / "checkpoints");
  if (latest && *latest)
    text += fmt::format("; newest learner checkpoint {}/learner/checkpoints/{} (policy v{}, its "
                        "adapter in {}/learner/policy/)",
                        run_dir, (*latest)->dir, (*latest)->cursor.policy_version, run_dir);
  text += ".";
  text += done ? " To train further: kbrl-node ... --resume " + run_dir + " rl.steps=N."
               : " Continue it with: kbrl-node ... --resume " + run_dir + ".";
  return text;
}

} // namespace kbrl
