#include "actors/rl_run.hpp"

#include "messages/status_details.hpp"
#include "runtime/io/clock.hpp"
#include "runtime/io/elapsed.hpp"
#include "runtime/io/text.hpp"
#include "runtime/node/run_progress.hpp"

#include <caf/all.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>

namespace kbrl {

namespace {

using namespace std::chrono_literals;

constexpr auto tick_interval = 500ms;
constexpr auto wait_log_interval = 5s;
constexpr auto check_timeout = 20s;       ///< a learner or sampler loading its model answers late
constexpr auto checkpoint_timeout = 10min;

/// Ends the node (and with it this process) with `err`: kbrl-node exits 1 and logs why.
void fail(rl_run_pointer self, caf::error err) {
  auto& st = self->state;
  st.stats.last_error = describe(err);
  spdlog::error("the RL run cannot go on: {}", st.stats.last_error);
  self->send_exit(st.node, std::move(err));
  self->quit();
}

/// The actors of up nodes with this role.
std::vector<actor_entry> actors_with_role(const membership_view& view, const std::string& role) {
  std::vector<actor_entry> out;
  for (auto& n : view.nodes)
    if (n.state == node_state::up)
      for (auto& a : n.info.actors)
        if (a.role == role && a.handle)
          out.push_back(a);
  return out;
}

/// Asks a learner or sampler once whether it can work (it answers only after its model loaded).
void check_worker(rl_run_pointer self, const std::string& name, const caf::actor& handle) {
  self->request(caf::actor_cast<status_actor>(handle), check_timeout, status_atom::value)
    .then(
      [self, name](actor_status& status) {
        auto* w = self->state.checks.answered(name, status.health, status.last_error);
        if (w == nullptr || w->state != worker_check::failed)
          return;
        if (w->role == "learner")
          return fail(self, make_error(errc::invalid_config,
                                       "the learner " + name + " cannot train: " + w->error));
        spdlog::error("sampler {} cannot generate: {}", name, w->error);
      },
      [self, name](caf::error&) { self->state.checks.no_answer(name); });
}

/// The checked actors of `role` that are up and ready; starts checks for new ones.
std::vector<actor_entry> ready(rl_run_pointer self, const std::string& role) {
  auto& st = self->state;
  std::vector<actor_entry> out;
  for (auto& a : actors_with_role(st.view, role)) {
    if (st.checks.seen(a.name, role, a.handle))
      check_worker(self, a.name, a.handle);
    if (st.checks.ready(a.name))
      out.push_back(a);
  }
  return out;
}

/// What goes on the worker board for these samplers and evaluators, and the key that tells a
/// change: handles, not names (a node that died and came back has the same actor names but new
/// handles, and its old ones lead nowhere).
struct board_lists {
  std::vector<sampler_actor> samplers;
  std::vector<evaluator_supervisor_actor> evaluators;
  std::vector<std::string> names;
  std::string key;
};

board_lists board_lists_of(const std::vector<actor_entry>& samplers,
                           const std::vector<actor_entry>& evaluators) {
  board_lists out;
  std::vector<std::string> handles;
  for (auto& a : samplers) {
    out.samplers.push_back(caf::actor_cast<sampler_actor>(a.handle));
    out.names.push_back(a.name);
    handles.push_back(caf::to_string(a.handle));
  }
  for (auto& a : evaluators) {
    out.evaluators.push_back(caf::actor_cast<evaluator_supervisor_actor>(a.handle));
    out.names.push_back(a.name);
    handles.push_back(caf::to_string(a.handle));
  }
  out.key = join(handles);
  return out;
}

/// Puts `lists` on the board and subscribes its samplers to the learner (the learner ignores
/// repeats and sends a new subscriber its newest policy).
void put_on_board(rl_run_pointer self, const std::vector<actor_entry>& samplers,
                  board_lists lists) {
  auto& st = self->state;
  for (auto& a : samplers)
    self->send(st.learner, subscribe_atom::value,
               caf::actor_cast<policy_listener_actor>(a.handle));
  st.board->set(std::move(lists.samplers), std::move(lists.evaluators));
  st.board_handles = std::move(lists.key);
}

void start_run(rl_run_pointer self, const actor_entry& learner,
               const std::vector<actor_entry>& samplers, const std::vector<actor_entry>& evaluators,
               const actor_entry& metrics) {
  auto& st = self->state;
  auto& in = *st.in;
  st.learner = caf::actor_cast<learner_actor>(learner.handle);
  st.metrics = caf::actor_cast<metrics_actor>(metrics.handle);
  auto res = std::make_shared<episode_resources>();
  std::vector<std::string> sampler_names, evaluator_names;
  for (auto& s : samplers)
    sampler_names.push_back(s.name);
  for (auto& e : evaluators)
    evaluator_names.push_back(e.name);
  auto lists = board_lists_of(samplers, evaluators);
  res->samplers = lists.samplers;
  res->evaluators = lists.evaluators;
  put_on_board(self, samplers, std::move(lists));
  auto retrievers = actors_with_role(st.view, "retriever");
  if (!retrievers.empty()) {
    res->retriever = caf::actor_cast<retriever_actor>(retrievers.front().handle);
    res->retrieval_k = in.settings.retrieval_k;
    res->retrieval_token_budget = in.settings.retrieval_token_budget;
  }
  res->tokenizer = in.tokenizer;
  res->chat = in.chat;

  auto settings = in.settings.coordinator;
  settings.workers = st.board;
  actor_stats stats;
  stats.name = st.stats.name;
  stats.node = st.stats.node;
  stats.role = "coordinator";
  spdlog::info("the RL run starts after {} of waiting: learner {}, metrics {}, sampler(s) {}, "
               "evaluator supervisor(s) {}, {} training and {} held-out problems{}",
               human_duration(seconds_since(st.waiting_since)), learner.name, metrics.name,
               join(sampler_names), join(evaluator_names), in.train.size(), in.eval.size(),
               retrievers.empty() ? "" : ", retrieval from " + retrievers.front().name);
  st.phase = run_phase::running;
  st.run_started = st.last_step_at = std::chrono::steady_clock::now();
  st.coordinator = self->spawn(coordinator, stats, std::move(settings), std::move(res),
                               st.learner, caf::actor_cast<metrics_actor>(self), in.train,
                               in.eval);
  self->monitor(st.coordinator);
}

/// Waiting: starts the run once everything is there, else notes what is missing.
void try_start(rl_run_pointer self) {
  auto& st = self->state;
  if (st.phase != run_phase::waiting)
    return;
  auto learners = ready(self, "learner");
  auto samplers = ready(self, "sampler");
  auto evaluators = actors_with_role(st.view, "evaluator-supervisor");
  auto metrics = actors_with_role(st.view, "metrics");
  std::vector<std::string> missing;
  if (learners.empty())
    missing.push_back(st.checks.missing("learner", "a learner"));
  if (samplers.empty())
    missing.push_back(st.checks.missing("sampler", "a sampler"));
  if (evaluators.empty())
    missing.push_back("an evaluator");
  if (metrics.empty())
    missing.push_back("the metrics sink (it runs beside the learner)");
  st.missing = join(missing, ", ");
  if (missing.empty())
    start_run(self, learners.front(), samplers, evaluators, metrics.front());
}

/// Running: samplers and evaluators that joined, left or came back go on the board, which
/// episodes read before each request. An empty list is put there too: episodes then wait for
/// one to join (logged here every few seconds) instead of asking a lost one.
void update_board(rl_run_pointer self) {
  auto& st = self->state;
  auto samplers = ready(self, "sampler");
  auto evaluators = actors_with_role(st.view, "evaluator-supervisor");
  auto lists = board_lists_of(samplers, evaluators);
  if (lists.key == st.board_handles)
    return;
  auto names = join(lists.names);
  put_on_board(self, samplers, std::move(lists));
  auto missing = st.board->missing();
  if (!missing.empty())
    spdlog::warn("the run has {} sampler(s) and {} evaluator supervisor(s) now: episodes wait "
                 "for {} to join{}",
                 samplers.size(), evaluators.size(), missing,
                 names.empty() ? "" : " (" + names + " still there)");
  else
    spdlog::info("episodes use {} sampler(s) and {} evaluator supervisor(s) now: {}",
                 samplers.size(), evaluators.size(), names);
}

/// Running with no sampler or no evaluator: says so every few seconds.
void log_missing_workers(rl_run_pointer self) {
  auto& st = self->state;
  auto missing = st.board->missing();
  auto now = std::chrono::steady_clock::now();
  if (missing.empty()) {
    st.workers_missing_since = {};
    return;
  }
  if (st.workers_missing_since == std::chrono::steady_clock::time_point{})
    st.workers_missing_since = now;
  if (now - st.last_wait_log < wait_log_interval)
    return;
  st.last_wait_log = now;
  spdlog::warn("the RL run waits for {} to join (none for {}); `status {}` in kbrl-shell shows "
               "it too",
               missing, human_duration(seconds_since(st.workers_missing_since)), st.stats.name);
}

/// The learner writes its final state unless its newest checkpoint already is it; then the
/// node stops.
void finish(rl_run_pointer self) {
  auto& st = self->state;
  st.phase = run_phase::finishing;
  auto stop_node = [self] {
    spdlog::info("the RL run is done; stopping the node");
    self->send(self->state.node, stop_atom::value);
  };
  self->request(caf::actor_cast<status_actor>(st.learner), check_timeout, status_atom::value)
    .then(
      [self, stop_node](actor_status& status) {
        if (checkpoint_is_current(status.details)) {
          spdlog::info("the learner's newest checkpoint holds its final state: {}",
                       detail_of(status, "last checkpoint"));
          return stop_node();
        }
        self
          ->request(caf::actor_cast<status_actor>(self->state.learner), checkpoint_timeout,
                    control_atom::value, std::string("checkpoint"), std::vector<std::string>{})
          .then(
            [stop_node](std::string& said) {
              spdlog::info("learner: {}", said);
              stop_node();
            },
            [self, stop_node](caf::error& err) {
              spdlog::error("the learner could not write its final checkpoint: {}",
                            self->system().render(err));
              stop_node();
            });
      },
      [self, stop_node](caf::error& err) {
        spdlog::error("the learner did not answer before its final checkpoint: {}",
                      self->system().render(err));
        stop_node();
      });
}

} // namespace

rl_run_behavior::behavior_type rl_run(rl_run_pointer self, actor_stats stats,
                                      std::shared_ptr<const rl_run_inputs> inputs,
                                      node_actor node, membership_actor membership) {
  auto& st = self->state;
  st.stats = std::move(stats);
  st.in = std::move(inputs);
  st.node = std::move(node);
  st.membership = std::move(membership);
  // The coordinator ends with this actor (it is not linked: its death is reported, not shared).
  self->attach_functor([self](const caf::error&) {
    if (self->state.coordinator)
      caf::anon_send_exit(self->state.coordinator, caf::exit_reason::user_shutdown);
  });
  self->set_down_handler([self](const caf::down_msg& msg) {
    auto& st = self->state;
    if (st.coordinator && msg.source == st.coordinator.address() && st.phase != run_phase::finishing)
      fail(self, make_error(errc::internal, "the coordinator stopped: "
                                              + self->system().render(msg.reason)));
  });
  spdlog::info("RL run: {} steps of {} problems x {} samples, {} mode; {} training and {} "
               "held-out problems from {}; waiting for a learner, samplers and evaluators",
               st.in->settings.coordinator.steps, st.in->settings.coordinator.problems_per_step,
               st.in->settings.coordinator.group_size, st.in->settings.mode, st.in->train.size(),
               st.in->eval.size(), st.in->settings.problems.root);
  self->send(st.membership, subscribe_atom::value,
             caf::actor_cast<membership_listener_actor>(self));
  self->request(st.membership, check_timeout, membership_atom::value)
    .then([self](membership_view& view) { self->send(self, std::move(view)); },
          [](caf::error&) {}); // the subscription delivers the next view anyway
  self->delayed_send(self, tick_interval, tick_atom::value);

  return {
    [self](status_atom) -> caf::result<actor_status> {
      auto& st = self->state;
      st.stats.count();
      if (st.coordinator && st.phase == run_phase::running)
        return self->delegate(st.coordinator, status_atom::value);
      return st.stats.snapshot(
        to_string(st.phase), self->mailbox().size(),
        {{"waiting for", st.missing.empty() ? "nothing" : st.missing},
         {"waiting", human_duration(seconds_since(st.waiting_since))},
         {"problems", std::to_string(st.in->train.size()) + " training, "
                        + std::to_string(st.in->eval.size()) + " held out"}});
    },
    [self](control_atom, const std::string& verb,
           const std::vector<std::string>& args) -> caf::result<std::string> {
      auto& st = self->state;
      st.stats.count();
      if (st.coordinator && st.phase == run_phase::running)
        return self->delegate(st.coordinator, control_atom::value, verb, args);
      return make_error(errc::not_supported, st.stats.name + " is " + to_string(st.phase)
                                               + (st.missing.empty() ? "" : " for " + st.missing)
                                               + "; '" + verb + "' works once the run is going");
    },
    [self](metrics_atom, std::vector<metric_record>& batch) {
      auto& st = self->state;
      // A training step's summary holds reward/mean (held-out ones are named eval/...).
      auto summary = std::find_if(batch.begin(), batch.end(),
                                  [](const metric_record& r) { return r.name == "reward/mean"; });
      if (summary != batch.end()) {
        uint64_t step = summary->step;
        auto now = std::chrono::steady_clock::now();
        double took = std::chrono::duration<double>(now - st.last_step_at).count();
        st.last_step_at = now;
        ++st.steps_reported;
        double mean = seconds_since(st.run_started) / static_cast<double>(st.steps_reported);
        spdlog::info("{}", progress_line(batch, step, st.in->settings.coordinator.steps, took,
                                         mean));
      }
      if (st.metrics)
        self->send(st.metrics, metrics_atom::value, std::move(batch));
    },
    [self](membership_view& view) {
      auto& st = self->state;
      if (view.revision < st.view.revision)
        return; // an older answer overtaken by a notification
      st.view = std::move(view);
      if (st.phase == run_phase::waiting)
        try_start(self);
      else if (st.phase == run_phase::running)
        update_board(self);
    },
    [self](tick_atom) {
      auto& st = self->state;
      self->delayed_send(self, tick_interval, tick_atom::value);
      if (st.phase == run_phase::waiting) {
        try_start(self); // checks that answered since the last view
        if (st.phase == run_phase::waiting
            && std::chrono::steady_clock::now() - st.last_wait_log >= wait_log_interval) {
          st.last_wait_log = std::chrono::steady_clock::now();
          spdlog::info("the RL run waits for {} ({} so far)", st.missing,
                       human_duration(seconds_since(st.waiting_since)));
        }
        return;
      }
      if (st.phase != run_phase::running)
        return;
      update_board(self); // samplers that finished loading since the last view
      log_missing_workers(self);
      if (st.status_pending)
        return;
      st.status_pending = true;
      self->request(st.coordinator, check_timeout, status_atom::value)
        .then(
          [self](actor_status& status) {
            self->state.status_pending = false;
            if (status.state == episode::to_string(episode::coordinator_phase::finished)
                && self->state.phase == run_phase::running)
              finish(self);
          },
          [self](caf::error&) { self->state.status_pending = false; });
    },
  };
}

} // namespace kbrl
