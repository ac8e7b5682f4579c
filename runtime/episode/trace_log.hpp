#pragma once
// traces.jsonl of an RL run: every trajectory of every committed round (training step or
// held-out round), one JSON line each, written by the coordinator when it commits the round.
//
//   {"step": 3, "eval": false, "trajectory": 3000001, "group": ..., "problem": "...",
//    "end": "...", "turns": [{"index", "policy_version", "prompt_tokens", "completion",
//    "compiled", "correct", "kernelbench_correct", "time_coverage", "error", "error_excerpt",
//    "speedup", "hack_flags", "eval_seconds": {"build", <the worker's phases>..., "total"},
//    "score", "return", "retries"}, ...]}   (eval_seconds only on evaluated turns)
//
// A round's lines are appended together, in trajectory-id order. Past max_bytes the file is
// renamed to traces.1.jsonl (one older file is kept) and a new traces.jsonl is started.

#include "messages/data.hpp"
#include "runtime/episode/episode_settings.hpp"
#include "runtime/rl/advantages.hpp"
#include "runtime/tokenizer/tokenizer.hpp"
#include "runtime/io/file_store.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kbrl::episode {

/// What a traces.jsonl line holds besides the default fields.
struct trace_options {
  bool token_ids = false; ///< prompt and completion token ids, the sampler's log-probabilities
  /// The prompt's text from its token ids (the policy's tokenizer); none: no prompt text.
  std::function<std::string(const std::vector<int32_t>&)> prompt_text;
  /// The program the episode took out of a turn's completion ("" when none); none: no field.
  std::function<std::string(const turn&)> kernel;
  /// A turn's reward by component, each as it counts in the total (the episode's scoring, done
  /// again); none: no breakdown.
  std::function<reward_breakdown(const turn&)> reward;
  /// The learner's advantage estimate, computed for the traces (a group without signal: 0, as
  /// the learner drops it); none: no advantages.
  std::optional<rl::advantage_options> advantage;
};

/// The options an RL run's coordinator writes traces with: prompt text through `tokenizer`
/// (when there is one), rewards by component as `episodes` scores them, advantages as the
/// learner estimates them (`advantage`), token ids when `token_ids`.
trace_options trace_options_for(const episode_settings& episodes,
                                std::shared_ptr<const tok::tokenizer> tokenizer, bool token_ids,
                                std::optional<rl::advantage_options> advantage);

/// The traces.jsonl line of trajectory `t` of round `step` (eval: a held-out round): per turn
/// its index, policy version, prompt (text when `options` can decode it, and length), completion,
/// the verdict (both correctness results, trials, error category: "format" when no program was
/// found, error excerpt, speedup, time coverage, hack flags), score, return and retries.
std::string trace_line(const trajectory& t, uint64_t step, bool eval,
                       const trace_options& options = {});

class trace_log {
public:
  /// The log in `files` (a run directory), rotated past `max_bytes`.
  trace_log(std::shared_ptr<io::file_store> files, uint64_t max_bytes,
            trace_options options = {});
  /// The log in directory `run_dir`.
  trace_log(const std::string& run_dir, uint64_t max_bytes, trace_options options = {});

  /// Appends the lines of `round` (any order; written sorted by id) in one write. Fails with
  /// errc::io_failure naming the file; the next append tries again.
  caf::expected<void> append(std::vector<trajectory> round, uint64_t step, bool eval);

  /// <run_dir>/traces.jsonl.
  std::string path() const { return files_->path_of(file_name); }

  static constexpr const char* file_name = "traces.jsonl";
  static constexpr const char* older_file_name = "traces.1.jsonl";

private:
  std::shared_ptr<io::file_store> files_;
  uint64_t max_bytes_;
  trace_options options_;
};

} // namespace kbrl::episode
