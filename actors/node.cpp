#include "actors/node.hpp"

#include "actors/learner.hpp"
#include "actors/membership.hpp"
#include "actors/node_roles.hpp"
#include "actors/relay.hpp"
#include "runtime/io/text.hpp"
#include "runtime/node/membership_table.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <spdlog/spdlog.h>

#include <memory>

namespace kbrl {

namespace {

using std::chrono::milliseconds;

constexpr auto request_timeout = std::chrono::seconds(5);
constexpr auto leave_timeout = std::chrono::seconds(2);

std::string coordinator_endpoint(const node_settings& s) {
  return s.coordinator + " at " + s.coordinator_host + ":" + std::to_string(s.coordinator_port);
}

void schedule_join(node_pointer self, milliseconds delay) {
  if (self->state.join.schedule_join())
    self->delayed_send(self, delay, join_atom::value);
}

void schedule_heartbeat(node_pointer self) {
  if (self->state.join.schedule_heartbeat())
    self->delayed_send(self, self->state.settings.heartbeat_interval, heartbeat_atom::value);
}

void on_joined(node_pointer self, membership_actor membership, const membership_view& view) {
  auto& st = self->state;
  st.membership = membership;
  auto failed_before = st.join.succeeded();
  self->monitor(membership);
  subscribe_supervisors(self, membership);
  auto up = std::count_if(view.nodes.begin(), view.nodes.end(),
                          [](auto& n) { return n.state == node_state::up; });
  if (failed_before > 0 || st.join.joins() > 1)
    spdlog::info("joined cluster {} through coordinator {} after {} failed attempt(s); {} node(s) "
                 "up",
                 view.cluster, coordinator_endpoint(st.settings), failed_before, up);
  else
    spdlog::info("joined cluster {} through coordinator {}; {} node(s) up", view.cluster,
                 coordinator_endpoint(st.settings), up);
  schedule_heartbeat(self);
}

void on_join_failed(node_pointer self, const std::string& what) {
  auto& st = self->state;
  auto retry = st.join.failed(what);
  if (retry.log)
    spdlog::warn("cannot join coordinator {} (attempt {}): {}; retrying",
                 coordinator_endpoint(st.settings), st.join.attempts(), what);
  schedule_join(self, retry.delay);
}

void register_with(node_pointer self, membership_actor membership) {
  auto info = self->state.settings.info;
  info.actors = self->state.children;
  info.actors.insert(info.actors.begin(),
                     actor_entry{self->state.stats.name, "node", caf::actor_cast<caf::actor>(self)});
  self->request(membership, request_timeout, register_atom::value, std::move(info),
                caf::actor_cast<actor_host_actor>(self))
    .then([self, membership](membership_view& view) { on_joined(self, membership, view); },
          [self](caf::error& err) {
            on_join_failed(self, "registration failed: " + self->system().render(err));
          });
}

void try_join(node_pointer self) {
  auto& st = self->state;
  if (!st.join.may_join())
    return;
  if (st.settings.is_coordinator) {
    register_with(self, st.membership);
    return;
  }
  auto& s = st.settings;
  self->request(s.connector, request_timeout, caf::connect_atom::value, s.coordinator_host,
                s.coordinator_port)
    .then(
      [self](const caf::node_id&, caf::strong_actor_ptr& ptr, const std::set<std::string>&) {
        if (!ptr) {
          on_join_failed(self, "nothing is published on that port");
          return;
        }
        auto coordinator_node = caf::actor_cast<node_actor>(std::move(ptr));
        self->request(coordinator_node, request_timeout, membership_atom::value)
          .then([self](membership_actor& m) { register_with(self, m); },
                [self](caf::error& err) {
                  on_join_failed(self, "no membership: " + self->system().render(err));
                });
      },
      [self](caf::error& err) { on_join_failed(self, self->system().render(err)); });
}

actor_status own_status(node_pointer self) {
  auto& st = self->state;
  auto& s = st.settings;
  auto state = st.join.state_text(s.is_coordinator);
  std::vector<std::string> gpus;
  for (auto g : s.info.gpus)
    gpus.push_back(std::to_string(g));
  return st.stats.snapshot(
    state, self->mailbox().size(),
    {{"address", s.info.host + ":" + std::to_string(s.info.port)},
     {"roles", join(s.info.roles)},
     {"gpus", gpus.empty() ? "none" : join(gpus)},
     {"devices", s.info.devices},
     {"coordinator", coordinator_endpoint(s)},
     {"actors", std::to_string(st.children.size() + 1)},
     {"joins", std::to_string(st.join.joins())},
     {"heartbeats sent", std::to_string(st.heartbeats)},
     {"pid", std::to_string(s.info.pid)},
     {"run directory", s.run_dir}});
}

/// The child with this full name, or an invalid handle.
caf::actor find_child(node_pointer self, const std::string& name) {
  for (auto& c : self->state.children)
    if (c.name == name)
      return c.handle;
  return {};
}

caf::error unknown_local_actor(node_pointer self, const std::string& name) {
  std::vector<std::string> names{self->state.stats.name};
  for (auto& c : self->state.children)
    names.push_back(c.name);
  return make_error(errc::unknown_actor, "node " + self->state.settings.info.name
                                           + " has no actor '" + name + "' (it has "
                                           + join(names) + ")");
}

caf::error not_joined(node_pointer self) {
  auto& st = self->state;
  return make_error(errc::node_unreachable,
                    "node " + st.settings.info.name + " has not joined its coordinator yet ("
                      + (st.join.last_error().empty() ? "joining" : st.join.last_error())
                      + ")");
}

/// Asks a child of this node and hands its answer back (actors/relay.hpp). No timeout of our
/// own: the requester has one, as it had when the child's answer was delegated.
template <class Answer, class Handle, class... Ts>
caf::result<Answer> relay_from_child(node_pointer self, const Handle& child, Ts&&... xs) {
  return relay_from<Answer>(self, child, caf::infinite, std::forward<Ts>(xs)...);
}

/// Asks the membership (possibly on another node) and hands its answer back to our requester.
template <class Answer, class... Ts>
caf::result<Answer> relay(node_pointer self, Ts&&... xs) {
  if (!self->state.membership)
    return not_joined(self);
  return relay_from<Answer>(self, self->state.membership, caf::duration{std::chrono::seconds(15)},
                            std::forward<Ts>(xs)...);
}

void stop_children(node_pointer self) {
  for (auto& c : self->state.children)
    if (self->state.owned_by_handle.count(c.name) == 0)
      self->send_exit(c.handle, caf::exit_reason::user_shutdown);
}

} // namespace

node_behavior::behavior_type node(node_pointer self, node_settings settings) {
  auto& st = self->state;
  st.settings = std::move(settings);
  st.stats.node = st.settings.info.name;
  st.stats.role = "node";
  st.stats.name = actor_name(st.settings.info.name, "node");

  if (st.settings.is_coordinator) {
    membership_settings ms;
    ms.cluster = st.settings.cluster;
    ms.coordinator = st.settings.info.name;
    ms.heartbeat_interval = st.settings.heartbeat_interval;
    ms.node_timeout = st.settings.node_timeout;
    st.membership = self->spawn(membership, ms);
    self->monitor(st.membership);
    st.children.push_back({actor_name(st.settings.info.name, "membership"), "membership",
                           caf::actor_cast<caf::actor>(st.membership)});
  }
  auto roles = spawn_role_actors(self);
  st.children.insert(st.children.end(), roles.begin(), roles.end());
  // Children are monitored, not linked (a crashing role actor must not take the node down), so
  // they are stopped explicitly when the node actor ends for any reason.
  // Weak addresses, so this clean-up keeps no stopped child alive.
  std::vector<caf::actor_addr> kids;
  for (auto& c : st.children)
    if (st.owned_by_handle.count(c.name) == 0)
      kids.push_back(c.handle.address());
  self->attach_functor([kids](const caf::error&) {
    for (auto& addr : kids)
      if (auto k = caf::actor_cast<caf::actor>(addr))
        caf::anon_send_exit(k, caf::exit_reason::user_shutdown);
  });

  self->set_down_handler([self](const caf::down_msg& msg) {
    auto& st = self->state;
    if (st.membership && msg.source == st.membership.address() && !st.settings.is_coordinator) {
      st.join.lost();
      st.membership = nullptr;
      if (!st.join.stopping()) {
        spdlog::warn("lost the coordinator {} ({}); rejoining", coordinator_endpoint(st.settings),
                     self->system().render(msg.reason));
        schedule_join(self, milliseconds(500));
      }
      return;
    }
    for (auto& c : st.children) {
      if (c.handle.address() == msg.source) {
        if (!st.join.stopping()) {
          st.stats.last_error = c.name + " stopped: " + self->system().render(msg.reason);
          spdlog::error("actor {}", st.stats.last_error);
        }
        return;
      }
    }
  });

  st.join.schedule_join();
  self->send(self, join_atom::value);
  self->delayed_send(self, st.settings.status_interval, tick_atom::value);

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
    [self](status_atom, node_atom) -> caf::result<node_status> {
      auto& st = self->state;
      st.stats.count();
      auto info = st.settings.info;
      info.actors = st.children;
      auto rp = self->make_response_promise<node_status>();
      auto result = std::make_shared<node_status>();
      result->info = std::move(info);
      result->started_unix_ms = st.stats.since_unix_ms;
      result->actors.push_back(own_status(self));
      auto pending = std::make_shared<size_t>(st.children.size());
      if (*pending == 0)
        rp.deliver(*result);
      for (auto& c : st.children) {
        auto name = c.name;
        auto role = c.role;
        auto finish = [rp, result, pending]() mutable {
          if (--*pending == 0)
            rp.deliver(std::move(*result));
        };
        auto on_status = [result, finish](actor_status& s) mutable {
          result->actors.push_back(std::move(s));
          finish();
        };
        auto on_error = [self, result, finish, name, role](caf::error& err) mutable {
          actor_status s;
          s.name = name;
          s.role = role;
          s.node = self->state.settings.info.name;
          s.state = "not answering";
          s.last_error = self->system().render(err);
          result->actors.push_back(std::move(s));
          finish();
        };
        if (self->state.owned_by_handle.count(c.name) > 0)
          self->request(caf::actor_cast<evaluator_supervisor_actor>(c.handle), request_timeout,
                        status_atom::value, c.name)
            .then(on_status, on_error);
        else
          self->request(caf::actor_cast<status_actor>(c.handle), request_timeout,
                        status_atom::value)
            .then(on_status, on_error);
      }
      return rp;
    },
    [self](status_atom, const std::string& name) -> caf::result<actor_status> {
      self->state.stats.count();
      if (name == self->state.stats.name)
        return own_status(self);
      if (auto child = find_child(self, name)) {
        if (self->state.owned_by_handle.count(name) > 0)
          return relay_from_child<actor_status>(
            self, caf::actor_cast<evaluator_supervisor_actor>(child), status_atom::value, name);
        return relay_from_child<actor_status>(self, caf::actor_cast<status_actor>(child),
                                              status_atom::value);
      }
      if (node_of_actor(name) == self->state.settings.info.name)
        return unknown_local_actor(self, name);
      return relay<actor_status>(self, status_atom::value, name);
    },
    [self](control_atom, const std::string& name, const std::string& verb,
           const std::vector<std::string>& args) -> caf::result<std::string> {
      self->state.stats.count();
      if (name == self->state.stats.name)
        return no_control_verbs(self->state.stats.name, verb);
      if (auto child = find_child(self, name)) {
        if (self->state.owned_by_handle.count(name) > 0)
          return relay_from_child<std::string>(
            self, caf::actor_cast<evaluator_supervisor_actor>(child), control_atom::value, name,
            verb, args);
        return relay_from_child<std::string>(self, caf::actor_cast<status_actor>(child),
                                             control_atom::value, verb, args);
      }
      if (node_of_actor(name) == self->state.settings.info.name)
        return unknown_local_actor(self, name);
      return relay<std::string>(self, control_atom::value, name, verb, args);
    },
    [self](nodes_atom) -> caf::result<membership_view> {
      self->state.stats.count();
      return relay<membership_view>(self, membership_atom::value);
    },
    [self](membership_atom) -> caf::result<membership_actor> {
      self->state.stats.count();
      if (!self->state.membership)
        return not_joined(self);
      return self->state.membership;
    },
    [self](config_atom) -> std::string {
      self->state.stats.count();
      return self->state.settings.run_config_toml;
    },
    [self](join_atom) {
      self->state.join.join_fired();
      try_join(self);
    },
    [self](heartbeat_atom) {
      auto& st = self->state;
      st.join.heartbeat_fired();
      if (!st.join.joined() || st.join.stopping())
        return;
      ++st.heartbeats;
      self->request(st.membership, st.settings.node_timeout, heartbeat_atom::value,
                    st.settings.info.name)
        .then(
          [self](bool known) {
            auto& st = self->state;
            if (!known && st.join.joined()) {
              spdlog::warn("coordinator {} no longer lists this node as up; registering again",
                           coordinator_endpoint(st.settings));
              st.join.lost();
              try_join(self);
              return;
            }
            schedule_heartbeat(self);
          },
          [self](caf::error& err) {
            auto& st = self->state;
            spdlog::warn("heartbeat to coordinator {} failed: {}",
                         coordinator_endpoint(st.settings), self->system().render(err));
            schedule_heartbeat(self);
          });
    },
    [self](tick_atom) {
      auto& st = self->state;
      if (st.join.stopping())
        return;
      // On the console only when the node's state or actors changed; every tick in debug logs.
      auto line = own_status(self).state + ", " + std::to_string(st.children.size() + 1)
                  + " actors";
      spdlog::log(line == st.last_tick_line ? spdlog::level::debug : spdlog::level::info,
                  "node {}: {}, {} heartbeats sent", st.settings.info.name, line, st.heartbeats);
      st.last_tick_line = std::move(line);
      self->delayed_send(self, st.settings.status_interval, tick_atom::value);
    },
    [self](stop_atom) {
      auto& st = self->state;
      if (!st.join.stop())
        return;
      spdlog::info("node {} stopping: {} actors", st.settings.info.name, st.children.size() + 1);
      auto finish = [self] {
        stop_children(self);
        self->quit();
      };
      if (st.join.joined() && !st.settings.is_coordinator) {
        self->request(st.membership, leave_timeout, leave_atom::value, st.settings.info.name)
          .then([finish](bool) { finish(); },
                [finish](caf::error&) { finish(); });
      } else {
        finish();
      }
    },
  };
}

} // namespace kbrl
