#include "actors/coordinator.hpp"

#include "runtime/episode/step_summary.hpp"
#include "runtime/io/json_writer.hpp"
#include "runtime/model/file_io.hpp"

#include <caf/all.hpp>
#include <simdjson.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <filesystem>

namespace kbrl {

namespace fs = std::filesystem;

namespace {

void start_step(coordinator_pointer self);

double metric(const std::vector<metric_record>& records, const std::string& name) {
  for (auto& r : records)
    if (r.name == name)
      return r.value;
  return 0;
}

std::string trace_line(const trajectory& t, uint64_t step, bool eval) {
  json_writer w;
  w.begin_object()
    .field("step", step)
    .field("eval", eval)
    .field("trajectory", t.id)
    .field("group", t.group_id)
    .field("problem", t.problem_id)
    .field("end", t.end_reason);
  w.key("turns").begin_array();
  for (auto& u : t.turns) {
    w.begin_object()
      .field("index", u.index)
      .field("policy_version", u.policy_version)
      .field("prompt_tokens", static_cast<uint64_t>(u.prompt_tokens.size()))
      .field("completion", u.completion_text)
      .field("compiled", u.verdict.compiled)
      .field("correct", u.verdict.correct)
      .field("error", to_string(u.verdict.error))
      .field("error_excerpt", u.verdict.error_excerpt)
      .field("speedup", u.verdict.speedup)
      .field("score", u.score)
      .field("return", u.return_value)
      .field("retries", u.retries)
      .end_object();
  }
  w.end_array().end_object();
  return w.str();
}

void write_trace(coordinator_pointer self, const trajectory& t) {
  auto& st = self->state;
  auto path = st.settings.run_dir + "/traces.jsonl";
  if (st.traces.is_open() && static_cast<uint64_t>(st.traces.tellp()) > st.settings.traces_max_bytes) {
    st.traces.close();
    std::error_code ec;
    fs::rename(path, st.settings.run_dir + "/traces.1.jsonl", ec); // keep one older file
  }
  if (!st.traces.is_open())
    st.traces.open(path, std::ios::app);
  st.traces << trace_line(t, st.step + 1, st.collecting_eval) << "\n";
  st.traces.flush();
}

void save_checkpoint(coordinator_pointer self) {
  auto& st = self->state;
  json_writer w;
  w.begin_object()
    .field("step", st.step)
    .field("cursor", st.order->cursor())
    .field("policy_version", st.policy_version)
    .end_object();
  auto text = w.str() + "\n";
  if (auto ok = model::write_file_atomically(st.settings.run_dir + "/coordinator.json", {text});
      !ok)
    spdlog::error("{}: could not save coordinator.json: {}", st.stats.name, describe(ok.error()));
}

void launch(coordinator_pointer self, const std::vector<problem>& problems, size_t group_size,
            bool eval) {
  auto& st = self->state;
  st.collected.clear();
  st.collecting_eval = eval;
  st.expected = problems.size() * group_size;
  auto settings = st.settings.episodes;
  if (eval)
    settings.sampling.temperature = 0; // held-out problems: greedy
  for (size_t i = 0; i < problems.size(); ++i) {
    // Group ids: unique per step and problem; held-out runs get their own range so traces
    // never show them in a training step's groups.
    uint64_t group = (eval ? 1'000'000'000'000ull : 0) + (st.step + 1) * 100'000 + i;
    for (size_t g = 0; g < group_size; ++g) {
      actor_stats stats;
      stats.node = st.stats.node;
      stats.role = "episode";
      stats.name = st.stats.node + "/episode." + std::to_string(st.next_trajectory);
      // linked: episodes end with the coordinator rather than running on orphaned
      auto e = self->spawn<caf::linked>(run_episode, stats, settings,
                           std::shared_ptr<const episode_resources>(st.res), st.next_trajectory++);
      self->send(e, start_atom::value, problems[i], group);
    }
  }
}

void log_progress(coordinator_pointer self, const std::vector<metric_record>& m, size_t dropped) {
  auto& st = self->state;
  auto step = st.step + 1; // the step being reported (st.step counts finished ones)
  auto elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - st.started).count();
  double per_step = elapsed / static_cast<double>(step - st.first_step);
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

void step_done(coordinator_pointer self) {
  auto& st = self->state;
  ++st.step;
  save_checkpoint(self);
  st.phase = st.paused ? "paused" : "idle";
  if (st.settings.eval_every > 0 && st.step % st.settings.eval_every == 0
      && !st.eval_problems.empty()) {
    st.phase = "evaluating";
    launch(self, st.eval_problems, 1, true);
    return;
  }
  start_step(self);
}

void train(coordinator_pointer self) {
  auto& st = self->state;
  auto summary = episode::summarize_step(st.collected, st.step + 1, st.stats.name,
                                         st.policy_version);
  st.last_reward = metric(summary, "reward/mean");
  st.last_correct = metric(summary, "rate/correct");
  size_t dropped = 0;
  std::vector<trajectory> kept = std::move(st.collected);
  if (st.settings.drop_flat_groups) {
    auto f = episode::drop_flat_groups(std::move(kept));
    kept = std::move(f.kept);
    dropped = f.groups_dropped;
    st.dropped_groups += dropped;
  }
  summary.push_back({st.step + 1, "groups/dropped_flat", static_cast<double>(dropped),
                     summary.front().unix_ms, st.stats.name, {}});
  if (st.metrics)
    self->send(st.metrics, metrics_atom::value, summary);
  if (kept.empty()) {
    log_progress(self, summary, dropped);
    spdlog::info("step {}: every group had equal rewards, nothing to learn from; no training",
                 st.step + 1);
    return step_done(self);
  }
  st.phase = "training";
  trajectory_batch batch;
  batch.id = st.step + 1;
  batch.coordinator_step = st.step + 1;
  batch.trajectories = std::move(kept);
  self->request(st.learner, st.settings.learner_timeout, train_atom::value, batch)
    .then(
      [self, summary, dropped](policy_update& update) {
        auto& st = self->state;
        st.policy_version = update.version;
        for (auto& s : st.res->samplers)
          self->send(s, policy_atom::value, update);
        log_progress(self, summary, dropped);
        step_done(self);
      },
      [self](caf::error& err) {
        auto& st = self->state;
        st.stats.last_error = "the learner failed on step " + std::to_string(st.step + 1) + ": "
                              + self->system().render(err);
        spdlog::error("{}: {}", st.stats.name, st.stats.last_error);
        step_done(self);
      });
}

/// Takes up samplers and evaluators that joined or left since the last step. Episodes hold the
/// resources they started with, so the coordinator gets a fresh copy instead of changing it.
void refresh_workers(coordinator_pointer self) {
  auto& st = self->state;
  if (!st.settings.workers)
    return;
  auto fresh = std::make_shared<episode_resources>(*st.res);
  auto seen = st.settings.workers->copy_if_newer(st.workers_seen, *fresh);
  if (seen == st.workers_seen)
    return;
  st.workers_seen = seen;
  st.res = std::move(fresh);
}

void start_step(coordinator_pointer self) {
  auto& st = self->state;
  if (st.paused) {
    st.phase = "paused";
    return;
  }
  if (st.settings.steps > 0 && st.step >= st.settings.steps) {
    st.phase = "finished";
    spdlog::info("{}: finished {} steps", st.stats.name, st.step);
    return;
  }
  st.phase = "episodes";
  refresh_workers(self);
  spdlog::info("{}: step {}{} started: {} problems x {} samples", st.stats.name, st.step + 1,
               st.settings.steps > 0 ? "/" + std::to_string(st.settings.steps) : "",
               st.settings.problems_per_step, st.settings.group_size);
  launch(self, st.order->next(st.settings.problems_per_step), st.settings.group_size, false);
}

} // namespace

void worker_board::set(std::vector<sampler_actor> samplers,
                       std::vector<evaluator_supervisor_actor> evaluators) {
  std::lock_guard<std::mutex> lock(mutex_);
  samplers_ = std::move(samplers);
  evaluators_ = std::move(evaluators);
  ++revision_;
}

uint64_t worker_board::copy_if_newer(uint64_t seen, episode_resources& res) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (revision_ > seen) {
    res.samplers = samplers_;
    res.evaluators = evaluators_;
  }
  return revision_;
}

