#include "actors/node.hpp"

#include "actors/learner.hpp"
#include "actors/membership.hpp"
#include "actors/metrics.hpp"
#include "actors/retriever.hpp"
#include "actors/rl_run.hpp"
#include "actors/role_slot.hpp"
#include "actors/sampler.hpp"
#include "runtime/io/text.hpp"
#include "runtime/node/membership_table.hpp"
#include "runtime/node/role_plan.hpp"

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

/// The build cache every worker of the node shares: <eval.cache_dir>/extensions when that key is
/// set (evaluation_engine_options), else the run directory's own.
std::string extensions_dir(const node_settings& s) {
  return s.eval_engine.worker.extensions_dir.empty() ? s.run_dir + "/eval/extensions"
                                                     : s.eval_engine.worker.extensions_dir;
}

/// The engine options of the evaluator on `gpu`: its own scratch directory, the node's shared
/// build cache.
eval::engine_options evaluator_engine(const node_settings& s, const std::string& name, int gpu) {
  auto opts = s.eval_engine;
  auto dir_name = name.substr(name.find('/') + 1);
  opts.worker.scratch_dir = s.run_dir + "/eval/" + dir_name;
  opts.worker.extensions_dir = extensions_dir(s);
  opts.worker.gpu = gpu;
  return opts;
}

/// Spawns the actors of this node's roles and GPUs; returns their entries.
std::vector<actor_entry> spawn_role_actors(node_pointer self) {
  auto& s = self->state.settings;
  std::vector<actor_entry> out;
  std::vector<int> gpus(s.info.gpus.begin(), s.info.gpus.end());
  auto plan = plan_role_actors(s.info.roles, gpus);
  for (auto& planned : plan) {
    actor_stats stats;
    stats.node = s.info.name;
    stats.role = planned.role;
    stats.name = actor_name(s.info.name, planned.role, planned.index);
    caf::actor handle;
    if (planned.role == "metrics") {
      handle = caf::actor_cast<caf::actor>(
        self->spawn(metrics_sink, stats, s.run_dir + "/metrics.jsonl"));
    } else if (planned.role == "evaluator-supervisor") {
      std::vector<evaluator_slot> slots;
      for (auto& p : plan)
        if (p.role == "evaluator") {
          evaluator_slot slot;
          slot.name = actor_name(s.info.name, "evaluator", p.index);
          slot.gpu = p.gpu;
          slot.engine = evaluator_engine(s, slot.name, p.gpu);
          slots.push_back(std::move(slot));
        }
      auto builder_opts = s.eval_engine;
      builder_opts.worker.scratch_dir = s.run_dir + "/eval";
      builder_opts.worker.extensions_dir = extensions_dir(s);
      builder_opts.worker.gpu = -1;
      auto sup = self->spawn(evaluator_supervisor, stats, s.eval_supervision, slots, builder_opts);
      handle = caf::actor_cast<caf::actor>(sup);
      self->monitor(handle);
      out.push_back({stats.name, planned.role, handle});
      for (auto& slot : slots) {
        out.push_back({slot.name, "evaluator", handle});
        self->state.owned_by_handle.insert(slot.name);
      }
      continue;
    } else if (planned.role == "evaluator") {
      continue; // spawned and owned by the supervisor above
    } else if (planned.role == "learner") {
      auto settings = s.learner ? *s.learner : train::learner_settings{};
      settings.gpus = planned.gpus; // one data-parallel replica per GPU
      if (settings.run_dir.empty())
        settings.run_dir = s.run_dir;
      // detached: loading the model and every training step block
      handle = caf::actor_cast<caf::actor>(
        self->spawn<caf::detached>(learner, stats, std::move(settings)));
    } else if (planned.role == "sampler") {
      auto settings = s.sampler;
      settings.gpu = planned.gpu;
      settings.remote.name = stats.name;
      // detached: loading a model blocks for seconds to minutes
      handle = caf::actor_cast<caf::actor>(
        self->spawn<caf::detached>(sampler, stats, std::move(settings)));
    } else {
      std::vector<status_detail> details{
        {"device", planned.gpu < 0 ? "cpu" : "cuda:" + std::to_string(planned.gpu)}};
      handle = caf::actor_cast<caf::actor>(self->spawn(role_slot, stats, details));
    }
    self->monitor(handle);
    out.push_back({stats.name, planned.role, handle});
  }
  // RA-ICL: the coordinator node serves retrieved examples to every node's episodes.
  if (s.is_coordinator && !s.retrieval.index_dir.empty()) {
    actor_stats stats;
    stats.node = s.info.name;
    stats.role = "retriever";
    stats.name = actor_name(s.info.name, "retriever", -1);
    auto handle = caf::actor_cast<caf::actor>(self->spawn<caf::detached>(
      retriever, stats, s.retrieval, retrieval::retriever_options_from(s.retrieval)));
    self->monitor(handle);
    out.push_back({stats.name, "retriever", handle});
  }
  // An RL run: the coordinator node drives it (it finds the other roles through the membership).
  if (s.is_coordinator && s.rl) {
    actor_stats stats;
    stats.node = s.info.name;
    stats.role = "coordinator";
    stats.name = actor_name(s.info.name, "coordinator");
    auto handle = caf::actor_cast<caf::actor>(self->spawn(
      rl_run, stats, s.rl, caf::actor_cast<node_actor>(self), self->state.membership));
    self->monitor(handle);
    out.push_back({stats.name, "coordinator", handle});
  }
  // This node's samplers follow this node's learner; samplers elsewhere subscribe themselves
  // (or are subscribed by the coordinator).
  for (auto& l : out)
    if (l.role == "learner")
      for (auto& sampler : out)
        if (sampler.role == "sampler")
          self->send(caf::actor_cast<learner_actor>(l.handle), subscribe_atom::value,
                     sampler.handle);
  return out;
}

