#pragma once
// How every kbrl tool reads its command line (CLI11): --help and --version print and exit 0; a
// mistake prints CLI11's message plus, for a mistyped flag, the closest one ("did you mean
// '--levels'?"), and ends the program with the tool's documented usage status instead of
// CLI11's own codes (105-109).

#include <optional>
#include <string>

namespace CLI {
class App;
}

namespace kbrl::config {

/// Names `app` `tool` (for its messages) and adds --version ("<tool> <kbrl version>").
void add_version_flag(CLI::App& app, const std::string& tool);

/// " (did you mean '--levels'?)" for the first flag of `message` (CLI11's "The following
/// arguments were not expected: --levls 1") within two edits of one of `app`'s long flags or its
/// subcommands', else "".
std::string mistyped_flag_hint(const CLI::App& app, const std::string& message);

/// Parses argv. nullopt: go on. A value: the status to exit with (0 after --help or --version,
/// `usage_status` after a mistake, which is printed to stderr).
std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv, int usage_status);

} // namespace kbrl::config
