#pragma once
// The metrics sink: appends every metric record to <run dir>/metrics.jsonl, one JSON object per
// line ({"step":..,"name":..,"value":..,"unix_ms":..,"source":..}, plus "samples":[..] for a
// distribution), flushed after each batch so a crash loses nothing already received.
//
// The same records go to TensorBoard event files in tensorboard/ beside metrics.jsonl: per
// batch and step, one event with every scalar and one with every distribution as a histogram.
// The first event of a sink's file is a SessionLog START at the step of its first batch, so
// after a resume TensorBoard forgets what an earlier life wrote for the steps redone. A
// TensorBoard failure is logged and shown in the status; metrics.jsonl goes on.

#include "actors/actor_stats.hpp"
#include "messages/type_ids.hpp"

#include <caf/typed_event_based_actor.hpp>

#include "runtime/report/tfevents_writer.hpp"

#include <fstream>
#include <map>
#include <optional>

namespace kbrl {

struct metrics_state {
  static inline const char* name = "metrics";
  actor_stats stats;
  std::string path;
  std::ofstream out;
  uint64_t records = 0;
  std::map<std::string, metric_record> latest; ///< last value of each metric, for status
  std::string tensorboard_dir;
  std::optional<report::tfevents_writer> tensorboard; ///< none until the first batch, or failed
  std::string tensorboard_error;   ///< why event files are not written, "" while they are
};

using metrics_pointer = metrics_actor::stateful_pointer<metrics_state>;

/// Spawn with sys.spawn(metrics_sink, stats, "<run dir>/metrics.jsonl"); event files go to
/// <run dir>/tensorboard/. Fails to start (exit reason errc::io_failure) when the file cannot be
/// opened for appending.
metrics_actor::behavior_type metrics_sink(metrics_pointer self, actor_stats stats,
                                          std::string path);

/// One metrics.jsonl line for a record (without the newline).
std::string metric_json_line(const metric_record& r);

} // namespace kbrl
