#pragma once
// The list of a learner's checkpoints, <root>/checkpoints.jsonl (checkpoint.hpp writes and
// restores the checkpoints themselves). Torch-free, so that the run directory's summary,
// kbrl-eval and the node read the list without linking the trainer.

#include <caf/expected.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace simdjson::dom {
class object;
}

namespace kbrl {
class json_writer;
}

namespace kbrl::train {

/// The list's file name inside a checkpoint root, and the file that marks a checkpoint directory
/// complete.
inline constexpr const char* checkpoint_list_file = "checkpoints.jsonl";
inline constexpr const char* trainer_state_file = "trainer_state.json";

/// Where the learner is in its input, saved with the weights.
struct data_cursor {
  uint64_t batches_trained = 0;       ///< trajectory batches consumed
  uint64_t last_batch_id = 0;         ///< id of the last one
  uint64_t last_coordinator_step = 0; ///< its coordinator step
  uint64_t policy_version = 0;        ///< the version the checkpoint's adapter was published as
};

/// One line of checkpoints.jsonl.
struct checkpoint_entry {
  int64_t step = 0;
  std::string dir;       ///< directory name inside the root ("step-000020")
  int64_t unix_ms = 0;
  data_cursor cursor;
};

/// The entries of <root>/checkpoints.jsonl, oldest first. A line cut short by a crash (no closing
/// brace) is skipped; any other bad line is an error (errc::invalid_config naming the line).
/// No file: no entries.
caf::expected<std::vector<checkpoint_entry>> list_checkpoints(const std::filesystem::path& root);

/// The newest listed checkpoint whose directory is complete (trainer_state.json present), or
/// nullopt if there is none.
caf::expected<std::optional<checkpoint_entry>>
latest_checkpoint(const std::filesystem::path& root);

/// Appends `entry` to <root>/checkpoints.jsonl durably (fsync); a line torn by an earlier crash
/// is ended first. errc::io_failure names the file.
caf::expected<void> append_checkpoint_entry(const std::filesystem::path& root,
                                            const checkpoint_entry& entry);

/// The cursor as the "cursor" member of the object being written (checkpoints.jsonl and
/// trainer_state.json both carry it).
void write_data_cursor(json_writer& w, const data_cursor& cursor);

/// Reads the "cursor" member of `obj`; errc::invalid_config names `where` and the field.
caf::expected<data_cursor> read_data_cursor(simdjson::dom::object obj, const std::string& where);

} // namespace kbrl::train
