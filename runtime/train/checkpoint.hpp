#pragma once
// Learner checkpoints: everything needed to continue training exactly where it stopped.
//
//   <root>/checkpoints.jsonl            one JSON line per checkpoint written, oldest first:
//                                       {"step": 20, "dir": "step-000020", "policy_version": 20,
//                                        "unix_ms": ..., "cursor": {...}}
//   <root>/step-000020/adapter/        the adapter in PEFT's layout (write_lora_adapter)
//   <root>/step-000020/optimizer.safetensors
//                                       exp_avg, exp_avg_sq (flat, in the layout of
//                                       lora_parameters) and the random generators' states:
//                                       rng.dropout (the trainer's), rng.cpu (the default CPU
//                                       generator), rng.cuda (the default generator of the
//                                       trainer's CUDA device, if it runs on one)
//   <root>/step-000020/trainer_state.json
//                                       format, step (= the scheduler's step), the data cursor,
//                                       the slot layout, and the options that shape the run
//
// Writing is atomic: everything goes into a hidden temporary directory beside the final one
// (files synced), which is then renamed into place and only then listed in checkpoints.jsonl. A
// crash at any point leaves the previous checkpoints valid: a temporary directory is never
// listed (and is removed by the next save), and a torn line of checkpoints.jsonl is skipped.
// Resuming picks the newest listed checkpoint whose directory is complete.
//
// Resuming restores the factors, AdamW's moments and step, and the generators, so the next step
// computes exactly what it would have without the interruption (bit-identical on the CPU).

#include "runtime/train/checkpoint_list.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace kbrl::train {

class lora_trainer;

/// Writes a checkpoint of `trainer` and `cursor` under `root` (created if missing) and lists it;
/// with keep_last > 0, afterwards removes the directories of all but the newest keep_last listed
/// checkpoints (their lines stay, the directories go). Fails with errc::io_failure naming the
/// path; the checkpoints written before stay valid.
caf::expected<checkpoint_entry> save_checkpoint(const std::filesystem::path& root,
                                                const lora_trainer& trainer,
                                                const data_cursor& cursor, int64_t keep_last = 0);

/// Restores `trainer` from the checkpoint directory `dir`: adapter, optimiser state, step and
/// generators; returns the saved cursor. The checkpoint must have the trainer's layout (same
/// model, rank and target modules): errc::invalid_argument names what differs; errc::io_failure
/// or errc::invalid_config for unreadable or malformed files. On failure the trainer may be
/// partly restored: start over from a fresh one.
caf::expected<data_cursor> load_checkpoint(const std::filesystem::path& dir,
                                           lora_trainer& trainer);

} // namespace kbrl::train
