#include "runtime/evalcli/evaluator_pool.hpp"

#include <algorithm>

namespace kbrl::evalcli {

evaluator_pool::evaluator_pool(std::vector<pool_node> nodes) {
  for (auto& n : nodes) {
    node_state s;
    s.spec = std::move(n);
    s.spec.slots = std::max<size_t>(1, s.spec.slots);
    nodes_.push_back(std::move(s));
  }
}

evaluator_pool::ticket evaluator_pool::add() {
  auto t = next_ticket_++;
  requests_[t] = request_state{};
  waiting_.push_back(t);
  return t;
}

std::optional<evaluator_pool::assignment> evaluator_pool::next() {
  if (waiting_.empty())
    return std::nullopt;
  std::optional<size_t> best;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    auto& n = nodes_[i];
    if (n.lost || n.held || n.in_flight >= n.spec.slots)
      continue;
    if (!best) {
      best = i;
      continue;
    }
    auto& b = nodes_[*best];
    auto free_n = n.spec.slots - n.in_flight, free_b = b.spec.slots - b.in_flight;
    if (free_n > free_b || (free_n == free_b && n.sent < b.sent))
      best = i;
  }
  if (!best)
    return std::nullopt;
  auto t = waiting_.front();
  waiting_.pop_front();
  requests_[t].node = *best;
  ++nodes_[*best].in_flight;
  ++nodes_[*best].sent;
  return assignment{t, *best};
}

std::optional<int32_t> evaluator_pool::answered(ticket request, size_t node) {
  auto it = requests_.find(request);
  if (it == requests_.end() || it->second.node != node)
    return std::nullopt;
  --nodes_[node].in_flight;
  auto retries = it->second.retries;
  requests_.erase(it);
  return retries;
}

std::vector<evaluator_pool::ticket> evaluator_pool::lose(size_t node) {
  std::vector<ticket> out;
  auto& n = nodes_.at(node);
  if (n.lost)
    return out;
  n.lost = true;
  for (auto& [t, r] : requests_)
    if (r.node == node) {
      r.node.reset();
      ++r.retries;
      out.push_back(t);
    }
  n.in_flight = 0;
  // Oldest first at the front, ahead of the requests that never left.
  for (auto it = out.rbegin(); it != out.rend(); ++it)
    waiting_.push_front(*it);
  return out;
}

void evaluator_pool::put_back(ticket request, size_t node) {
  auto it = requests_.find(request);
  if (it == requests_.end() || it->second.node != node)
    return;
  it->second.node.reset();
  --nodes_[node].in_flight;
  nodes_[node].held = true;
  waiting_.push_front(request);
}

void evaluator_pool::release_held() {
  for (auto& n : nodes_)
    n.held = false;
}

std::vector<evaluator_pool::ticket> evaluator_pool::drain() {
  std::vector<ticket> out;
  if (live_nodes() > 0)
    return out;
  out.assign(waiting_.begin(), waiting_.end());
  for (auto t : out)
    requests_.erase(t);
  waiting_.clear();
  return out;
}

int32_t evaluator_pool::retries(ticket request) const {
  auto it = requests_.find(request);
  return it == requests_.end() ? 0 : it->second.retries;
}

size_t evaluator_pool::live_nodes() const {
  return static_cast<size_t>(
    std::count_if(nodes_.begin(), nodes_.end(), [](const node_state& n) { return !n.lost; }));
}

size_t evaluator_pool::live_slots() const {
  size_t out = 0;
  for (auto& n : nodes_)
    out += n.lost ? 0 : n.spec.slots;
  return out;
}

} // namespace kbrl::evalcli
