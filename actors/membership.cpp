#include "actors/membership.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>

namespace kbrl {

namespace {

std::string describe_join(const node_info& info) {
  std::string roles;
  for (auto& r : info.roles)
    roles += (roles.empty() ? "" : ",") + r;
  return "roles " + roles + ", " + std::to_string(info.actors.size()) + " actors, "
         + (info.devices.empty() ? "no devices reported" : info.devices) + ", pid "
         + std::to_string(info.pid);
}

void notify(membership_pointer self) {
  auto view = self->state.table.view();
  for (auto& sub : self->state.subscribers)
    caf::anon_send(sub, view);
}

/// Name of the node whose current node actor has this address, or "".
std::string node_by_address(membership_pointer self, const caf::actor_addr& addr) {
  for (auto& [name, handle] : self->state.node_actors)
    if (handle.address() == addr)
      return name;
  return {};
}

/// The node actor hosting `actor`, or an error a person can act on.
caf::expected<actor_host_actor> host_of(membership_pointer self, const std::string& actor) {
  auto node = node_of_actor(actor);
  const auto* rec = self->state.table.find(node);
  if (rec == nullptr)
    return make_error(errc::unknown_actor,
                      "no node named '" + node + "' has joined (actor names look like node/role)");
  if (rec->state != node_state::up)
    return make_error(errc::node_unreachable, "node " + node + " is " + to_string(rec->state)
                                                + " since "
                                                + format_time_of_day(rec->down_unix_ms) + " ("
                                                + rec->down_reason + ")");
  return self->state.node_actors[node];
}

actor_status own_status(membership_pointer self) {
  auto& st = self->state;
  return st.stats.snapshot("serving", self->mailbox().size(),
                           {{"nodes up", std::to_string(st.table.count(node_state::up))},
                            {"nodes down", std::to_string(st.table.count(node_state::down))},
                            {"nodes stopped", std::to_string(st.table.count(node_state::stopped))},
                            {"revision", std::to_string(st.table.revision())},
                            {"subscribers", std::to_string(st.subscribers.size())}});
}

} // namespace

membership_behavior::behavior_type membership(membership_pointer self,
                                              membership_settings settings) {
  auto& st = self->state;
  st.table = membership_table{settings.cluster, settings.coordinator};
  st.stats.node = settings.coordinator;
  st.stats.role = "membership";
  st.stats.name = actor_name(settings.coordinator, "membership");
  st.settings = std::move(settings);

  self->set_down_handler([self](const caf::down_msg& msg) {
    auto& st = self->state;
    auto& subs = st.subscribers;
    subs.erase(std::remove_if(subs.begin(), subs.end(),
                              [&](const membership_listener_actor& a) {
                                return a.address() == msg.source;
                              }),
               subs.end());
    auto node = node_by_address(self, msg.source);
    if (node.empty())
      return; // an older incarnation's node actor, or a subscriber
    st.node_actors.erase(node);
    auto reason = "connection lost (" + self->system().render(msg.reason) + ")";
    if (st.table.mark_down(node, reason, st.settings.clock())) {
      spdlog::warn("node {} is down: {}", node, reason);
      notify(self);
    }
  });

  self->delayed_send(self, st.settings.heartbeat_interval, tick_atom::value);

  return {
    [self](status_atom) -> actor_status {
      self->state.stats.count();
      return own_status(self);
    },
    [self](control_atom, const std::string& verb,
           const std::vector<std::string>&) -> caf::result<std::string> {
      self->state.stats.count();
      return no_control_verbs(self->state.stats.name, verb);
    },
    [self](register_atom, node_info info, actor_host_actor node) -> membership_view {
      auto& st = self->state;
      st.stats.count();
      auto name = info.name;
      auto summary = describe_join(info);
      auto kind = st.table.register_node(std::move(info), st.settings.clock());
      if (kind == join_kind::first_join)
        spdlog::info("node {} joined ({})", name, summary);
      else
        spdlog::info("node {} rejoined, incarnation {} ({})", name,
                     st.table.find(name)->incarnation, summary);
      st.node_actors[name] = node;
      self->monitor(node);
      notify(self);
      return st.table.view();
    },
    [self](heartbeat_atom, const std::string& node) -> bool {
      auto& st = self->state;
      st.stats.count();
      return st.table.heartbeat(node, st.settings.clock());
    },
    [self](leave_atom, const std::string& node) -> bool {
      auto& st = self->state;
      st.stats.count();
      if (!st.table.mark_stopped(node, st.settings.clock()))
        return false;
      spdlog::info("node {} stopped cleanly", node);
      st.node_actors.erase(node);
      notify(self);
      return true;
    },
    [self](membership_atom) -> membership_view {
      self->state.stats.count();
      return self->state.table.view();
    },
    [self](status_atom, const std::string& actor) -> caf::result<actor_status> {
      self->state.stats.count();
      if (actor == self->state.stats.name)
        return own_status(self);
      auto host = host_of(self, actor);
      if (!host)
        return std::move(host.error());
      auto rp = self->make_response_promise<actor_status>();
      self->request(*host, self->state.settings.forward_timeout, status_atom::value, actor)
        .then([rp](actor_status& st) mutable { rp.deliver(std::move(st)); },
              [rp](caf::error& err) mutable { rp.deliver(std::move(err)); });
      return rp;
    },
    [self](control_atom, const std::string& actor, const std::string& verb,
           const std::vector<std::string>& args) -> caf::result<std::string> {
      self->state.stats.count();
      auto host = host_of(self, actor);
      if (!host)
        return std::move(host.error());
      auto rp = self->make_response_promise<std::string>();
      self->request(*host, self->state.settings.forward_timeout, control_atom::value, actor, verb,
                    args)
        .then([rp](std::string& answer) mutable { rp.deliver(std::move(answer)); },
              [rp](caf::error& err) mutable { rp.deliver(std::move(err)); });
      return rp;
    },
    [self](subscribe_atom, membership_listener_actor subscriber) {
      self->state.stats.count();
      auto& subs = self->state.subscribers;
      if (std::find(subs.begin(), subs.end(), subscriber) == subs.end()) { // a node rejoining
        self->monitor(subscriber);
        subs.push_back(subscriber);
      }
      caf::anon_send(subscriber, self->state.table.view());
    },
    [self](tick_atom) {
      auto& st = self->state;
      auto timeout_ms = static_cast<int64_t>(st.settings.node_timeout.count());
      auto expired = st.table.expire_silent(st.settings.clock(), timeout_ms);
      for (auto& node : expired) {
        spdlog::warn("node {} is down: {}", node, st.table.find(node)->down_reason);
        st.node_actors.erase(node);
      }
      if (!expired.empty())
        notify(self);
      self->delayed_send(self, st.settings.heartbeat_interval, tick_atom::value);
    },
  };
}

} // namespace kbrl
