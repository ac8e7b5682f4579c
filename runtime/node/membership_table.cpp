#include "runtime/node/membership_table.hpp"

#include "runtime/io/clock.hpp"

#include <algorithm>
#include <utility>

namespace kbrl {

membership_table::membership_table(std::string cluster, std::string coordinator)
  : cluster_(std::move(cluster)), coordinator_(std::move(coordinator)) {
}

join_kind membership_table::register_node(node_info info, int64_t now_ms) {
  ++revision_;
  if (auto* rec = find_mutable(info.name)) {
    rec->info = std::move(info);
    rec->state = node_state::up;
    rec->joined_unix_ms = now_ms;
    rec->last_seen_unix_ms = now_ms;
    rec->down_unix_ms = 0;
    rec->down_reason.clear();
    ++rec->incarnation;
    return join_kind::rejoin;
  }
  node_record rec;
  rec.info = std::move(info);
  rec.state = node_state::up;
  rec.joined_unix_ms = now_ms;
  rec.last_seen_unix_ms = now_ms;
  rec.incarnation = 1;
  nodes_.push_back(std::move(rec));
  return join_kind::first_join;
}

bool membership_table::heartbeat(const std::string& node, int64_t now_ms) {
  auto* rec = find_mutable(node);
  if (rec == nullptr || rec->state != node_state::up)
    return false;
  rec->last_seen_unix_ms = std::max(rec->last_seen_unix_ms, now_ms);
  return true;
}

bool membership_table::mark_down(const std::string& node, const std::string& reason,
                                 int64_t now_ms) {
  auto* rec = find_mutable(node);
  if (rec == nullptr || rec->state != node_state::up)
    return false;
  rec->state = node_state::down;
  rec->down_unix_ms = now_ms;
  rec->down_reason = reason;
  ++revision_;
  return true;
}

bool membership_table::mark_stopped(const std::string& node, int64_t now_ms) {
  auto* rec = find_mutable(node);
  if (rec == nullptr || rec->state != node_state::up)
    return false;
  rec->state = node_state::stopped;
  rec->down_unix_ms = now_ms;
  rec->down_reason = "stopped cleanly";
  ++revision_;
  return true;
}

std::vector<std::string> membership_table::expire_silent(int64_t now_ms, int64_t timeout_ms) {
  std::vector<std::string> expired;
  for (auto& rec : nodes_) {
    if (rec.state == node_state::up && now_ms - rec.last_seen_unix_ms > timeout_ms)
      expired.push_back(rec.info.name);
  }
  for (auto& name : expired) {
    auto silent_ms = now_ms - find(name)->last_seen_unix_ms;
    mark_down(name, "no heartbeat for " + format_duration_ms(silent_ms), now_ms);
  }
  return expired;
}

const node_record* membership_table::find(const std::string& node) const {
  auto i = std::find_if(nodes_.begin(), nodes_.end(),
                        [&](const node_record& r) { return r.info.name == node; });
  return i == nodes_.end() ? nullptr : &*i;
}

node_record* membership_table::find_mutable(const std::string& node) {
  return const_cast<node_record*>(std::as_const(*this).find(node));
}

const node_record* membership_table::find_actor_host(const std::string& actor_name) const {
  return find(node_of_actor(actor_name));
}

membership_view membership_table::view() const {
  return membership_view{cluster_, coordinator_, revision_, nodes_};
}

size_t membership_table::count(node_state state) const {
  return static_cast<size_t>(std::count_if(
    nodes_.begin(), nodes_.end(), [&](const node_record& r) { return r.state == state; }));
}

std::string node_of_actor(const std::string& actor_name) {
  auto slash = actor_name.find('/');
  return slash == std::string::npos ? std::string{} : actor_name.substr(0, slash);
}

} // namespace kbrl