caf::expected<coordinator_checkpoint> read_coordinator_checkpoint(const std::string& run_dir) {
  coordinator_checkpoint out;
  auto path = run_dir + "/coordinator.json";
  if (!fs::exists(path))
    return out;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  uint64_t step = 0, cursor = 0, version = 0;
  if (parser.load(path).get(doc) || doc["step"].get(step) || doc["cursor"].get(cursor)
      || doc["policy_version"].get(version))
    return make_error(errc::invalid_config,
                      path + ": expected {\"step\", \"cursor\", \"policy_version\"} as integers");
  return coordinator_checkpoint{step, cursor, version};
}

coordinator_actor::behavior_type coordinator(coordinator_pointer self, actor_stats stats,
                                             coordinator_settings settings,
                                             std::shared_ptr<episode_resources> resources,
                                             learner_actor learner, metrics_actor metrics,
                                             std::vector<problem> train_set,
                                             std::vector<problem> eval_set) {
  auto& st = self->state;
  st.stats = std::move(stats);
  st.settings = std::move(settings);
  st.res = std::move(resources);
  st.res->coordinator = coordinator_actor{self};
  st.learner = std::move(learner);
  st.metrics = std::move(metrics);
  st.order = std::make_unique<episode::problem_order>(std::move(train_set), st.settings.seed);
  st.eval_problems = std::move(eval_set);
  if (auto cp = read_coordinator_checkpoint(st.settings.run_dir)) {
    st.step = cp->step;
    st.policy_version = cp->policy_version;
    st.order->seek(cp->cursor);
    st.first_step = cp->step;
    if (cp->step > 0)
      spdlog::info("{}: resuming after step {} (policy v{})", st.stats.name, cp->step,
                   cp->policy_version);
  } else {
    spdlog::error("{}: {}; starting from step 0", st.stats.name, describe(cp.error()));
  }
  start_step(self);
  return {
    [self](status_atom) -> actor_status {
      auto& st = self->state;
      st.stats.count();
      return st.stats.snapshot(
        st.phase, self->mailbox().size(),
        {{"step", std::to_string(st.step) + (st.settings.steps ? " / " + std::to_string(st.settings.steps) : "")},
         {"episodes", std::to_string(st.collected.size()) + " / " + std::to_string(st.expected)},
         {"policy version", std::to_string(st.policy_version)},
         {"last reward", fmt::format("{:.3f}", st.last_reward)},
         {"last correct rate", fmt::format("{:.0f}%", 100 * st.last_correct)},
         {"groups dropped (flat)", std::to_string(st.dropped_groups)}},
        {"pause", "resume"});
    },
    [self](control_atom, const std::string& verb,
           const std::vector<std::string>&) -> caf::result<std::string> {
      auto& st = self->state;
      st.stats.count();
      if (verb == "pause") {
        self->send(self, pause_atom::value);
        return std::string("pausing: the current step finishes, no new one starts");
      }
      if (verb == "resume") {
        self->send(self, resume_atom::value);
        return std::string("resuming");
      }
      return make_error(errc::not_supported, st.stats.name + " accepts pause and resume, got '"
                                               + verb + "'");
    },
    [self](trajectory_atom, trajectory& t) {
      auto& st = self->state;
      write_trace(self, t);
      st.collected.push_back(std::move(t));
      if (st.collected.size() < st.expected)
        return;
      if (st.collecting_eval) {
        auto summary = episode::summarize_step(st.collected, st.step, st.stats.name);
        for (auto& r : summary)
          r.name = "eval/" + r.name;
        if (st.metrics)
          self->send(st.metrics, metrics_atom::value, summary);
        spdlog::info("held-out evaluation after step {}: reward {:.3f}, correct {:.0f}%", st.step,
                     metric(summary, "eval/reward/mean"), 100 * metric(summary, "eval/rate/correct"));
        st.collected.clear();
        st.collecting_eval = false;
        return start_step(self);
      }
      train(self);
    },
    [self](policy_atom, policy_update& update) { self->state.policy_version = update.version; },
    [self](pause_atom) {
      auto& st = self->state;
      st.paused = true;
      if (st.phase == "idle")
        st.phase = "paused";
    },
    [self](resume_atom) {
      auto& st = self->state;
      if (!st.paused)
        return;
      st.paused = false;
      if (st.phase == "paused")
        start_step(self);
    },
  };
}

} // namespace kbrl