void schedule_join(node_pointer self, milliseconds delay) {
  if (self->state.join_pending || self->state.stopping)
    return;
  self->state.join_pending = true;
  self->delayed_send(self, delay, join_atom::value);
}

void schedule_heartbeat(node_pointer self) {
  if (self->state.heartbeat_pending || self->state.stopping)
    return;
  self->state.heartbeat_pending = true;
  self->delayed_send(self, self->state.settings.heartbeat_interval, heartbeat_atom::value);
}

void on_joined(node_pointer self, membership_actor membership, const membership_view& view) {
  auto& st = self->state;
  st.membership = membership;
  st.joined = true;
  ++st.joins;
  self->monitor(membership);
  size_t up = 0;
  for (auto& n : view.nodes)
    up += n.state == node_state::up ? 1 : 0;
  if (st.join_attempts > 0 || st.joins > 1)
    spdlog::info("joined cluster {} through coordinator {} after {} failed attempt(s); {} node(s) "
                 "up",
                 view.cluster, coordinator_endpoint(st.settings), st.join_attempts, up);
  else
    spdlog::info("joined cluster {} through coordinator {}; {} node(s) up", view.cluster,
                 coordinator_endpoint(st.settings), up);
  st.join_attempts = 0;
  st.last_join_error.clear();
  schedule_heartbeat(self);
}

void on_join_failed(node_pointer self, const std::string& what) {
  auto& st = self->state;
  ++st.join_attempts;
  // Log the first failure, every change of reason, and then every 10th attempt: enough to see
  // what is wrong without flooding the log while a coordinator is still starting.
  if (st.join_attempts == 1 || what != st.last_join_error || st.join_attempts % 10 == 0)
    spdlog::warn("cannot join coordinator {} (attempt {}): {}; retrying",
                 coordinator_endpoint(st.settings), st.join_attempts, what);
  st.last_join_error = what;
  auto delay = milliseconds(std::min<int64_t>(5000, 1000 * st.join_attempts));
  schedule_join(self, delay);
}

