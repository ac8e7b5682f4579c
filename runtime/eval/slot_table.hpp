#pragma once
// The evaluator slots of a supervisor (actors/evaluator_supervisor.hpp) without the actors: each
// slot's state (slot_state.hpp), whether it is busy, its restarts and restart budget, and what
// a lost worker, an answer and the end of a back-off do to it. Times are passed in, so tests
// drive them by hand (test evaluator_supervisor_logic).

#include "messages/data.hpp"
#include "runtime/eval/restart_budget.hpp"
#include "runtime/eval/slot_state.hpp"

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace kbrl::eval {

struct slot_record {
  std::string name;
  int gpu = -1;
  slot_state state = slot_state::starting;
  bool busy = false;
  uint64_t restarts = 0;
  restart_budget budget;
  std::string last_error;
  int64_t since_ms = 0;
  uint64_t evaluations = 0;
};

/// The slot as kbrl-shell shows an evaluator of node `node`: idle or evaluating while running,
/// its device, evaluations, restarts (and those in the budget's window), last error.
actor_status status_of(const slot_record& slot, const std::string& node);

/// What losing a slot's worker leads to.
enum class loss_outcome : uint8_t {
  restart,  ///< within the budget: start a fresh worker now
  degraded, ///< budget spent: wait for the back-off, then start_after_back_off()
};

class slot_table {
public:
  slot_table(uint32_t restart_limit, std::chrono::milliseconds restart_window)
    : limit_(restart_limit), window_(restart_window) {}

  slot_record& add(std::string name, int gpu);
  slot_record* find(const std::string& name);
  std::vector<slot_record>& all() { return slots_; }
  const std::vector<slot_record>& all() const { return slots_; }

  /// A fresh worker of `slot` is up (at `now_ms`): running and idle.
  void started(slot_record& slot, int64_t now_ms);
  /// The first running slot that is not busy, or nullptr.
  slot_record* free_slot();
  /// Whether any slot is not degraded (else queued requests cannot be served).
  bool any_usable() const;
  /// The slot's worker answered a request with `error`: idle again; a crash or timeout verdict
  /// means that worker is on its way out, so it gets nothing more until it is replaced.
  void answered(slot_record& slot, eval_error error);
  /// The slot's worker is gone (`reason`) at `now_ms`.
  loss_outcome lost(slot_record& slot, std::string reason, int64_t now_ms);
  /// The back-off of a degraded slot is over: its budget starts again (false if not degraded).
  bool start_after_back_off(slot_record& slot);

  /// "running" (every slot), "degraded" (every slot), else "recovering".
  std::string health() const;
  /// The same for programs: ok, failed (every slot degraded), else degraded.
  actor_health health_code() const;

private:
  uint32_t limit_;
  std::chrono::milliseconds window_;
  std::vector<slot_record> slots_;
};

} // namespace kbrl::eval
