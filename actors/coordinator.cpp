#include "actors/coordinator.hpp"

#include "runtime/episode/step_health.hpp"
#include "runtime/episode/step_summary.hpp"
#include "runtime/episode/trajectory_view.hpp"
#include "runtime/io/file_io.hpp"
#include "runtime/io/json_writer.hpp"
#include "runtime/io/text.hpp"

#include <caf/all.hpp>
#include <simdjson.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

namespace kbrl {

namespace fs = std::filesystem;

using episode::stage;

namespace {

void fill_pipeline(coordinator_pointer self);
void refresh_workers(coordinator_pointer self);
void try_train(coordinator_pointer self);
void confirmed(coordinator_pointer self, const caf::actor_addr& sampler);
bool check_health(coordinator_pointer self, const step_round& r);

double metric(const std::vector<metric_record>& records, const std::string& name) {
  for (auto& r : records)
    if (r.name == name)
      return r.value;
  return 0;
}

bool async_mode(const coordinator_state& st) {
  return st.settings.mode == coordinator_mode::async;
}

/// How many steps past the next one to commit may have episodes under way.
uint64_t window(const coordinator_state& st) {
  return async_mode(st) ? st.settings.max_staleness : 0;
}

bool held_out_under_way(const coordinator_state& st) {
  return std::any_of(st.rounds.begin(), st.rounds.end(),
                     [](const auto& kv) { return kv.second.eval; });
}

void update_phase(coordinator_pointer self) {
  auto& st = self->state;
  auto before = st.phase;
  bool steps_under_way = std::any_of(st.rounds.begin(), st.rounds.end(),
                                     [](const auto& kv) { return !kv.second.eval; });
  if (st.starting)
    st.phase = episode::coordinator_phase::starting;
  else if (st.training)
    st.phase = episode::coordinator_phase::training;
  else if (st.publishing)
    st.phase = episode::coordinator_phase::publishing;
  else if (steps_under_way)
    st.phase = episode::coordinator_phase::episodes;
  else if (held_out_under_way(st))
    st.phase = episode::coordinator_phase::evaluating;
  else if (st.settings.steps > 0 && st.step >= st.settings.steps)
    st.phase = episode::coordinator_phase::finished;
  else if (st.paused)
    st.phase = episode::coordinator_phase::paused;
  else
    st.phase = episode::coordinator_phase::idle;
  if (st.phase == episode::coordinator_phase::finished
      && before != episode::coordinator_phase::finished)
    spdlog::info("{}: finished {} steps", st.stats.name, st.step);
}

/// Appends a round's trajectories to traces.jsonl, all at once (a round is recorded whole or
/// not at all).
void write_traces(coordinator_pointer self, const step_round& r) {
  auto& st = self->state;
  if (auto ok = st.traces->append(r.collected, r.step, r.eval); !ok)
    spdlog::error("{}: {}", st.stats.name, describe(ok.error()));
}

void save_checkpoint(coordinator_pointer self, uint64_t cursor) {
  auto& st = self->state;
  if (auto ok = write_coordinator_checkpoint(st.settings.run_dir,
                                             {st.step, cursor, st.policy_version});
      !ok)
    spdlog::error("{}: could not save coordinator.json: {}", st.stats.name, describe(ok.error()));
}

void launch_round(coordinator_pointer self, step_round r, const std::vector<problem>& problems,
                  size_t group_size) {
  auto& st = self->state;
  r.expected = problems.size() * group_size;
  r.sampled_from = st.policy_version;
  auto settings = st.settings.episodes;
  settings.round = r.key;
  if (r.eval)
    settings.sampling.temperature = 0; // held-out problems: greedy
  // The staleness bound of the header: ask for at least the version published now. In sync
  // mode every sampler confirmed it already, except one that joined (or came back) since: it
  // gets the policy from the learner when it is subscribed, and must not sample before.
  settings.min_policy_version = st.policy_version;
  uint64_t k = 0;
  for (size_t i = 0; i < problems.size(); ++i) {
    // Group ids: unique per step and problem; held-out runs get their own range so traces
    // never show them in a training step's groups.
    uint64_t group = (r.eval ? 1'000'000'000'000ull : 0) + r.step * 100'000 + i;
    for (size_t g = 0; g < group_size; ++g) {
      uint64_t id = r.key * trajectory_id_stride + ++k;
      actor_stats stats;
      stats.node = st.stats.node;
      stats.role = "episode";
      stats.name = st.stats.node + "/episode." + std::to_string(id);
      // linked: episodes end with the coordinator rather than running on orphaned
      auto e = self->spawn<caf::linked>(run_episode, stats, settings,
                                        std::shared_ptr<const episode_resources>(st.res), id);
      self->send(e, start_atom::value, problems[i], group);
    }
  }
  auto key = r.key;
  st.rounds.emplace(key, std::move(r));
}

void launch_step(coordinator_pointer self, uint64_t s) {
  auto& st = self->state;
  step_round r;
  r.key = s;
  r.step = s;
  auto problems = st.order->next(st.settings.problems_per_step);
  r.cursor_after = st.order->cursor();
  st.launched = s;
  refresh_workers(self);
  spdlog::info("{}: step {}{} started: {} problems x {} samples", st.stats.name, s,
               st.settings.steps > 0 ? "/" + std::to_string(st.settings.steps) : "",
               problems.size(), st.settings.group_size);
  launch_round(self, std::move(r), problems, st.settings.group_size);
}

void launch_held_out(coordinator_pointer self) {
  auto& st = self->state;
  step_round r;
  r.key = held_out_round_base + st.step;
  r.step = st.step;
  r.eval = true;
  launch_round(self, std::move(r), st.eval_problems, 1);
}

/// Starts every step the window allows (see the header).
void fill_pipeline(coordinator_pointer self) {
  auto& st = self->state;
  while (!st.starting && !st.paused) {
    uint64_t next = st.launched + 1;
    if (st.settings.steps > 0 && next > st.settings.steps)
      break;
    if (next > st.step + 1 + window(st))
      break;
    if (!async_mode(st) && held_out_under_way(st))
      break;
    launch_step(self, next);
  }
  update_phase(self);
}

void log_progress(coordinator_pointer self, const step_round& r, size_t dropped) {
  auto& st = self->state;
  const auto& m = r.summary;
  auto step = r.step;
  auto elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - st.started).count();
  double per_step = elapsed / static_cast<double>(std::max<uint64_t>(1, step - st.first_step));
  std::string eta = "";
  if (st.settings.steps > step) {
    auto left = per_step * static_cast<double>(st.settings.steps - step);
    eta = fmt::format(", about {:.0f} s left", left);
  }
  // debug: the run actor prints the user's progress line from the same metrics
  spdlog::debug("step {}{}: reward {:.3f} (std {:.3f}), correct {:.0f}%, compiled {:.0f}%, "
               "{} of {} groups trained on, policy v{}, {:.1f} s per step{}",
               step, st.settings.steps > 0 ? "/" + std::to_string(st.settings.steps) : "",
               metric(m, "reward/mean"), metric(m, "reward/std"), 100 * metric(m, "rate/correct"),
               100 * metric(m, "rate/compiled"),
               st.settings.problems_per_step - std::min(st.settings.problems_per_step, dropped),
               st.settings.problems_per_step, st.policy_version, per_step, eta);
}

episode::step_timeline take_timeline(coordinator_pointer self, const step_round& r) {
  auto& st = self->state;
  auto& clock = *st.clock;
  episode::step_timeline t;
  t.step = r.step;
  double now = clock.now();
  t.wall_s = now - st.last_commit_s;
  auto sampling = clock.round_usage(stage::sampling, r.key);
  auto evaluating = clock.round_usage(stage::evaluating, r.key);
  t.sampling_s = sampling.summed_s;
  t.sampling_wall_s = sampling.busy_s;
  t.evaluating_s = evaluating.summed_s;
  t.evaluating_wall_s = evaluating.busy_s;
  t.training_s = clock.round_usage(stage::training, r.key).summed_s;
  t.publishing_s = clock.round_usage(stage::publishing, r.key).summed_s;
  double busy[episode::stage_count];
  for (size_t i = 0; i < episode::stage_count; ++i) {
    busy[i] = clock.busy_seconds(static_cast<stage>(i));
  }
  auto fraction = [&](stage s) {
    auto i = static_cast<size_t>(s);
    return t.wall_s > 0 ? std::min(1.0, (busy[i] - st.busy_at_last_commit[i]) / t.wall_s) : 0.0;
  };
  t.sampler_busy = fraction(stage::sampling);
  t.evaluator_busy = fraction(stage::evaluating);
  t.learner_busy = fraction(stage::training);
  for (auto& [key, other] : st.rounds)
    t.steps_in_flight += !other.eval && key != r.key ? 1 : 0;
  t.stale_dropped = r.stale_dropped;
  st.last_commit_s = now;
  std::copy(std::begin(busy), std::end(busy), std::begin(st.busy_at_last_commit));
  return t;
}

/// Everything a step leaves, in one handler (see "exactly once" in the header).
void commit(coordinator_pointer self, uint64_t key) {
  auto& st = self->state;
  auto it = st.rounds.find(key);
  if (it == st.rounds.end())
    return;
  auto r = std::move(it->second);
  st.rounds.erase(it);
  auto timeline = take_timeline(self, r);
  st.clock->forget(r.key);
  write_traces(self, r);
  auto records = r.summary;
  auto timeline_records = episode::timeline_metrics(timeline, now_unix_ms(), st.stats.name);
  records.insert(records.end(), timeline_records.begin(), timeline_records.end());
  if (st.metrics)
    self->send(st.metrics, metrics_atom::value, records);
  st.timelines.push_back(timeline);
  while (st.timelines.size() > std::max<size_t>(1, st.settings.timeline_steps))
    st.timelines.pop_front();
  st.step = r.step;
  save_checkpoint(self, r.cursor_after);
  log_progress(self, r, static_cast<size_t>(metric(r.summary, "groups/dropped_flat")));
  if (!check_health(self, r))
    return;
  if (st.settings.eval_every > 0 && st.step % st.settings.eval_every == 0
      && !st.eval_problems.empty())
    launch_held_out(self);
  fill_pipeline(self);
  try_train(self);
}

/// Says which of a committed step's episodes failed and why; stops the run (false) after
/// max_failed_steps steps in a row where all did: nothing could be sampled or judged.
bool check_health(coordinator_pointer self, const step_round& r) {
  auto& st = self->state;
  auto health = episode::check_step(r.collected);
  const bool stop = st.failed_steps.record(health);
  if (health.failed == 0)
    return true;
  spdlog::warn("{}: step {}: {} of {} episodes failed: {}", st.stats.name, r.step, health.failed,
               health.episodes, health.reasons);
  if (!stop)
    return true;
  st.stats.last_error = "every episode of the last " + std::to_string(st.failed_steps.in_a_row())
                        + " steps failed (rl.max_failed_steps), so nothing can be learned; step "
                        + std::to_string(r.step) + ": " + health.reasons;
  st.phase = episode::coordinator_phase::failed;
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
  st.publishing = true;
  update_phase(self);
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
    self->request(s, st.settings.publish_timeout, status_atom::value)
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
  if (!st.publishing)
    return;
  if (sampler && st.awaiting_confirmation.erase(sampler) > 0)
    self->demonitor(sampler); // one monitor per publish, so none piles up over the steps
  if (!st.awaiting_confirmation.empty())
    return;
  st.clock->end(stage::publishing, st.publishing_key);
  st.publishing = false;
  commit(self, st.publishing_key);
}

void sampler_lost(coordinator_pointer self, const caf::down_msg& msg) {
  auto& st = self->state;
  if (!st.publishing || st.awaiting_confirmation.count(msg.source) == 0)
    return;
  spdlog::warn("{}: a sampler was lost before it confirmed policy version {} ({}); not waiting "
               "for it (it gets the newest policy when it joins again)",
               st.stats.name, st.publishing_version, self->system().render(msg.reason));
  confirmed(self, msg.source);
}

/// What steps wait for ("an evaluator to join"), or "nothing".
std::string waiting_for(const coordinator_state& st) {
  auto missing = st.settings.workers ? st.settings.workers->missing() : std::string{};
  return missing.empty() ? "nothing" : missing + " to join (episodes wait for one)";
}

/// Drops trajectories with a turn sampled more than max_staleness versions before the current
/// policy (the learner would refuse the batch), and groups left with fewer than two members.
std::vector<trajectory> drop_stale(coordinator_state& st, std::vector<trajectory> in,
                                   uint64_t& dropped) {
  uint64_t floor = st.policy_version - std::min(st.policy_version, st.settings.max_staleness);
  std::map<uint64_t, std::vector<trajectory>> groups;
  for (auto& t : in) {
    bool stale = std::any_of(t.turns.begin(), t.turns.end(),
                             [&](const turn& u) { return u.policy_version < floor; });
    if (stale)
      ++dropped;
    else
      groups[t.group_id].push_back(std::move(t));
  }
  std::vector<trajectory> out;
  for (auto& [id, members] : groups) {
    if (members.size() < 2 && st.settings.group_size >= 2) {
      dropped += members.size(); // no group left to compare with
      continue;
    }
    for (auto& t : members)
      out.push_back(std::move(t));
  }
  return out;
}

/// Sends the next step to the learner once all its trajectories are in.
void try_train(coordinator_pointer self) {
  auto& st = self->state;
  if (st.starting || st.training || st.publishing)
    return;
  auto it = st.rounds.find(st.step + 1);
  if (it == st.rounds.end() || it->second.collected.size() < it->second.expected)
    return;
  auto& r = it->second;
  auto key = r.key;
  r.summary = episode::summarize_step(r.collected, r.step, st.stats.name,
                                       st.policy_version);
  st.last_reward = metric(r.summary, "reward/mean");
  st.last_correct = metric(r.summary, "rate/correct");
  auto kept = drop_stale(st, r.collected, r.stale_dropped);
  st.stale_dropped += r.stale_dropped;
  if (r.stale_dropped > 0)
    spdlog::warn("{}: step {}: {} trajectories sampled more than {} versions before policy v{} "
                 "are not trained on",
                 st.stats.name, r.step, r.stale_dropped, st.settings.max_staleness,
                 st.policy_version);
  size_t dropped = 0;
  if (st.settings.drop_flat_groups) {
    auto f = episode::drop_flat_groups(std::move(kept));
    kept = std::move(f.kept);
    dropped = f.groups_dropped;
    st.dropped_groups += dropped;
  }
  auto ms = r.summary.empty() ? now_unix_ms() : r.summary.front().unix_ms;
  r.summary.push_back({r.step, "groups/dropped_flat", static_cast<double>(dropped), ms,
                       st.stats.name, {}});
  r.summary.push_back({r.step, "trajectories/dropped_stale", static_cast<double>(r.stale_dropped),
                       ms, st.stats.name, {}});
  if (kept.empty()) {
    spdlog::info("step {}: no group left to learn from (equal rewards or too stale); no training",
                 r.step);
    return commit(self, key);
  }
  st.training = true;
  update_phase(self);
  st.clock->begin(stage::training, key);
  trajectory_batch batch;
  batch.id = r.step;
  batch.coordinator_step = r.step;
  batch.trajectories = std::move(kept);
  self->request(st.learner, st.settings.learner_timeout, train_atom::value, batch)
    .then(
      [self, key](policy_update& update) {
        auto& st = self->state;
        st.clock->end(stage::training, key);
        st.training = false;
        st.policy_version = update.version;
        publish(self, key, update);
      },
      [self, key](caf::error& err) {
        auto& st = self->state;
        st.clock->end(stage::training, key);
        st.training = false;
        st.stats.last_error = "the learner failed on step " + std::to_string(key) + ": "
                              + self->system().render(err);
        spdlog::error("{}: {}", st.stats.name, st.stats.last_error);
        commit(self, key);
      });
}

/// Takes up samplers and evaluators that joined or left since the last step. Episodes hold the
/// resources they started with, so the coordinator gets a fresh copy instead of changing it.
void refresh_workers(coordinator_pointer self) {
  auto& st = self->state;
  if (!st.settings.workers)
    return;
  auto fresh = std::make_shared<episode_resources>(*st.res);
  auto seen = st.settings.workers->copy_if_newer(st.workers_seen, fresh->samplers,
                                                  fresh->evaluators);
  if (seen == st.workers_seen)
    return;
  st.workers_seen = seen;
  st.res = std::move(fresh);
}

void finish_held_out(coordinator_pointer self, uint64_t key) {
  auto& st = self->state;
  auto it = st.rounds.find(key);
  auto r = std::move(it->second);
  st.rounds.erase(it);
  st.clock->forget(key);
  write_traces(self, r);
  auto summary = episode::summarize_step(r.collected, r.step, st.stats.name);
  for (auto& m : summary)
    m.name = "eval/" + m.name;
  if (st.metrics)
    self->send(st.metrics, metrics_atom::value, summary);
  spdlog::info("held-out evaluation after step {}: reward {:.3f}, correct {:.0f}%", r.step,
               metric(summary, "eval/reward/mean"), 100 * metric(summary, "eval/rate/correct"));
  fill_pipeline(self);
}

/// Starts the pipeline once the learner's version is known.
void begin(coordinator_pointer self, const std::optional<policy_update>& learner_policy) {
  auto& st = self->state;
  std::optional<uint64_t> learner_version;
  if (learner_policy)
    learner_version = learner_policy->version;
  if (learner_version && st.resumed && *learner_version == st.policy_version + 1) {
    // The learner trained the step after the last committed one; the coordinator stopped before
    // committing it. Training it again would count its problems twice: it counts as done.
    st.order->next(st.settings.problems_per_step);
    ++st.step;
    st.policy_version = *learner_version;
    save_checkpoint(self, st.order->cursor());
    spdlog::warn("{}: the learner already trained step {} (policy v{}) before this coordinator "
                 "stopped; it counts as done (its trajectories and metrics were not recorded)",
                 st.stats.name, st.step, st.policy_version);
  } else if (learner_version && *learner_version != st.policy_version) {
    spdlog::warn("{}: coordinator.json says policy v{}, the learner publishes v{}: going on with "
                 "the learner's",
                 st.stats.name, st.policy_version, *learner_version);
    st.policy_version = *learner_version;
  }
  // Samplers may have started without it (or with an older one, on a resume): episodes that ask
  // for at least this version would wait for it.
  if (learner_policy && learner_policy->version > 0)
    for (auto& s : st.res->samplers)
      self->send(s, policy_atom::value, *learner_policy);
  st.launched = st.step;
  st.first_step = st.step;
  st.starting = false;
  st.last_commit_s = st.clock->now();
  for (size_t i = 0; i < episode::stage_count; ++i)
    st.busy_at_last_commit[i] = st.clock->busy_seconds(static_cast<stage>(i));
  spdlog::info("{}: {} mode{}, starting after step {} with policy v{}", st.stats.name,
               to_string(st.settings.mode),
               async_mode(st) ? " (up to " + std::to_string(st.settings.max_staleness)
                                  + " steps ahead of the learner)"
                              : std::string{},
               st.step, st.policy_version);
  fill_pipeline(self);
}

std::string rounds_text(const coordinator_state& st) {
  std::vector<std::string> parts;
  for (auto& [key, r] : st.rounds)
    parts.push_back((r.eval ? "held-out after " : "step ") + std::to_string(r.step) + ": "
                    + std::to_string(r.collected.size()) + " / " + std::to_string(r.expected));
  return parts.empty() ? "none" : join(parts, ", ");
}

std::string last_timeline_text(const coordinator_state& st) {
  if (st.timelines.empty())
    return "-";
  const auto& t = st.timelines.back();
  return fmt::format("step {}: wall {:.2f} s, sampling {:.2f} s, evaluating {:.2f} s, training "
                     "{:.2f} s, publishing {:.2f} s; busy sampler {:.0f}%, evaluator {:.0f}%, "
                     "learner {:.0f}%",
                     t.step, t.wall_s, t.sampling_wall_s, t.evaluating_wall_s, t.training_s,
                     t.publishing_s, 100 * t.sampler_busy, 100 * t.evaluator_busy,
                     100 * t.learner_busy);
}

caf::result<std::string> timeline_view(coordinator_state& st, const std::vector<std::string>& args) {
  size_t n = st.timelines.size();
  if (!args.empty()) {
    try {
      n = static_cast<size_t>(std::stoul(args[0]));
    } catch (const std::exception&) {
      return make_error(errc::invalid_argument,
                        "timeline [N]: N is a number of steps, got '" + args[0] + "'");
    }
  }
  n = std::min(n, st.timelines.size());
  std::vector<episode::step_timeline> rows(st.timelines.end() - static_cast<std::ptrdiff_t>(n),
                                           st.timelines.end());
  return std::string(to_string(st.settings.mode)) + " mode; stage wall time (summed over "
         "requests); busy = share of the step's wall time each stage (sampler/evaluator/"
         "learner) worked\n"
         + episode::render_timeline_table(rows);
}

caf::result<std::string> trajectory_view(coordinator_state& st,
                                         const std::vector<std::string>& args) {
  if (args.size() != 1)
    return make_error(errc::invalid_argument,
                      "usage: trajectory COORDINATOR PROBLEM (a problem id such as "
                      "level1/19_ReLU, or its name 19_ReLU)");
  const auto& want = args[0];
  auto it = st.last_trajectory.find(want);
  if (it == st.last_trajectory.end())
    it = std::find_if(st.last_trajectory.begin(), st.last_trajectory.end(), [&](const auto& kv) {
      auto slash = kv.first.rfind('/');
      return kv.first.substr(slash == std::string::npos ? 0 : slash + 1) == want;
    });
  if (it == st.last_trajectory.end()) {
    std::vector<std::string> seen;
    for (auto& kv : st.last_trajectory)
      if (seen.size() < 10)
        seen.push_back(kv.first);
    return make_error(errc::invalid_argument,
                      "no trajectory of problem '" + want + "' yet; problems seen: "
                        + (seen.empty() ? std::string("none") : join(seen, ", "))
                        + (st.last_trajectory.size() > seen.size() ? ", ..." : ""));
  }
  auto tokenizer = st.res->tokenizer;
  episode::trajectory_view_options o;
  o.format = st.settings.episodes.prompts.format;
  return episode::render_trajectory(
    it->second.second, it->second.first,
    [tokenizer](const std::vector<int32_t>& ids) {
      return tokenizer ? tokenizer->decode(ids) : std::string("(no tokenizer)");
    },
    o);
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
  st.settings = std::move(settings);
  st.traces = std::make_unique<episode::trace_log>(st.settings.run_dir,
                                                   st.settings.traces_max_bytes);
  st.failed_steps = episode::failed_step_counter{st.settings.max_failed_steps};
  st.res = std::move(resources);
  st.res->coordinator = coordinator_actor{self};
  st.clock = std::make_shared<episode::stage_clock>();
  st.res->stages = st.clock;
  st.res->board = st.settings.workers;
  // A sampler lost while a policy is published is not waited for (see publish).
  self->set_down_handler([self](const caf::down_msg& msg) { sampler_lost(self, msg); });
  st.learner = std::move(learner);
  st.metrics = std::move(metrics);
  st.order = std::make_unique<episode::problem_order>(std::move(train_set), st.settings.seed);
  st.eval_problems = std::move(eval_set);
  st.resumed = fs::exists(st.settings.run_dir + "/coordinator.json");
  if (auto cp = read_coordinator_checkpoint(st.settings.run_dir)) {
    st.step = cp->step;
    st.policy_version = cp->policy_version;
    st.order->seek(cp->cursor);
    if (cp->step > 0)
      spdlog::info("{}: resuming after step {} (policy v{})", st.stats.name, cp->step,
                   cp->policy_version);
  } else {
    st.resumed = false;
    spdlog::error("{}: {}; starting from step 0", st.stats.name, describe(cp.error()));
  }
  if (st.learner) {
    self->request(st.learner, st.settings.learner_timeout, policy_atom::value)
      .then([self](policy_update& update) { begin(self, update); },
            [self](caf::error& err) {
              spdlog::warn("{}: the learner did not say its policy version ({}); going on with "
                           "v{}",
                           self->state.stats.name, self->system().render(err),
                           self->state.policy_version);
              begin(self, std::nullopt);
            });
  } else {
    begin(self, std::nullopt);
  }
  return {
    [self](status_atom) -> actor_status {
      auto& st = self->state;
      st.stats.count();
      update_phase(self);
      return st.stats.snapshot(
        to_string(st.phase), self->mailbox().size(),
        {{"step", std::to_string(st.step) + (st.settings.steps ? " / " + std::to_string(st.settings.steps) : "")},
         {"mode", async_mode(st) ? "async (up to " + std::to_string(st.settings.max_staleness)
                                     + " steps ahead of the learner)"
                                 : std::string("sync")},
         {"episodes", rounds_text(st)},
         {"policy version", std::to_string(st.policy_version)},
         {"last reward", fmt::format("{:.3f}", st.last_reward)},
         {"last correct rate", fmt::format("{:.0f}%", 100 * st.last_correct)},
         {"groups dropped (flat)", std::to_string(st.dropped_groups)},
         {"trajectories dropped (stale)", std::to_string(st.stale_dropped)},
         {"last step timeline", last_timeline_text(st)},
         {"waiting for", waiting_for(st)}},
        {"pause", "resume", "timeline", "trajectory"});
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
        return timeline_view(st, args);
      if (verb == "trajectory")
        return trajectory_view(st, args);
      return make_error(errc::not_supported, st.stats.name
                                               + " accepts pause, resume, timeline [N] and "
                                                 "trajectory PROBLEM, got '"
                                               + verb + "'");
    },
    [self](trajectory_atom, trajectory& t) {
      auto& st = self->state;
      auto key = t.id / trajectory_id_stride;
      auto it = st.rounds.find(key);
      if (it == st.rounds.end()) {
        spdlog::warn("{}: trajectory {} belongs to no step under way; ignored", st.stats.name,
                     t.id);
        return;
      }
      auto& r = it->second;
      auto view = t;
      for (auto& u : view.turns) { // the view shows text; token ids of prompts stay for it
        u.completion_tokens.clear();
        u.logprobs.clear();
      }
      st.last_trajectory[t.problem_id] = {r.step, std::move(view)};
      r.collected.push_back(std::move(t));
      if (r.collected.size() < r.expected)
        return;
      if (r.eval)
        return finish_held_out(self, key);
      try_train(self);
    },
    [self](policy_atom, policy_update& update) {
      auto& st = self->state;
      st.policy_version = std::max(st.policy_version, update.version);
    },
    [self](pause_atom) {
      auto& st = self->state;
      st.paused = true;
      update_phase(self);
    },
    [self](resume_atom) {
      auto& st = self->state;
      if (!st.paused)
        return;
      st.paused = false;
      fill_pipeline(self);
    },
  };
}

} // namespace kbrl
