#include "actors/coordinator.hpp"

#include "runtime/episode/coordinator_views.hpp"
#include "runtime/episode/step_health.hpp"
#include "runtime/episode/step_summary.hpp"
#include "runtime/io/clock.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>

namespace kbrl {

using episode::stage;

namespace {

void try_train(coordinator_pointer self);
void confirmed(coordinator_pointer self, const caf::actor_addr& sampler);
bool check_health(coordinator_pointer self, const episode::step_round& r);

const coordinator_settings& settings_of(coordinator_pointer self) {
  return self->state.pipeline->settings();
}

/// Logs the end of the run once.
void announce_if_finished(coordinator_pointer self) {
  auto& st = self->state;
  if (st.finish_announced || st.pipeline->phase() != episode::coordinator_phase::finished)
    return;
  st.finish_announced = true;
  spdlog::info("{}: finished {} steps", st.stats.name, st.pipeline->committed());
}

void save_checkpoint(coordinator_pointer self, uint64_t cursor) {
  auto& st = self->state;
  if (auto ok = st.ledger->record_checkpoint(st.pipeline->checkpoint(cursor)); !ok)
    spdlog::error("{}: could not save coordinator.json: {}", st.stats.name, describe(ok.error()));
}

void record_traces(coordinator_pointer self, const episode::step_round& r) {
  auto& st = self->state;
  if (auto ok = st.ledger->record_round(r); !ok)
    spdlog::error("{}: {}", st.stats.name, describe(ok.error()));
}

/// Takes up samplers and evaluators that joined or left since the last step. Episodes hold the
/// resources they started with, so the coordinator gets a fresh copy instead of changing it.
void refresh_workers(coordinator_pointer self) {
  auto& st = self->state;
  auto& board = settings_of(self).workers;
  if (!board)
    return;
  auto fresh = std::make_shared<episode_resources>(*st.res);
  auto seen = board->copy_if_newer(st.workers_seen, fresh->samplers, fresh->evaluators);
  if (seen == st.workers_seen)
    return;
  st.workers_seen = seen;
  st.res = std::move(fresh);
}

/// One episode actor per problem and sample of the round.
void spawn_episodes(coordinator_pointer self, const episode::round_launch& round) {
  auto& st = self->state;
  auto settings = st.pipeline->episode_settings_for(round);
  uint64_t k = 0;
  for (size_t i = 0; i < round.problems.size(); ++i) {
    for (size_t g = 0; g < round.group_size; ++g) {
      uint64_t id = round.trajectory_id(++k);
      actor_stats stats;
      stats.node = st.stats.node;
      stats.role = "episode";
      stats.name = st.stats.node + "/episode." + std::to_string(id);
      // linked: episodes end with the coordinator rather than running on orphaned
      auto e = self->spawn<caf::linked>(run_episode, stats, settings,
                                        std::shared_ptr<const episode_resources>(st.res), id);
      self->send(e, start_atom::value, round.problems[i], round.group_id(i));
    }
  }
}

/// Starts every step the window allows (step_pipeline.hpp).
void fill_pipeline(coordinator_pointer self) {
  auto& st = self->state;
  for (auto& round : st.pipeline->launches()) {
    refresh_workers(self);
    auto steps = settings_of(self).steps;
    spdlog::info("{}: step {}{} started: {} problems x {} samples", st.stats.name, round.step,
                 steps > 0 ? "/" + std::to_string(steps) : "", round.problems.size(),
                 round.group_size);
    spawn_episodes(self, round);
  }
}

/// Everything a step leaves, in one handler (see "exactly once" in the header).
void commit(coordinator_pointer self, uint64_t key) {
  auto& st = self->state;
  auto& p = *st.pipeline;
  auto in_flight = p.steps_in_flight_besides(key);
  auto r = p.commit(key);
  if (!r)
    return;
  auto timeline = st.timelines->take(*st.clock, r->key, r->step, in_flight, r->stale_dropped);
  st.clock->forget(r->key);
  record_traces(self, *r);
  auto records = episode::commit_records(r->summary, timeline, settings_of(self).steps,
                                         now_unix_ms(), st.stats.name, r->collected, st.reward_of);
  if (st.metrics)
    self->send(st.metrics, metrics_atom::value, records);
  save_checkpoint(self, r->cursor_after);
  // debug: the run actor prints the user's progress line from the same metrics
  const std::chrono::duration<double> running = std::chrono::steady_clock::now() - st.started;
  spdlog::debug("{}", episode::progress_line(*r, p, running.count()));
  if (!check_health(self, *r))
    return;
  if (p.held_out_due())
    spawn_episodes(self, p.held_out());
  fill_pipeline(self);
  try_train(self);
  announce_if_finished(self);
}

/// Says which of a committed step's episodes failed and why; stops the run (false) after
/// max_failed_steps steps in a row where all did: nothing could be sampled or judged.
bool check_health(coordinator_pointer self, const episode::step_round& r) {
  auto& st = self->state;
  auto health = episode::check_step(r.collected);
  auto stop = st.pipeline->record_health(health, r.step);
  if (health.failed > 0)
    spdlog::warn("{}: step {}: {} of {} episodes failed: {}", st.stats.name, r.step,
                 health.failed, health.episodes, health.reasons);
  if (!stop)
    return true;
  st.stats.last_error = *stop;
  self->quit(make_error(errc::invalid_config, st.stats.last_error));
  return false;
}

/// Sends the new policy to every sampler and waits until each confirmed it: a status request
/// queued behind the policy is answered after the sampler applied it. The samplers are the
/// board's of now (a lost one is off it, a new one on it); one that is lost while it is
/// awaited (its node died: the down message comes at once, the answer never) is not waited for.
void publish(coordinator_pointer self, uint64_t key, const policy_update& update) {
  auto& st = self->state;
  refresh_workers(self);
  st.clock->begin(stage::publishing, key);
  st.awaiting_confirmation.clear();
  st.publishing_key = key;
  st.publishing_version = update.version;
  for (auto& s : st.res->samplers)
    st.awaiting_confirmation.insert(s.address());
  if (st.awaiting_confirmation.empty())
    return confirmed(self, caf::actor_addr{});
  for (auto& s : st.res->samplers) {
    self->monitor(s);
    self->send(s, policy_atom::value, update);
    auto addr = s.address();
    self->request(s, settings_of(self).publish_timeout, status_atom::value)
      .then([self, addr](const actor_status&) { confirmed(self, addr); },
            [self, addr, version = update.version](caf::error& err) {
              spdlog::warn("{}: a sampler did not confirm policy version {}: {}",
                           self->state.stats.name, version, self->system().render(err));
              confirmed(self, addr);
            });
  }
}

/// One sampler confirmed (or failed to, or was lost); the step commits once none is awaited.
void confirmed(coordinator_pointer self, const caf::actor_addr& sampler) {
  auto& st = self->state;
  if (!st.pipeline->publishing())
    return;
  if (sampler && st.awaiting_confirmation.erase(sampler) > 0)
    self->demonitor(sampler); // one monitor per publish, so none piles up over the steps
  if (!st.awaiting_confirmation.empty())
    return;
  st.clock->end(stage::publishing, st.publishing_key);
  st.pipeline->published();
  commit(self, st.publishing_key);
}

void sampler_lost(coordinator_pointer self, const caf::down_msg& msg) {
  auto& st = self->state;
  if (!st.pipeline->publishing() || st.awaiting_confirmation.count(msg.source) == 0)
    return;
  spdlog::warn("{}: a sampler was lost before it confirmed policy version {} ({}); not waiting "
               "for it (it gets the newest policy when it joins again)",
               st.stats.name, st.publishing_version, self->system().render(msg.reason));
  confirmed(self, msg.source);
}

/// Sends the next step to the learner once all its trajectories are in.
void try_train(coordinator_pointer self) {
  auto& st = self->state;
  auto& p = *st.pipeline;
  auto order = p.next_training(st.stats.name);
  if (!order)
    return;
  auto key = order->key;
  if (order->stale_dropped > 0)
    spdlog::warn("{}: step {}: {} trajectories sampled more than {} versions before policy v{} "
                 "are not trained on",
                 st.stats.name, key, order->stale_dropped, settings_of(self).max_staleness,
                 p.policy_version());
  if (order->batch.empty()) {
    spdlog::info("step {}: no group left to learn from (equal rewards or too stale); no training",
                 key);
    return commit(self, key);
  }
  st.clock->begin(stage::training, key);
  trajectory_batch batch{key, key, std::move(order->batch)}; // id, coordinator step
  self->request(st.learner, settings_of(self).learner_timeout, train_atom::value, batch)
    .then(
      [self, key](policy_update& update) {
        self->state.clock->end(stage::training, key);
        self->state.pipeline->trained(update.version);
        publish(self, key, update);
      },
      [self, key](caf::error& err) {
        auto& st = self->state;
        st.clock->end(stage::training, key);
        st.pipeline->training_failed();
        st.stats.last_error = "the learner failed on step " + std::to_string(key) + ": "
                              + self->system().render(err);
        spdlog::error("{}: {}", st.stats.name, st.stats.last_error);
        commit(self, key);
      });
}

void finish_held_out(coordinator_pointer self, uint64_t key) {
  auto& st = self->state;
  auto r = st.pipeline->finish_held_out(key);
  if (!r)
    return;
  st.clock->forget(key);
  record_traces(self, *r);
  auto summary = episode::summarize_step(r->collected, r->step, st.stats.name);
  for (auto& m : summary)
    m.name = "eval/" + m.name;
  if (st.metrics)
    self->send(st.metrics, metrics_atom::value, summary);
  spdlog::info("held-out evaluation after step {}: reward {:.3f}, correct {:.0f}%", r->step,
               episode::metric_value(summary, "eval/reward/mean"),
               100 * episode::metric_value(summary, "eval/rate/correct"));
  fill_pipeline(self);
  announce_if_finished(self);
}

/// Starts the pipeline once the learner's version is known.
void begin(coordinator_pointer self, const std::optional<policy_update>& learner_policy) {
  auto& st = self->state;
  auto& p = *st.pipeline;
  std::optional<uint64_t> learner_version;
  if (learner_policy)
    learner_version = learner_policy->version;
  auto start = p.begin(learner_version);
  if (start.checkpoint_changed)
    save_checkpoint(self, p.cursor());
  if (start.kind != episode::start_kind::as_recorded)
    spdlog::warn("{}: {}", st.stats.name, episode::start_note(start, p));
  // Samplers may have started without it (or with an older one, on a resume): episodes that ask
  // for at least this version would wait for it.
  if (learner_policy && learner_policy->version > 0)
    for (auto& s : st.res->samplers)
      self->send(s, policy_atom::value, *learner_policy);
  st.timelines->start(*st.clock);
  spdlog::info("{}: {}", st.stats.name, episode::start_line(p));
  fill_pipeline(self);
}

actor_status status_of(coordinator_pointer self) {
  auto& st = self->state;
  auto phase = st.pipeline->phase();
  return st.stats.snapshot(episode::health_of(phase), to_string(phase), self->mailbox().size(),
                           episode::coordinator_status_details(*st.pipeline,
                                                               st.timelines->recent()),
                           {"pause", "resume", "timeline", "trajectory"});
}

/// Reads coordinator.json (a resume) before the learner is asked.
void open_ledger(coordinator_pointer self) {
  auto& st = self->state;
  auto cp = st.ledger->open();
  if (!cp) {
    spdlog::error("{}: {}; starting from step 0", st.stats.name, describe(cp.error()));
    return;
  }
  if (!*cp)
    return;
  st.pipeline->resume(**cp);
  if ((*cp)->step > 0)
    spdlog::info("{}: resuming after step {} (policy v{})", st.stats.name, (*cp)->step,
                 (*cp)->policy_version);
}

} // namespace

coordinator_actor::behavior_type coordinator(coordinator_pointer self, actor_stats stats,
                                             coordinator_settings settings,
                                             std::shared_ptr<episode_resources> resources,
                                             learner_actor learner, metrics_actor metrics,
                                             std::vector<problem> train_set,
                                             std::vector<problem> eval_set) {
  auto& st = self->state;
  st.stats = std::move(stats);
  st.res = std::move(resources);
  auto traces = episode::trace_options_for(settings.episodes, st.res->tokenizer,
                                           settings.traces_tokens, settings.trace_advantage);
  st.reward_of = traces.reward;
  st.ledger = std::make_unique<episode::step_ledger>(io::directory_store(settings.run_dir),
                                                     settings.traces_max_bytes, traces);
  st.timelines = std::make_unique<episode::timeline_book>(settings.timeline_steps);
  st.res->coordinator = coordinator_actor{self};
  st.clock = std::make_shared<episode::stage_clock>();
  st.res->stages = st.clock;
  st.res->board = settings.workers;
  st.pipeline = std::make_unique<episode::step_pipeline>(std::move(settings),
                                                         std::move(train_set),
                                                         std::move(eval_set));
  // A sampler lost while a policy is published is not waited for (see publish).
  self->set_down_handler([self](const caf::down_msg& msg) { sampler_lost(self, msg); });
  st.learner = std::move(learner);
  st.metrics = std::move(metrics);
  open_ledger(self);
  if (st.learner) {
    self->request(st.learner, settings_of(self).learner_timeout, policy_atom::value)
      .then([self](policy_update& update) { begin(self, update); },
            [self](caf::error& err) {
              spdlog::warn("{}: the learner did not say its policy version ({}); going on with "
                           "v{}",
                           self->state.stats.name, self->system().render(err),
                           self->state.pipeline->policy_version());
              begin(self, std::nullopt);
            });
  } else {
    begin(self, std::nullopt);
  }
  return {
    [self](status_atom) -> actor_status {
      self->state.stats.count();
      return status_of(self);
    },
    [self](control_atom, const std::string& verb,
           const std::vector<std::string>& args) -> caf::result<std::string> {
      auto& st = self->state;
      st.stats.count();
      if (verb == "pause") {
        self->send(self, pause_atom::value);
        return std::string("pausing: the steps under way finish, no new one starts");
      }
      if (verb == "resume") {
        self->send(self, resume_atom::value);
        return std::string("resuming");
      }
      if (verb == "timeline")
        return episode::timeline_view(settings_of(self).mode, st.timelines->recent(), args);
      if (verb == "trajectory")
        return episode::trajectory_view(st.last_trajectories, args, st.res->tokenizer.get(),
                                        settings_of(self).episodes.prompts.format);
      return make_error(errc::not_supported, st.stats.name + " accepts pause, resume, timeline "
                                                             "[N] and trajectory PROBLEM, got '"
                                               + verb + "'");
    },
    [self](trajectory_atom, trajectory& t) {
      auto& st = self->state;
      auto key = t.id / episode::trajectory_id_stride;
      auto round = st.pipeline->rounds().find(key);
      if (round != st.pipeline->rounds().end())
        st.last_trajectories.record(t, round->second.step);
      auto id = t.id;
      switch (st.pipeline->add(std::move(t))) {
        case episode::arrival::unknown_round: // a step no longer under way: dropped
          return spdlog::warn("{}: trajectory {} ignored: no such step", st.stats.name, id);
        case episode::arrival::waiting:
          return;
        case episode::arrival::held_out_complete:
          return finish_held_out(self, key);
        case episode::arrival::step_complete:
          return try_train(self);
      }
    },
    [self](policy_atom, policy_update& u) { self->state.pipeline->saw_policy_version(u.version); },
    [self](pause_atom) {
      spdlog::info("{}: paused: the steps under way finish, no new one starts",
                   self->state.stats.name);
      self->state.pipeline->pause();
    },
    [self](resume_atom) {
      spdlog::info("{}: resumed", self->state.stats.name);
      if (self->state.pipeline->resume_launching())
        fill_pipeline(self);
    },
  };
}

} // namespace kbrl
