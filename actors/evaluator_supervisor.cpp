#include "actors/evaluator_supervisor.hpp"

#include "actors/builder.hpp"
#include "actors/evaluator.hpp"
#include "runtime/io/text.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

namespace kbrl {

namespace {

using self_ptr = evaluator_supervisor_pointer;

evaluator_slot* slot_by_name(self_ptr self, const std::string& name) {
  for (auto& s : self->state.slots)
    if (s.name == name)
      return &s;
  return nullptr;
}

evaluator_slot* slot_by_address(self_ptr self, const caf::actor_addr& addr) {
  for (auto& s : self->state.slots)
    if (s.handle && s.handle.address() == addr)
      return &s;
  return nullptr;
}

void spawn_evaluator(self_ptr self, evaluator_slot& slot) {
  actor_stats stats;
  stats.name = slot.name;
  stats.role = "evaluator";
  stats.node = self->state.stats.node;
  stats.restarts = slot.restarts;
  stats.last_error = slot.last_error;
  slot.handle = self->system().spawn<caf::detached>(evaluator, stats, slot.gpu, slot.engine);
  self->monitor(slot.handle);
  (*self->state.live_workers)[slot.name] = slot.handle.address();
  slot.state = eval::slot_state::running;
  slot.busy = false;
  slot.since_ms = now_unix_ms();
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

void run_on(self_ptr self, evaluator_slot& slot, pending_evaluation item) {
  slot.busy = true;
  auto name = slot.name;
  auto asked = slot.handle.address(); // which incarnation of the slot this request went to
  auto timeout = std::chrono::milliseconds(static_cast<int64_t>(item.request.timing.timeout_s * 1000))
                 + self->state.settings.request_margin;
  auto shared = std::make_shared<pending_evaluation>(std::move(item));
  self->request(slot.handle, timeout, evaluate_atom::value, shared->request)
    .then(
      [self, shared, name](eval_result& res) {
        if (auto* s = slot_by_name(self, name)) {
          s->busy = false;
          ++s->evaluations;
          // A crash or timeout verdict means that evaluator is on its way out: give it nothing
          // more until its replacement is up.
          if (res.error == eval_error::crashed || res.error == eval_error::timeout)
            s->state = eval::slot_state::restarting;
        }
        res.build_seconds = shared->build_seconds;
        deliver(self, shared->promise, std::move(res));
        dispatch(self);
      },
      [self, shared, name, asked](caf::error& err) {
        auto* s = slot_by_name(self, name);
        if (s != nullptr)
          s->busy = false;
        if (err == caf::sec::request_receiver_down && shared->attempts < 2) {
          // The evaluator was gone before it could answer: not this candidate's doing. Until
          // its down message arrives and restart_or_degrade() replaces it, the slot's handle is
          // dead: dispatching to it again would spend this candidate's last attempt on the same
          // corpse (seen after a sticky device error, whose evaluator exits after answering).
          if (s != nullptr && s->state == eval::slot_state::running && s->handle
              && s->handle.address() == asked)
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
        if (s != nullptr && s->state == eval::slot_state::running && s->handle)
          self->send_exit(s->handle, caf::exit_reason::kill); // replace it
        dispatch(self);
      });
}

void dispatch(self_ptr self) {
  auto& st = self->state;
  bool any_usable = false;
  for (auto& slot : st.slots) {
    if (slot.state != eval::slot_state::degraded)
      any_usable = true;
    if (st.queue.empty())
      break;
    if (slot.state == eval::slot_state::running && !slot.busy) {
      auto item = std::move(st.queue.front());
      st.queue.pop_front();
      run_on(self, slot, std::move(item));
    }
  }
  if (!any_usable)
    while (!st.queue.empty()) {
      auto& item = st.queue.front();
      deliver(self, item.promise,
              verdict(item.request, eval_error::infrastructure,
                      "every evaluator of " + st.stats.node
                        + " is degraded (restart budget spent); retrying after a back-off"));
      st.queue.pop_front();
    }
}

// -- builds ahead ---------------------------------------------------------------------------------

/// Whether a candidate of this backend builds its extensions when its program is loaded
/// (load_inline), so that a CPU builder can do it; Triton and friends compile on the GPU.
bool builds_ahead(kernel_backend b) {
  return b == kernel_backend::cuda || b == kernel_backend::hip || b == kernel_backend::torch;
}

void spawn_builder(self_ptr self, builder_slot& slot) {
  actor_stats stats;
  stats.name = slot.name;
  stats.role = "builder";
  stats.node = self->state.stats.node;
  stats.restarts = slot.restarts;
  auto opts = self->state.builder_engine;
  opts.worker.scratch_dir += "/" + slot.name.substr(slot.name.find('/') + 1);
  slot.handle = self->system().spawn<caf::detached>(builder, stats, opts);
  self->monitor(slot.handle);
  (*self->state.live_workers)[slot.name] = slot.handle.address();
  slot.busy = false;
}

void dispatch_builds(self_ptr self);

/// A build ended: release its requests to the GPUs, or answer them all with its failure.
void finish_build(self_ptr self, const std::string& key, eval_result res, bool usable) {
  auto& st = self->state;
  auto waiting = std::move(st.building[key]);
  st.building.erase(key);
  if (usable && res.compiled) {
    st.built.insert(key);
    if (!waiting.empty())
      waiting.front().build_seconds = res.compile_seconds;
  } else if (usable && (res.error == eval_error::compile || res.error == eval_error::static_check)) {
    // The verdict came from a CPU builder: its time is build time, no evaluator spent any.
    res.build_seconds = res.compile_seconds;
    res.compile_seconds = 0;
    res.total_seconds = 0;
    st.build_failures[key] = res;
    st.build_failures[key].build_seconds = 0; // later duplicates reuse it for free
    for (size_t i = 0; i < waiting.size(); ++i) {
      auto copy = res;
      copy.id = waiting[i].request.id;
      if (i > 0)
        copy.build_seconds = 0; // duplicates waited for the first copy's build
      deliver(self, waiting[i].promise, std::move(copy));
    }
    return;
  }
  // Built, or the builder could not say (it died or hung): the GPUs take it from here.
  for (auto& item : waiting)
    st.queue.push_back(std::move(item));
  dispatch(self);
}

void dispatch_builds(self_ptr self) {
  auto& st = self->state;
  for (auto& slot : st.builders) {
    if (st.build_queue.empty())
      return;
    if (slot.busy || !slot.handle)
      continue;
    auto key = st.build_queue.front();
    st.build_queue.pop_front();
    auto& first = st.building[key].front().request;
    slot.busy = true;
    ++slot.builds;
    ++st.builds_started;
    auto name = slot.name;
    auto timeout = std::chrono::milliseconds(static_cast<int64_t>(first.timing.timeout_s * 1000))
                   + st.settings.request_margin;
    self->request(slot.handle, timeout, build_atom::value, first)
      .then(
        [self, key, name](eval_result& res) {
          for (auto& b : self->state.builders)
            if (b.name == name)
              b.busy = false;
          bool usable = res.error != eval_error::timeout && res.error != eval_error::crashed
                        && res.error != eval_error::infrastructure;
          finish_build(self, key, std::move(res), usable);
          dispatch_builds(self);
        },
        [self, key, name](caf::error& err) {
          spdlog::warn("{} failed while building: {}; the GPU will build it", name,
                       self->system().render(err));
          for (auto& b : self->state.builders)
            if (b.name == name)
              b.busy = false;
          finish_build(self, key, eval_result{}, false);
          dispatch_builds(self);
        });
  }
}

/// Routes a new request: through a build first where that helps, else straight to the GPUs.
void admit(self_ptr self, pending_evaluation item) {
  auto& st = self->state;
  if (st.builders.empty() || !builds_ahead(item.request.task.backend)) {
    st.queue.push_back(std::move(item));
    dispatch(self);
    return;
  }
  auto key = eval::source_hash(item.request.candidate_source);
  if (st.built.count(key) > 0) {
    ++st.builds_reused;
    st.queue.push_back(std::move(item));
    dispatch(self);
  } else if (auto f = st.build_failures.find(key); f != st.build_failures.end()) {
    ++st.builds_reused;
    auto copy = f->second;
    copy.id = item.request.id;
    deliver(self, item.promise, std::move(copy));
  } else if (auto b = st.building.find(key); b != st.building.end()) {
    ++st.builds_reused; // a duplicate: it waits for the first copy's build
    b->second.push_back(std::move(item));
  } else {
    st.building[key].push_back(std::move(item));
    st.build_queue.push_back(key);
    dispatch_builds(self);
  }
}

void restart_or_degrade(self_ptr self, evaluator_slot& slot, const std::string& reason) {
  auto& set = self->state.settings;
  auto now = now_unix_ms();
  slot.last_error = reason;
  slot.handle = nullptr;
  slot.busy = false;
  if (!slot.budget.try_restart(now)) {
    slot.state = eval::slot_state::degraded;
    slot.since_ms = now;
    spdlog::error("{} degraded: {} restarts within {}; last error: {}; retrying in {}", slot.name,
                  slot.budget.in_window(), format_duration_ms(set.restart_window.count()), reason,
                  format_duration_ms(set.degraded_backoff.count()));
    self->delayed_send(self, set.degraded_backoff, start_atom::value, slot.name);
    dispatch(self);
    return;
  }
  ++slot.restarts;
  slot.state = eval::slot_state::restarting;
  spdlog::warn("{} stopped ({}); starting a fresh one (restart {} in this window)", slot.name,
               reason, slot.budget.in_window());
  spawn_evaluator(self, slot);
  dispatch(self);
}

actor_status slot_status(self_ptr self, const evaluator_slot& slot) {
  actor_status st;
  st.name = slot.name;
  st.role = "evaluator";
  st.node = self->state.stats.node;
  st.state = slot.state == eval::slot_state::running ? (slot.busy ? "evaluating" : "idle")
                                                    : eval::to_string(slot.state);
  st.restarts = slot.restarts;
  st.last_error = slot.last_error;
  st.since_unix_ms = slot.since_ms;
  st.messages_handled = slot.evaluations;
  st.details = {{"device", slot.gpu < 0 ? "cpu" : "cuda:" + std::to_string(slot.gpu)},
                {"evaluations", std::to_string(slot.evaluations)},
                {"restarts in window", std::to_string(slot.budget.in_window())}};
  st.commands = {"restart", "kill-worker"};
  return st;
}

} // namespace

evaluator_supervisor_actor::behavior_type
evaluator_supervisor(evaluator_supervisor_pointer self, actor_stats stats,
                     supervisor_settings settings, std::vector<evaluator_slot> slots,
                     eval::engine_options builder_engine) {
  auto& st = self->state;
  st.stats = std::move(stats);
  st.settings = settings;
  st.slots = std::move(slots);
  for (auto& slot : st.slots)
    slot.budget = eval::restart_budget{settings.restart_limit, settings.restart_window};
  st.builder_engine = std::move(builder_engine);
  for (auto& slot : st.slots)
    spawn_evaluator(self, slot);
  for (size_t i = 0; i < settings.build_workers; ++i) {
    builder_slot b;
    b.name = actor_name(st.stats.node, "builder", static_cast<int>(i));
    st.builders.push_back(std::move(b));
    spawn_builder(self, st.builders.back());
  }

  self->set_down_handler([self](const caf::down_msg& msg) {
    for (auto& b : self->state.builders)
      if (b.handle && b.handle.address() == msg.source) {
        // A builder holds no verdicts (its request's error handler re-routes the candidate):
        // start a fresh one.
        b.last_error = self->system().render(msg.reason);
        ++b.restarts;
        spdlog::warn("{} stopped ({}); starting a fresh one", b.name, b.last_error);
        spawn_builder(self, b);
        dispatch_builds(self);
        return;
      }
    auto* slot = slot_by_address(self, msg.source);
    if (slot == nullptr)
      return;
    restart_or_degrade(self, *slot, self->system().render(msg.reason));
  });
  // Evaluators are detached actors with their own threads: stop them with the supervisor.
  self->attach_functor([live = st.live_workers](const caf::error&) {
    for (auto& [name, addr] : *live)
      if (auto handle = caf::actor_cast<caf::actor>(addr))
        caf::anon_send_exit(handle, caf::exit_reason::user_shutdown);
  });

  return {
    [self](status_atom) -> actor_status {
      auto& st = self->state;
      st.stats.count();
      size_t running = 0, degraded = 0;
      for (auto& s : st.slots) {
        running += s.state == eval::slot_state::running ? 1 : 0;
        degraded += s.state == eval::slot_state::degraded ? 1 : 0;
      }
      std::string state = degraded == st.slots.size() && !st.slots.empty() ? "degraded"
                          : running == st.slots.size()                     ? "running"
                                                                           : "recovering";
      return st.stats.snapshot(
        state, self->mailbox().size(),
        {{"queue", std::to_string(st.queue.size()) + " / "
                     + std::to_string(st.settings.queue_capacity)},
         {"evaluators", std::to_string(st.slots.size())},
         {"answered", std::to_string(st.answered)},
         {"refused (busy)", std::to_string(st.refused_busy)},
         {"restart budget", std::to_string(st.settings.restart_limit) + " per "
                              + format_duration_ms(st.settings.restart_window.count())},
         {"builders", std::to_string(st.builders.size())},
         {"builds", std::to_string(st.builds_started)},
         {"builds reused (duplicates)", std::to_string(st.builds_reused)},
         {"waiting for a build", std::to_string(st.building.size())}},
        {"restart"});
    },
    [self](control_atom, const std::string& verb,
           const std::vector<std::string>& args) -> caf::result<std::string> {
      self->state.stats.count();
      if (verb != "restart" || args.size() != 1)
        return make_error(errc::not_supported,
                          self->state.stats.name + " accepts: restart EVALUATOR-NAME");
      auto* slot = slot_by_name(self, args[0]);
      if (slot == nullptr)
        return make_error(errc::unknown_actor, "no evaluator named " + args[0]);
      if (slot->handle)
        self->send_exit(slot->handle, make_error(errc::worker_crashed, "restarted by hand"));
      return "restarting " + args[0];
    },
    [self](evaluate_atom, eval_request& req) -> caf::result<eval_result> {
      auto& st = self->state;
      st.stats.count();
      size_t waiting = st.queue.size();
      for (auto& [key, items] : st.building)
        waiting += items.size();
      if (waiting >= st.settings.queue_capacity) {
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
      for (auto& s : self->state.slots)
        out.push_back(slot_status(self, s));
      return out;
    },
    [self](status_atom, const std::string& name) -> caf::result<actor_status> {
      self->state.stats.count();
      auto* slot = slot_by_name(self, name);
      if (slot == nullptr)
        return make_error(errc::unknown_actor, "no evaluator named " + name);
      return slot_status(self, *slot);
    },
    [self](control_atom, const std::string& name, const std::string& verb,
           const std::vector<std::string>& args) -> caf::result<std::string> {
      self->state.stats.count();
      auto* slot = slot_by_name(self, name);
      if (slot == nullptr)
        return make_error(errc::unknown_actor, "no evaluator named " + name);
      if (!slot->handle)
        return make_error(errc::node_unreachable, name + " is " + eval::to_string(slot->state));
      if (verb == "restart") {
        self->send_exit(slot->handle, make_error(errc::worker_crashed, "restarted by hand"));
        return "restarting " + name;
      }
      // Relayed, not delegated: an answer sent straight from the (detached) evaluator to a remote
      // requester can sit in the middleman past shutdown with a reference to the evaluator, and
      // the actor system then waits forever for that evaluator's thread.
      auto rp = self->make_response_promise<std::string>();
      self->request(caf::actor_cast<status_actor>(slot->handle), std::chrono::seconds(15),
                    control_atom::value, verb, args)
        .then([rp](std::string& answer) mutable { rp.deliver(std::move(answer)); },
              [rp](caf::error& err) mutable { rp.deliver(std::move(err)); });
      return rp;
    },
    [self](start_atom, const std::string& name) {
      auto* slot = slot_by_name(self, name);
      if (slot == nullptr || slot->state != eval::slot_state::degraded)
        return;
      slot->budget.reset();
      ++slot->restarts;
      spdlog::info("{}: back-off over, starting it again", name);
      spawn_evaluator(self, *slot);
      dispatch(self);
    },
  };
}

} // namespace kbrl
