#include "runtime/eval/slot_table.hpp"

#include <algorithm>

namespace kbrl::eval {

actor_status status_of(const slot_record& slot, const std::string& node) {
  actor_status st;
  st.name = slot.name;
  st.role = "evaluator";
  st.node = node;
  st.state = slot.state == slot_state::running ? (slot.busy ? "evaluating" : "idle")
                                              : to_string(slot.state);
  st.health = slot.state == slot_state::running    ? actor_health::ok
              : slot.state == slot_state::degraded ? actor_health::failed
                                                   : actor_health::starting;
  st.restarts = slot.restarts;
  st.last_error = slot.last_error;
  st.since_unix_ms = slot.since_ms;
  st.messages_handled = slot.evaluations;
  st.details = {{"device", slot.gpu < 0 ? "cpu" : "cuda:" + std::to_string(slot.gpu)},
                {"evaluations", std::to_string(slot.evaluations)},
                {"restarts in window", std::to_string(slot.budget.in_window())}};
  st.commands = {"restart", "kill-worker"};
  return st;
}

slot_record& slot_table::add(std::string name, int gpu) {
  slot_record s;
  s.name = std::move(name);
  s.gpu = gpu;
  s.budget = restart_budget{limit_, window_};
  slots_.push_back(std::move(s));
  return slots_.back();
}

slot_record* slot_table::find(const std::string& name) {
  for (auto& s : slots_)
    if (s.name == name)
      return &s;
  return nullptr;
}

void slot_table::started(slot_record& slot, int64_t now_ms) {
  slot.state = slot_state::running;
  slot.busy = false;
  slot.since_ms = now_ms;
}

slot_record* slot_table::free_slot() {
  for (auto& s : slots_)
    if (s.state == slot_state::running && !s.busy)
      return &s;
  return nullptr;
}

bool slot_table::any_usable() const {
  return std::any_of(slots_.begin(), slots_.end(),
                     [](const slot_record& s) { return s.state != slot_state::degraded; });
}

void slot_table::answered(slot_record& slot, eval_error error) {
  slot.busy = false;
  ++slot.evaluations;
  if (error == eval_error::crashed || error == eval_error::timeout)
    slot.state = slot_state::restarting;
}

loss_outcome slot_table::lost(slot_record& slot, std::string reason, int64_t now_ms) {
  slot.last_error = std::move(reason);
  slot.busy = false;
  if (!slot.budget.try_restart(now_ms)) {
    slot.state = slot_state::degraded;
    slot.since_ms = now_ms;
    return loss_outcome::degraded;
  }
  ++slot.restarts;
  slot.state = slot_state::restarting;
  return loss_outcome::restart;
}

bool slot_table::start_after_back_off(slot_record& slot) {
  if (slot.state != slot_state::degraded)
    return false;
  slot.budget.reset();
  ++slot.restarts;
  return true;
}

actor_health slot_table::health_code() const {
  size_t running = 0, degraded = 0;
  for (auto& s : slots_) {
    running += s.state == slot_state::running ? 1 : 0;
    degraded += s.state == slot_state::degraded ? 1 : 0;
  }
  if (degraded == slots_.size() && !slots_.empty())
    return actor_health::failed;
  return running == slots_.size() ? actor_health::ok : actor_health::degraded;
}

std::string slot_table::health() const {
  switch (health_code()) {
    case actor_health::ok: return "running";
    case actor_health::failed: return "degraded";
    default: return "recovering";
  }
}

} // namespace kbrl::eval
