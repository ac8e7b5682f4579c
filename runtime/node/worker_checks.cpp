#include "runtime/node/worker_checks.hpp"

#include "runtime/io/text.hpp"

namespace kbrl {

const char* to_string(worker_check c) {
  switch (c) {
    case worker_check::unchecked:
      return "unchecked";
    case worker_check::checking:
      return "checking";
    case worker_check::ready:
      return "ready";
    case worker_check::failed:
      return "failed";
  }
  return "unknown";
}

const char* to_string(run_phase p) {
  switch (p) {
    case run_phase::waiting:
      return "waiting";
    case run_phase::running:
      return "running";
    case run_phase::finishing:
      return "finishing";
  }
  return "unknown";
}

bool worker_checks::seen(const std::string& name, const std::string& role,
                         const caf::actor& handle) {
  auto it = workers_.find(name);
  if (it == workers_.end() || it->second.handle != handle) // new, or a new incarnation
    it = workers_.insert_or_assign(name, worker{role, handle, worker_check::unchecked, ""}).first;
  if (it->second.state != worker_check::unchecked)
    return false;
  it->second.state = worker_check::checking;
  return true;
}

const worker_checks::worker* worker_checks::answered(const std::string& name,
                                                     actor_health health,
                                                     const std::string& last_error) {
  auto it = workers_.find(name);
  if (it == workers_.end())
    return nullptr;
  auto& w = it->second;
  if (health == actor_health::failed) {
    w.state = worker_check::failed;
    w.error = last_error.empty() ? "failed" : last_error;
  } else {
    w.state = worker_check::ready;
    w.error.clear();
  }
  return &w;
}

void worker_checks::no_answer(const std::string& name) {
  auto it = workers_.find(name);
  if (it == workers_.end())
    return;
  it->second.state = worker_check::unchecked;
  it->second.error = "loading its model";
}

bool worker_checks::ready(const std::string& name) const {
  auto it = workers_.find(name);
  return it != workers_.end() && it->second.state == worker_check::ready;
}

std::string worker_checks::missing(const std::string& role, const std::string& what) const {
  std::vector<std::string> notes;
  for (auto& [name, w] : workers_)
    if (w.role == role && w.state != worker_check::ready && !w.error.empty())
      notes.push_back(name + (w.state == worker_check::failed ? " failed: " : " is ") + w.error);
  return notes.empty() ? what : what + " (" + join(notes, "; ") + ")";
}

} // namespace kbrl
