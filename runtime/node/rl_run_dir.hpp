#pragma once
// What an RL run leaves in its run directory, and getting it ready before a run starts:
//
//   <run>/coordinator.json            step reached, data cursor, policy version (the coordinator)
//   <run>/metrics.jsonl               one line per metric record, each with its step
//   <run>/traces.jsonl, traces.1.jsonl  every trajectory, each line with its step
//   <run>/tensorboard/                event files (the metrics actor)
//   <run>/learner/checkpoints/        learner checkpoints; learner/policy/ the published adapters
//
// A fresh run refuses a directory holding an earlier run (unless run.overwrite removes it), so
// two runs never mix their files. A resumed run (--resume) first makes the directory agree with
// itself: the learner's newest checkpoint is what the weights will be, so coordinator.json is
// moved to that checkpoint's step when their policy versions differ (a crash between the two
// writes); then the lines of metrics.jsonl and traces.jsonl of steps after the resume point
// are removed, since those steps run again. So every step appears once in each file.

#include <caf/expected.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kbrl {

/// The files of an earlier RL run in `run_dir`, as a person reads them ("coordinator.json at
/// step 3", "metrics.jsonl", ...); empty when there are none (logs and config files do not
/// count).
std::vector<std::string> earlier_run_files(const std::string& run_dir);

/// Removes those files (run.overwrite). Fails with errc::io_failure naming the path.
caf::expected<void> remove_earlier_run(const std::string& run_dir);

/// Where a resumed run continues.
struct resume_point {
  uint64_t step = 0;            ///< steps done; the next one is step + 1
  uint64_t cursor = 0;          ///< training problems handed out
  uint64_t policy_version = 0;
  /// Why coordinator.json was changed, "" when it agreed with the learner's checkpoint.
  std::string adjusted;
  size_t metrics_lines_removed = 0, trace_lines_removed = 0;
};

/// Prepares `run_dir` for --resume (see above); `problems_per_step` is B, the problems each
/// step takes from the data order. Fails with errc::invalid_config when coordinator.json or the
/// checkpoint list is unreadable, errc::io_failure when a file cannot be rewritten.
caf::expected<resume_point> prepare_resume(const std::string& run_dir, uint64_t problems_per_step);

/// Keeps the lines of a JSONL file whose "step" is at most `max_step` (and lines without a
/// step); a line cut short by a crash is dropped. Rewrites the file atomically; returns how many
/// lines went. No file: nothing to do.
caf::expected<size_t> trim_jsonl_after_step(const std::string& path, uint64_t max_step);

} // namespace kbrl
