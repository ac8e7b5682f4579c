#include "actors/evaluator_supervisor.hpp"

#include "actors/builder.hpp"
#include "actors/evaluator.hpp"
#include "actors/relay.hpp"
#include "actors/supervisor_builds.hpp"
#include "runtime/io/clock.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

namespace kbrl {

supervisor_workers real_workers() {
  supervisor_workers w;
  w.evaluator = [](caf::local_actor* parent, const actor_stats& stats, int gpu,
                   const eval::engine_options& engine) {
    return parent->system().spawn<caf::detached>(evaluator, stats, gpu, engine);
  };
  w.builder = [](caf::local_actor* parent, const actor_stats& stats,
                 const eval::engine_options& engine) {
    return parent->system().spawn<caf::detached>(builder, stats, engine);
  };
  return w;
}

namespace supervision {

using self_ptr = evaluator_supervisor_pointer;

int64_t now_ms(self_ptr self) { return self->state.settings.clock(); }

eval::slot_record* slot_by_address(self_ptr self, const caf::actor_addr& addr) {
  for (auto& [name, handle] : self->state.handles)
    if (handle && handle.address() == addr)
      return self->state.slots.find(name);
  return nullptr;
}

void spawn_evaluator(self_ptr self, eval::slot_record& slot) {
  auto& st = self->state;
  actor_stats stats;
  stats.name = slot.name;
  stats.role = "evaluator";
  stats.node = st.stats.node;
  stats.restarts = slot.restarts;
  stats.last_error = slot.last_error;
  auto handle = st.workers.evaluator(self, stats, slot.gpu, st.engines[slot.name]);
  self->monitor(handle);
  (*st.live_workers)[slot.name] = handle.address();
  st.handles[slot.name] = std::move(handle);
  st.slots.started(slot, now_ms(self));
}

/// A verdict made here, for a request no evaluator could answer.
eval_result verdict(const eval_request& req, eval_error error, std::string why) {
  eval_result r;
  r.id = req.id;
  r.error = error;
  r.trials_total = req.timing.correctness_trials;
  r.error_excerpt = std::move(why);
  return r;
}

void dispatch(self_ptr self);

void deliver(self_ptr self, caf::typed_response_promise<eval_result>& promise, eval_result res) {
  ++self->state.answered;
  promise.deliver(std::move(res));
}

std::chrono::milliseconds deadline_of(self_ptr self, const eval_request& req) {
  return std::chrono::milliseconds(static_cast<int64_t>(req.timing.timeout_s * 1000))
         + self->state.settings.request_margin;
}

void run_on(self_ptr self, eval::slot_record& slot, pending_evaluation item) {
  slot.busy = true;
  auto name = slot.name;
  auto& handle = self->state.handles[name];
  auto asked = handle.address(); // which incarnation of the slot this request went to
  auto shared = std::make_shared<pending_evaluation>(std::move(item));
  self->request(handle, deadline_of(self, shared->request), evaluate_atom::value, shared->request)
    .then(
      [self, shared, name](eval_result& res) {
        if (auto* s = self->state.slots.find(name))
          self->state.slots.answered(*s, res.error);
        res.build_seconds = shared->build_seconds;
        deliver(self, shared->promise, std::move(res));
        dispatch(self);
      },
      [self, shared, name, asked](caf::error& err) {
        auto* s = self->state.slots.find(name);
        if (s != nullptr)
          s->busy = false;
        if (err == caf::sec::request_receiver_down && shared->attempts < 2) {
          // The evaluator was gone before it could answer: not this candidate's doing. Until
          // its down message arrives and restart_or_degrade() replaces it, the slot's handle is
          // dead: dispatching to it again would spend this candidate's last attempt on the same
          // corpse (seen after a sticky device error, whose evaluator exits after answering).
          if (s != nullptr && s->state == eval::slot_state::running
              && self->state.handles[name].address() == asked)
            s->state = eval::slot_state::restarting;
          ++shared->attempts;
          self->state.queue.push_front(std::move(*shared));
          dispatch(self);
          return;
        }
        // It hung past its deadline and margin (or kept losing evaluators): answer here, once.
        auto why = name + " failed while evaluating: " + self->system().render(err);
        spdlog::warn("{}", why);
        deliver(self, shared->promise, verdict(shared->request, eval_error::crashed, why));
        if (s != nullptr && s->state == eval::slot_state::running && self->state.handles[name])
          self->send_exit(self->state.handles[name], caf::exit_reason::kill); // replace it
        dispatch(self);
      });
}

void dispatch(self_ptr self) {
  auto& st = self->state;
  while (!st.queue.empty()) {
    auto* slot = st.slots.free_slot();
    if (slot == nullptr)
      break;
    auto item = std::move(st.queue.front());
    st.queue.pop_front();
    run_on(self, *slot, std::move(item));
  }
  for (; !st.slots.any_usable() && !st.queue.empty(); st.queue.pop_front())
    deliver(self, st.queue.front().promise,
            verdict(st.queue.front().request, eval_error::infrastructure,
                    "every evaluator of " + st.stats.node
                      + " is degraded (restart budget spent); retrying after a back-off"));
}

void restart_or_degrade(self_ptr self, eval::slot_record& slot, const std::string& reason) {
  auto& set = self->state.settings;
  self->state.handles[slot.name] = nullptr;
  if (self->state.slots.lost(slot, reason, now_ms(self)) == eval::loss_outcome::degraded) {
    spdlog::error("{} degraded: {} restarts within {}; last error: {}; retrying in {}", slot.name,
                  slot.budget.in_window(), format_duration_ms(set.restart_window.count()), reason,
                  format_duration_ms(set.degraded_backoff.count()));
    self->delayed_send(self, set.degraded_backoff, start_atom::value, slot.name);
    return dispatch(self);
  }
  spdlog::warn("{} stopped ({}); starting a fresh one (restart {} in this window)", slot.name,
               reason, slot.budget.in_window());
  spawn_evaluator(self, slot);
  dispatch(self);
}

/// A builder holds no verdicts (its request's error handler re-routes the candidate): a lost
/// one is started again at once. A lost evaluator is restarted within its slot's budget.
void worker_down(self_ptr self, const caf::down_msg& msg) {
  if (builder_down(self, msg))
    return;
  if (auto* slot = slot_by_address(self, msg.source))
    restart_or_degrade(self, *slot, self->system().render(msg.reason));
}

actor_status supervisor_status(self_ptr self) {
  auto& st = self->state;
  return st.stats.snapshot(
    st.slots.health_code(), st.slots.health(), self->mailbox().size(),
    {{"queue", std::to_string(st.queue.size()) + " / "
                 + std::to_string(st.settings.queue_capacity)},
     {"evaluators", std::to_string(st.slots.all().size())},
     {"answered", std::to_string(st.answered)},
     {"refused (busy)", std::to_string(st.refused_busy)},
     {"restart budget", std::to_string(st.settings.restart_limit) + " per "
                          + format_duration_ms(st.settings.restart_window.count())},
     {"builders", std::to_string(st.builders.size())},
     {"builder nodes", std::to_string(st.remote.size())},
     {"builds", std::to_string(st.builds.builds_started())},
     {"builds reused (duplicates)", std::to_string(st.builds.builds_reused())},
     {"waiting for a build", std::to_string(st.builds.sources_building())}},
    {"restart"});
}

/// A control verb for one evaluator: `restart` here, anything else relayed to it.
caf::result<std::string> control_slot(self_ptr self, const std::string& name,
                                      const std::string& verb,
                                      const std::vector<std::string>& args) {
  auto* slot = self->state.slots.find(name);
  if (slot == nullptr)
    return make_error(errc::unknown_actor, "no evaluator named " + name);
  auto handle = self->state.handles[name];
  if (!handle)
    return make_error(errc::node_unreachable, name + " is " + eval::to_string(slot->state));
  if (verb == "restart") {
    self->send_exit(handle, make_error(errc::worker_crashed, "restarted by hand"));
    return "restarting " + name;
  }
  return relay_from<std::string>(self, caf::actor_cast<status_actor>(handle),
                                 caf::duration{std::chrono::seconds(15)}, control_atom::value,
                                 verb, args);
}

} // namespace supervision

using namespace supervision;

evaluator_supervisor_behavior::behavior_type
evaluator_supervisor(evaluator_supervisor_pointer self, actor_stats stats,
                     supervisor_settings settings, std::vector<evaluator_slot> slots,
                     eval::engine_options builder_engine) {
  return evaluator_supervisor_with(self, std::move(stats), std::move(settings), std::move(slots),
                                   std::move(builder_engine), real_workers());
}

evaluator_supervisor_behavior::behavior_type
evaluator_supervisor_with(evaluator_supervisor_pointer self, actor_stats stats,
                          supervisor_settings settings, std::vector<evaluator_slot> slots,
                          eval::engine_options builder_engine, supervisor_workers workers) {
  auto& st = self->state;
  st.stats = std::move(stats);
  st.settings = settings;
  st.workers = std::move(workers);
  st.slots = eval::slot_table{settings.restart_limit, settings.restart_window};
  for (auto& s : slots) {
    st.engines[s.name] = s.engine;
    st.slots.add(s.name, s.gpu);
  }
  st.builder_engine = std::move(builder_engine);
  for (auto& slot : st.slots.all())
    spawn_evaluator(self, slot);
  for (size_t i = 0; i < settings.build_workers; ++i) {
    builder_slot b;
    b.name = actor_name(st.stats.node, "builder", static_cast<int>(i));
    st.builders.push_back(std::move(b));
    spawn_builder(self, st.builders.back());
  }
  self->set_down_handler([self](const caf::down_msg& msg) { worker_down(self, msg); });
  // Evaluators are detached actors with their own threads: stop them with the supervisor.
  self->attach_functor([live = st.live_workers](const caf::error&) {
    for (auto& [name, addr] : *live)
      if (auto handle = caf::actor_cast<caf::actor>(addr))
        caf::anon_send_exit(handle, caf::exit_reason::user_shutdown);
  });

  return {
    [self](status_atom) -> actor_status {
      self->state.stats.count();
      return supervisor_status(self);
    },
    [self](control_atom, const std::string& verb,
           const std::vector<std::string>& args) -> caf::result<std::string> {
      self->state.stats.count();
      if (verb != "restart" || args.size() != 1)
        return make_error(errc::not_supported,
                          self->state.stats.name + " accepts: restart EVALUATOR-NAME");
      auto* slot = self->state.slots.find(args[0]);
      if (slot == nullptr)
        return make_error(errc::unknown_actor, "no evaluator named " + args[0]);
      if (auto handle = self->state.handles[args[0]])
        self->send_exit(handle, make_error(errc::worker_crashed, "restarted by hand"));
      return "restarting " + args[0];
    },
    [self](evaluate_atom, eval_request& req) -> caf::result<eval_result> {
      auto& st = self->state;
      st.stats.count();
      if (st.queue.size() + st.builds.waiting() >= st.settings.queue_capacity) {
        ++st.refused_busy;
        return make_error(errc::busy, st.stats.name + " queue is full ("
                                        + std::to_string(st.settings.queue_capacity)
                                        + " waiting); retry later");
      }
      auto rp = self->make_response_promise<eval_result>();
      admit(self, pending_evaluation{std::move(req), rp});
      return rp;
    },
    [self](status_atom, actors_atom) -> std::vector<actor_status> {
      self->state.stats.count();
      std::vector<actor_status> out;
      for (auto& s : self->state.slots.all())
        out.push_back(eval::status_of(s, self->state.stats.node));
      return out;
    },
    [self](status_atom, const std::string& name) -> caf::result<actor_status> {
      self->state.stats.count();
      auto* slot = self->state.slots.find(name);
      if (slot == nullptr)
        return make_error(errc::unknown_actor, "no evaluator named " + name);
      return eval::status_of(*slot, self->state.stats.node);
    },
    [self](control_atom, const std::string& name, const std::string& verb,
           const std::vector<std::string>& args) -> caf::result<std::string> {
      self->state.stats.count();
      return control_slot(self, name, verb, args);
    },
    [self](membership_view& view) { use_build_services(self, view); },
    [self](start_atom, const std::string& name) {
      auto* slot = self->state.slots.find(name);
      if (slot == nullptr || !self->state.slots.start_after_back_off(*slot))
        return;
      spdlog::info("{}: back-off over, starting it again", name);
      spawn_evaluator(self, *slot);
      dispatch(self);
    },
  };
}

} // namespace kbrl
