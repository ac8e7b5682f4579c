#pragma once
// The static checks as a pre-screen of files (kbrl-eval-kernel --static-only): which files a
// list of paths names (directories expanded to their .py files), and the findings of each as
// text or JSON. Nothing here starts a process or reads a problem.

#include "runtime/eval/static_checks.hpp"

#include <caf/expected.hpp>

#include <string>
#include <vector>

namespace kbrl::eval {

/// One checked file.
struct screened_file {
  std::string path;
  static_check_result result;
};

/// The files named by `paths`: a file as given, a directory as its *.py files (recursively,
/// sorted). Fails with errc::invalid_argument for a path that does not exist.
caf::expected<std::vector<std::string>> candidate_files(const std::vector<std::string>& paths);

/// Reads and checks every file. Fails when a file cannot be read.
caf::expected<std::vector<screened_file>> screen_files(const std::vector<std::string>& files,
                                                       const static_check_options& opts);

/// One block per file: "path: refused|passed (E errors, W warnings)" and a line per finding
/// ("  error code_bypass line 12: message" + "      | excerpt").
std::string screen_text(const std::vector<screened_file>& files);

/// {"files": [{"path", "rejected", "findings": [{"rule", "severity", "line", "message",
/// "excerpt"}]}], "rejected": N}.
std::string screen_json(const std::vector<screened_file>& files);

} // namespace kbrl::eval
