#pragma once
// The metrics sink: writes a run's metrics to <run dir>/metrics.jsonl, one line per step with
// flat keys (runtime/report/metrics_jsonl.hpp), and to TensorBoard event files in tensorboard/
// beside it.
//
// A step's line is written when the coordinator's commit of that step arrives (its records
// carry progress/done_frac); records of the step that came before (the learner's training
// scalars) are held until then and go on the same line. Records for a step already written (a
// held-out evaluation) get a line of their own; what is held when the sink stops is written
// then. Lines are flushed as written, so a crash loses at most the steps not yet committed.
//
// TensorBoard gets every batch as it comes: per step one event with the scalars and one with
// the distributions as histograms. The file starts with a SessionLog START at the first step
// (after a resume TensorBoard forgets what an earlier life wrote for the steps redone), the
// run's config as hyperparameters (HParams dashboard) and as text (Text dashboard). A
// TensorBoard failure is logged and shown in the status; metrics.jsonl goes on.

#include "actors/actor_stats.hpp"
#include "messages/type_ids.hpp"

#include <caf/typed_event_based_actor.hpp>

#include "runtime/report/tfevents_writer.hpp"

#include <fstream>
#include <map>
#include <optional>
#include <set>

namespace kbrl {

struct metrics_state {
  static inline const char* name = "metrics";
  actor_stats stats;
  std::string path;
  std::ofstream out;
  uint64_t records = 0, lines = 0;
  std::map<uint64_t, std::vector<metric_record>> held; ///< steps not committed yet
  std::set<uint64_t> written;                           ///< steps whose line is written
  std::map<std::string, metric_record> latest; ///< last value of each metric, for status
  std::string run_config_toml;     ///< for TensorBoard's HParams and Text dashboards
  std::string tensorboard_dir;
  std::optional<report::tfevents_writer> tensorboard; ///< none until the first batch, or failed
  std::string tensorboard_error;   ///< why event files are not written, "" while they are

  /// Writes the held steps' lines.
  ~metrics_state();
  /// Writes one line for `step` and flushes.
  void write_line(uint64_t step, const std::vector<metric_record>& records);
};

using metrics_pointer = metrics_actor::stateful_pointer<metrics_state>;

/// Spawn with sys.spawn(metrics_sink, stats, "<run dir>/metrics.jsonl", run config TOML ("":
/// none for TensorBoard)); event files go to <run dir>/tensorboard/. Fails to start (exit reason
/// errc::io_failure) when the file cannot be opened for appending.
metrics_actor::behavior_type metrics_sink(metrics_pointer self, actor_stats stats,
                                          std::string path, std::string run_config_toml);

} // namespace kbrl
