#pragma once
// What a finished kbrl-eval run leaves: OUT/results.json, OUT/report.html, the scalars in
// TensorBoard (when asked for), and the summary table on the console.

#include "runtime/evalcli/tensorboard_target.hpp"
#include "runtime/report/eval_metrics.hpp"
#include "runtime/report/results_json.hpp"

#include <caf/expected.hpp>

#include <optional>
#include <string>
#include <vector>

namespace kbrl::evalcli {

/// Writes OUT/results.json and OUT/report.html; the report shows each sample's program, read
/// from `sources_root` (the generations folder the records' `source` paths are in; "": none).
/// Fails with errc::io_failure naming the file.
caf::expected<void> write_run_outputs(const std::string& output_dir, const report::run_info& info,
                                      const report::eval_metrics& metrics,
                                      const std::vector<report::sample_record>& records,
                                      const std::string& sources_root = "");

/// Logs the metrics' scalars (eval/...) at the target's step into a new event file of its log
/// folder; returns the file's path. Fails with errc::io_failure naming it.
caf::expected<std::string> log_to_tensorboard(const tensorboard_target& target,
                                              const report::eval_metrics& metrics);

/// The summary table: overall, per level, per turn (each turn: best of the turns so far),
/// with what the speedups are measured against.
void print_summary(const report::eval_metrics& m, const std::string& reference);

} // namespace kbrl::evalcli
