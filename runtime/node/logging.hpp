#pragma once
// Logging for a kbrl process: one line per event a person cares about, to stderr and to
// <run dir>/logs/<node>.log, through spdlog's default logger (so any file just calls
// spdlog::info and friends).

#include <caf/expected.hpp>

#include <string>

namespace kbrl {

/// Where and how much a process logs.
struct log_options {
  std::string logger_name;  ///< shown in each line: the node name
  std::string file;         ///< log file path; empty: no file
  std::string level = "info"; ///< trace, debug, info, warn, error, off
  bool console = true;      ///< also log to stderr
  double flush_s = 1.0;     ///< seconds between flushes of the file (warnings flush at once)
};

/// Installs the default logger. Fails with errc::io_failure if the file cannot be opened.
caf::expected<void> setup_logging(const log_options& opts);

} // namespace kbrl
