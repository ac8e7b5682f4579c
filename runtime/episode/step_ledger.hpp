#pragma once
// What the coordinator's committed rounds leave in the run directory, and what a restarted
// coordinator reads back, over an injected file store (tests use an in-memory one that fails
// on demand).
//
// Contract:
//   - open() reads coordinator.json: no file is a fresh run (nullopt); a file that cannot be
//     read or parsed is an error naming it (the coordinator then starts from step 0, saying so).
//   - A committed round is recorded by record_round() (its traces.jsonl lines, in one write)
//     and then, for a training step, record_checkpoint() (coordinator.json, replaced
//     atomically). The checkpoint is written after the traces, so a stop between the two leaves
//     traces of a step that coordinator.json does not count; --resume trims those
//     (runtime/node/rl_run_dir.hpp), and the step is redone with the same problems and ids.
//   - A failed write returns errc::io_failure naming the file and loses nothing already
//     written; the run goes on, and the next record writes again (traces.jsonl then lacks that
//     round's lines, coordinator.json is whole either way).

#include "runtime/episode/coordinator_checkpoint.hpp"
#include "runtime/episode/step_pipeline.hpp"
#include "runtime/episode/trace_log.hpp"
#include "runtime/io/file_store.hpp"

#include <caf/expected.hpp>

#include <memory>
#include <optional>

namespace kbrl::episode {

class step_ledger {
public:
  /// traces.jsonl is rotated past `traces_max_bytes` (trace_log).
  step_ledger(std::shared_ptr<io::file_store> files, uint64_t traces_max_bytes,
              trace_options traces = {});

  caf::expected<std::optional<coordinator_checkpoint>> open();
  caf::expected<void> record_round(const step_round& round);
  caf::expected<void> record_checkpoint(const coordinator_checkpoint& checkpoint);

private:
  std::shared_ptr<io::file_store> files_;
  trace_log traces_;
};

} // namespace kbrl::episode
