#pragma once
// Which evaluator node gets which evaluation when kbrl-eval evaluates on a cluster: the
// bookkeeping only (no actors, no sockets), so that cluster_dispatch.hpp is a thin shell and the
// rules below are tested directly.
//
// Each node has as many slots as it has evaluators; at most that many of kbrl-eval's requests are
// on a node at once (the same concurrency kbrl-eval has locally: one candidate per evaluator, the
// rest waiting here, first in first out). A request goes to the live node with the most free
// slots (ties: the node that was sent the fewest so far, then manifest order).
//
// A request's life, drawn before coded:
//
//   add --> waiting --next()--> in flight on node N --answered(t, N)--> done
//              ^                    |
//              |   lose(N): N is gone; its requests wait again at the front, retries + 1
//              '--------------------+
//              |   put_back(t, N): N refused it (busy); waits again at the front, N is held
//              '--------------------'   (takes nothing) until release_held()
//
// An answer from a node that no longer holds the request (it was lost and the request re-sent)
// is stale: answered() says so and the caller drops it, so every request is done once.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kbrl::evalcli {

/// One evaluator node as the pool sees it.
struct pool_node {
  std::string name;    ///< the manifest's node name, e.g. "ev1"
  std::string address; ///< host:port, for messages
  size_t slots = 1;    ///< its evaluators; at least 1
};

class evaluator_pool {
public:
  using ticket = uint64_t;

  struct assignment {
    ticket request;
    size_t node; ///< index into the nodes given to the constructor
  };

  explicit evaluator_pool(std::vector<pool_node> nodes);

  /// A new request; it waits until next() hands it out.
  ticket add();

  /// The oldest waiting request and the node it goes to (now in flight there), or nothing when
  /// no request waits or no live, unheld node has a free slot.
  std::optional<assignment> next();

  /// The answer to `request` came from `node`: when the request was in flight there, it is done
  /// now and this is the number of times it was re-sent (its retries); nothing when the answer
  /// is stale (the request was re-sent elsewhere, or is unknown).
  std::optional<int32_t> answered(ticket request, size_t node);

  /// `node` is gone (process killed, connection lost): it takes no more requests, and the ones
  /// it held wait again at the front of the line with one more retry each. Returns them. A node
  /// lost before is not lost again (returns nothing).
  std::vector<ticket> lose(size_t node);

  /// `node` refused `request` for now (its queue is full: other clients share it): the request
  /// waits again at the front (not a retry) and the node is held until release_held().
  void put_back(ticket request, size_t node);

  /// Every held node takes requests again.
  void release_held();

  /// Requests that no live node can take any more: every node is lost. Empties the line and
  /// returns the requests that were waiting.
  std::vector<ticket> drain();

  int32_t retries(ticket request) const;
  size_t live_nodes() const;
  size_t live_slots() const;
  size_t waiting() const { return waiting_.size(); }
  size_t in_flight(size_t node) const { return nodes_.at(node).in_flight; }
  uint64_t sent(size_t node) const { return nodes_.at(node).sent; }
  bool lost(size_t node) const { return nodes_.at(node).lost; }
  bool held(size_t node) const { return nodes_.at(node).held; }
  size_t size() const { return nodes_.size(); }
  const pool_node& node(size_t i) const { return nodes_.at(i).spec; }

private:
  struct node_state {
    pool_node spec;
    size_t in_flight = 0;
    uint64_t sent = 0;
    bool lost = false;
    bool held = false;
  };
  struct request_state {
    std::optional<size_t> node; ///< where it is in flight; none while waiting
    int32_t retries = 0;
  };

  std::vector<node_state> nodes_;
  std::map<ticket, request_state> requests_; ///< waiting or in flight
  std::deque<ticket> waiting_;
  ticket next_ticket_ = 1;
};

} // namespace kbrl::evalcli
