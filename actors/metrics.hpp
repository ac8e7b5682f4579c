#pragma once
// The metrics sink: appends every metric record to <run dir>/metrics.jsonl, one JSON object per
// line ({"step":..,"name":..,"value":..,"unix_ms":..,"source":..}), flushed after each batch
// so a crash loses nothing already received. TensorBoard output joins it with the RL loop.

#include "actors/actor_stats.hpp"
#include "messages/type_ids.hpp"

#include <caf/typed_event_based_actor.hpp>

#include <fstream>
#include <map>

namespace kbrl {

struct metrics_state {
  static inline const char* name = "metrics";
  actor_stats stats;
  std::string path;
  std::ofstream out;
  uint64_t records = 0;
  std::map<std::string, metric_record> latest; ///< last value of each metric, for status
};

using metrics_pointer = metrics_actor::stateful_pointer<metrics_state>;

/// Spawn with sys.spawn(metrics_sink, stats, "<run dir>/metrics.jsonl"). Fails to start (exit
/// reason errc::io_failure) when the file cannot be opened for appending.
metrics_actor::behavior_type metrics_sink(metrics_pointer self, actor_stats stats,
                                          std::string path);

/// One metrics.jsonl line for a record (without the newline).
std::string metric_json_line(const metric_record& r);

} // namespace kbrl
