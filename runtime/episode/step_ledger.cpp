#include "runtime/episode/step_ledger.hpp"

namespace kbrl::episode {

step_ledger::step_ledger(std::shared_ptr<io::file_store> files, uint64_t traces_max_bytes,
                         trace_options traces)
  : files_(files), traces_(std::move(files), traces_max_bytes, std::move(traces)) {}

caf::expected<std::optional<coordinator_checkpoint>> step_ledger::open() {
  auto text = files_->read("coordinator.json");
  if (!text)
    return text.error();
  if (!*text)
    return std::optional<coordinator_checkpoint>{};
  auto cp = parse_coordinator_checkpoint(**text, files_->path_of("coordinator.json"));
  if (!cp)
    return cp.error();
  return std::optional<coordinator_checkpoint>{*cp};
}

caf::expected<void> step_ledger::record_round(const step_round& round) {
  return traces_.append(round.collected, round.step, round.eval);
}

caf::expected<void> step_ledger::record_checkpoint(const coordinator_checkpoint& checkpoint) {
  return write_coordinator_checkpoint(*files_, checkpoint);
}

} // namespace kbrl::episode
