#pragma once
// metrics.jsonl, a run's metrics as tinker-cookbook writes them: one JSON object per line with
// the step and flat keys,
//
//   {"step": 12, "unix_ms": 1764201600000, "reward/mean": 0.41, "learner/loss": 0.013,
//    "hist/reward": [0.0, 0.3, 1.3, ...], ...}
//
// one line per committed step (the coordinator's summary, the learner's training scalars, the
// step timeline), a distribution as the list of its values. Records that arrive for a step
// whose line is written already (a held-out evaluation after the step) get a line of their own
// for that step. Runs written before this layout have one record per line
// ({"step", "name", "value", "unix_ms", "source", "samples"?}); the reader takes both.

#include "messages/data.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kbrl::report {

/// The record whose arrival completes a step's line: the coordinator's commit carries it.
inline constexpr const char* step_committed_metric = "progress/done_frac";

/// That record for committing `step` of `steps` (its value: the share done; 0 without an end).
metric_record commit_record(uint64_t step, uint64_t steps, int64_t unix_ms,
                            const std::string& source);

/// One line: `records` of one step under their names (the last of equal names wins).
std::string metrics_line(uint64_t step, int64_t unix_ms, const std::vector<metric_record>& records);

/// A line read back.
struct metrics_step {
  uint64_t step = 0;
  std::map<std::string, double> scalars;
  std::map<std::string, std::vector<double>> distributions;
};

/// Every line of `path` in file order, in either layout; a line cut short by a crash is
/// skipped. No file: no lines. errc::io_failure when it cannot be read.
caf::expected<std::vector<metrics_step>> read_metrics_jsonl(const std::string& path);

/// step -> the last value of scalar `name` at that step (empty when the file is missing).
std::map<uint64_t, double> metric_by_step(const std::string& path, const std::string& name);

} // namespace kbrl::report
