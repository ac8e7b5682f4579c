#pragma once
// The quickstart's command lines for the quickstart suites: kbrl-node run from the repository
// root (config/quickstart/run.toml names its policy and problems relative to it), into a
// temporary run directory, on a free port.

#include "cluster_fixture.hpp"
#include "test_support.hpp"

#include <string>
#include <vector>

namespace kbrl::test {

/// `cd <source root> && kbrl-node --role all --config config/quickstart/run.toml` writing to
/// <dir>/runs/quickstart, plus `extra` overrides.
inline std::vector<std::string> quickstart_command(const temp_dir& dir,
                                                   std::vector<std::string> extra) {
  std::vector<std::string> argv{
    "sh", "-c", "cd \"$0\" && exec \"$@\"", KBRL_SOURCE_DIR,
    "env", "-u", "KERNELBENCH_ROOT", build_dir() + "/kbrl-node", "--role", "all", "--port",
    std::to_string(free_port()), "--config", "config/quickstart/run.toml",
    "run.dir=" + (dir / "runs"), "eval.cache_dir=" + (dir / "cache")};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

/// `kbrl-node --role all --resume <run>` from the repository root, plus `extra` overrides.
inline std::vector<std::string> quickstart_resume_command(const std::string& run,
                                                          std::vector<std::string> extra) {
  std::vector<std::string> argv{
    "sh", "-c", "cd \"$0\" && exec \"$@\"", KBRL_SOURCE_DIR,
    "env", "-u", "KERNELBENCH_ROOT", build_dir() + "/kbrl-node", "--role", "all", "--port",
    std::to_string(free_port()), "--resume", run};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

} // namespace kbrl::test
