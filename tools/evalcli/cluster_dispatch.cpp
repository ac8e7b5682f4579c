#include "tools/evalcli/cluster_dispatch.hpp"

#include "messages/error_codes.hpp"

#include <caf/all.hpp>

#include <cstdio>

namespace kbrl::evalcli {

namespace {

std::vector<pool_node> pool_nodes(const std::vector<remote_evaluator_node>& nodes) {
  std::vector<pool_node> out;
  for (auto& n : nodes)
    out.push_back({n.name, n.address, n.evaluators.size()});
  return out;
}

/// How long a node that answered busy is left alone.
constexpr auto busy_backoff = std::chrono::seconds(1);

} // namespace

cluster_dispatch::cluster_dispatch(caf::event_based_actor* self,
                                   std::vector<remote_evaluator_node> nodes,
                                   std::chrono::milliseconds request_timeout)
  : self_(self), nodes_(std::move(nodes)), request_timeout_(request_timeout),
    pool_(pool_nodes(nodes_)) {}

void cluster_dispatch::start() {
  for (auto& n : nodes_)
    self_->monitor(n.supervisor);
}

void cluster_dispatch::submit(eval_request request, handler then) {
  if (pool_.live_nodes() == 0) {
    std::string text = "every evaluator node is lost:";
    for (auto& l : lost_)
      text += "\n  " + l;
    return then(make_error(errc::node_unreachable, text));
  }
  auto t = pool_.add();
  pending_[t] = pending{std::move(request), std::move(then)};
  pump();
}

void cluster_dispatch::pump() {
  while (auto a = pool_.next())
    send(a->request, a->node);
}

void cluster_dispatch::send(evaluator_pool::ticket t, size_t node) {
  auto me = shared_from_this();
  self_->request(nodes_[node].supervisor, request_timeout_, evaluate_atom::value,
                 pending_.at(t).request)
    .then(
      [me, t, node](eval_result& v) {
        auto retries = me->pool_.answered(t, node);
        if (!retries)
          return; // stale: re-sent after this node was declared lost
        auto it = me->pending_.find(t);
        auto then = std::move(it->second.then);
        me->pending_.erase(it);
        me->pump();
        then(dispatched_verdict{std::move(v), me->nodes_[node].name, *retries});
      },
      [me, t, node](caf::error& err) {
        if (has_code(err, errc::busy)) {
          me->pool_.put_back(t, node);
          if (!me->tick_scheduled_) {
            me->tick_scheduled_ = true;
            me->self_->delayed_send(me->self_, busy_backoff, tick_atom::value);
          }
          return;
        }
        if (me->pool_.lost(node))
          return; // already handled through its down message
        auto why = err == caf::sec::request_timeout
                     ? "no answer within " + std::to_string(me->request_timeout_.count() / 1000)
                         + " s"
                     : me->self_->system().render(err);
        me->lose(node, why);
      });
}

bool cluster_dispatch::on_down(const caf::down_msg& msg) {
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (msg.source == nodes_[i].supervisor.address()) {
      if (!pool_.lost(i))
        lose(i, msg.reason == caf::exit_reason::remote_link_unreachable
                  ? "the connection to it was lost: process gone or network down"
                  : "its evaluator supervisor went down: " + self_->system().render(msg.reason));
      return true;
    }
  return false;
}

void cluster_dispatch::on_tick() {
  tick_scheduled_ = false;
  pool_.release_held();
  pump();
}

void cluster_dispatch::lose(size_t node, const std::string& why) {
  auto& n = nodes_[node];
  lost_.push_back(n.name + " at " + n.address + " (" + why + ")");
  auto moved = pool_.lose(node);
  if (pool_.live_nodes() > 0) {
    std::string rest;
    for (size_t i = 0; i < nodes_.size(); ++i)
      if (!pool_.lost(i))
        rest += (rest.empty() ? "" : ", ") + nodes_[i].name;
    std::fprintf(stderr,
                 "kbrl-eval: warning: lost evaluator node %s at %s (%s); its %zu evaluation(s) "
                 "in flight are sent again to %s\n",
                 n.name.c_str(), n.address.c_str(), why.c_str(), moved.size(), rest.c_str());
    std::fflush(stderr);
    pump();
    return;
  }
  std::string text = "every evaluator node is lost:";
  for (auto& l : lost_)
    text += "\n  " + l;
  // No node takes them any more: every open evaluation is answered with the error.
  pool_.drain();
  auto open = std::move(pending_);
  pending_.clear();
  for (auto& [t, p] : open)
    p.then(make_error(errc::node_unreachable, text));
}

} // namespace kbrl::evalcli
