#pragma once
// coordinator.json: the last step an RL run committed, written by the coordinator after each
// commit and adjusted by --resume (runtime/node/rl_run_dir.hpp).

#include "runtime/io/file_store.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <string>

namespace kbrl {

/// What coordinator.json holds: the step reached and the training data cursor.
struct coordinator_checkpoint {
  uint64_t step = 0;
  uint64_t cursor = 0;
  uint64_t policy_version = 0;
};

/// The checkpoint in `text`, the content of the file shown as `path`; errc::invalid_config naming
/// it when it is not the three integers.
caf::expected<coordinator_checkpoint> parse_coordinator_checkpoint(const std::string& text,
                                                                   const std::string& path);

/// Reads coordinator.json from `files`; an absent file is a fresh start (all zero). A file that
/// is not the three integers is errc::invalid_config naming it.
caf::expected<coordinator_checkpoint> read_coordinator_checkpoint(io::file_store& files);

/// Replaces coordinator.json in `files` atomically.
caf::expected<void> write_coordinator_checkpoint(io::file_store& files,
                                                 const coordinator_checkpoint& checkpoint);

/// Reads <run_dir>/coordinator.json; an absent file is a fresh start (all zero).
caf::expected<coordinator_checkpoint> read_coordinator_checkpoint(const std::string& run_dir);

/// Writes <run_dir>/coordinator.json atomically; errc::io_failure naming the path.
caf::expected<void> write_coordinator_checkpoint(const std::string& run_dir,
                                                 const coordinator_checkpoint& checkpoint);

} // namespace kbrl