void register_with(node_pointer self, membership_actor membership) {
  auto info = self->state.settings.info;
  info.actors = self->state.children;
  info.actors.insert(info.actors.begin(),
                     actor_entry{self->state.stats.name, "node", caf::actor_cast<caf::actor>(self)});
  self->request(membership, request_timeout, register_atom::value, std::move(info),
                caf::actor_cast<caf::actor>(self))
    .then([self, membership](membership_view& view) { on_joined(self, membership, view); },
          [self](caf::error& err) {
            on_join_failed(self, "registration failed: " + self->system().render(err));
          });
}

void try_join(node_pointer self) {
  auto& st = self->state;
  if (st.joined || st.stopping)
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
  std::string state = s.is_coordinator ? "coordinating"
                      : st.joined      ? "joined"
                                       : "joining (attempt " + std::to_string(st.join_attempts + 1)
                                           + (st.last_join_error.empty()
                                                ? ")"
                                                : ": " + st.last_join_error + ")");
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
     {"joins", std::to_string(st.joins)},
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
                      + (st.last_join_error.empty() ? "joining" : st.last_join_error) + ")");
}

/// Asks `target` (within `timeout`) and hands its answer back to our requester. Relayed, not
/// delegated: a delegated request is answered by `target` itself, and when `target` is a detached
/// actor (learner, sampler, retriever) and the requester is on another node, that answer can still
/// sit in the middleman when this node shuts down, holding a reference to `target`; CAF 0.17's
/// actor system then waits forever for the detached actor's thread. Our own answer names this
/// (scheduled) node actor instead.
template <class Answer, class Handle, class... Ts>
caf::result<Answer> relay_from(node_pointer self, const Handle& target, caf::duration timeout,
                               Ts&&... xs) {
  auto rp = self->make_response_promise<Answer>();
  self->request(target, timeout, std::forward<Ts>(xs)...)
    .then([rp](Answer& answer) mutable { rp.deliver(std::move(answer)); },
          [rp](caf::error& err) mutable { rp.deliver(std::move(err)); });
  return rp;
}

/// Asks a child of this node and hands its answer back. No timeout of our own: the requester
/// has one, as it had when the child's answer was delegated.
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

node_actor::behavior_type node(node_pointer self, node_settings settings) {
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
      st.joined = false;
      st.membership = nullptr;
      if (!st.stopping) {
        spdlog::warn("lost the coordinator {} ({}); rejoining", coordinator_endpoint(st.settings),
                     self->system().render(msg.reason));
        schedule_join(self, milliseconds(500));
      }
      return;
    }
    for (auto& c : st.children) {
      if (c.handle.address() == msg.source) {
        if (!st.stopping) {
          st.stats.last_error = c.name + " stopped: " + self->system().render(msg.reason);
          spdlog::error("actor {}", st.stats.last_error);
        }
        return;
      }
    }
  });

  self->send(self, join_atom::value);
  st.join_pending = true;
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
      self->state.join_pending = false;
      try_join(self);
    },
    [self](heartbeat_atom) {
      auto& st = self->state;
      st.heartbeat_pending = false;
      if (!st.joined || st.stopping)
        return;
      ++st.heartbeats;
      self->request(st.membership, st.settings.node_timeout, heartbeat_atom::value,
                    st.settings.info.name)
        .then(
          [self](bool known) {
            auto& st = self->state;
            if (!known && st.joined) {
              spdlog::warn("coordinator {} no longer lists this node as up; registering again",
                           coordinator_endpoint(st.settings));
              st.joined = false;
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
      if (st.stopping)
        return;
      spdlog::info("node {}: {}, {} actors, {} heartbeats sent", st.settings.info.name,
                   own_status(self).state, st.children.size() + 1, st.heartbeats);
      self->delayed_send(self, st.settings.status_interval, tick_atom::value);
    },
    [self](stop_atom) {
      auto& st = self->state;
      if (st.stopping)
        return;
      st.stopping = true;
      spdlog::info("node {} stopping: {} actors", st.settings.info.name, st.children.size() + 1);
      auto finish = [self] {
        stop_children(self);
        self->quit();
      };
      if (st.joined && !st.settings.is_coordinator) {
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
