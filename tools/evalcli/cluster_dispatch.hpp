#pragma once
// kbrl-eval --manifest: sends the scheduler's evaluations to the evaluator supervisors of the
// cluster's evaluator nodes (cluster_evaluators.hpp), as many at once per node as it has
// evaluators, and keeps every evaluation alive when a node goes away. The rules of who gets what
// are evaluator_pool.hpp's; this is the part that talks to the actors. It runs inside the
// scheduler actor (eval_scheduler.hpp), which forwards its down messages and `tick`s here.
//
// A node is lost when
//   - its supervisor goes down: the process was killed or the connection dropped (CAF's
//     middleman reports the remote actor down), or the supervisor itself stopped;
//   - a request to it fails with anything but errc::busy, or passes request_timeout (twice the
//     evaluation timeout plus two minutes: the node's supervisor answers a hung evaluation
//     itself long before).
// Its evaluations in flight go to the remaining nodes at once, each with one more retry (the
// record says how many). errc::busy (the node's queue is full: a training run shares it) is not a
// loss: the evaluation waits here and the node is asked again a second later.
//
// When no node is left, every evaluation still open is answered with errc::node_unreachable
// naming each node and why it was lost; the scheduler then stops the run (finished problems are
// on disk, and the same command continues once nodes are back).

#include "runtime/evalcli/cluster_evaluators.hpp"
#include "runtime/evalcli/evaluator_pool.hpp"

#include <caf/event_based_actor.hpp>
#include <caf/expected.hpp>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kbrl::evalcli {

/// An evaluation's verdict with where it ran.
struct dispatched_verdict {
  eval_result verdict;
  std::string node;    ///< the manifest's node name
  int32_t retries = 0; ///< times it was re-sent after the node holding it was lost
};

class cluster_dispatch : public std::enable_shared_from_this<cluster_dispatch> {
public:
  /// Called once per submitted evaluation: its verdict, or errc::node_unreachable when no
  /// evaluator node is left.
  using handler = std::function<void(caf::expected<dispatched_verdict>)>;

  /// `self` is the actor this runs in; it must outlive the dispatch's pending requests.
  cluster_dispatch(caf::event_based_actor* self, std::vector<remote_evaluator_node> nodes,
                   std::chrono::milliseconds request_timeout);

  /// Monitors every node's supervisor. Call once, before submit().
  void start();

  /// Queues an evaluation; it goes out as soon as a node has a free evaluator.
  void submit(eval_request request, handler then);

  /// A down message of the actor this runs in: true when it was one of the nodes (handled).
  bool on_down(const caf::down_msg& msg);

  /// The delayed `tick` the dispatch asked for: nodes that answered busy are asked again.
  void on_tick();

  /// Evaluators of the nodes still live.
  size_t live_slots() const { return pool_.live_slots(); }

private:
  struct pending {
    eval_request request;
    handler then;
  };

  void pump();
  void send(evaluator_pool::ticket t, size_t node);
  void lose(size_t node, const std::string& why);

  caf::event_based_actor* self_;
  std::vector<remote_evaluator_node> nodes_;
  std::chrono::milliseconds request_timeout_;
  evaluator_pool pool_;
  std::map<evaluator_pool::ticket, pending> pending_;
  std::vector<std::string> lost_;  ///< "ev2 at 127.0.0.1:4300 (why)", in the order lost
  bool tick_scheduled_ = false;
};

} // namespace kbrl::evalcli
