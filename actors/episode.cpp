#include "actors/episode.hpp"

#include "messages/error_codes.hpp"
#include "runtime/io/backoff.hpp"
#include "runtime/retrieval/few_shot.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>

namespace kbrl {

namespace {

void sample(episode_pointer self);
void evaluate(episode_pointer self);
void finish(episode_pointer self, std::string reason);

/// Times one request of `s` for the coordinator's timeline (when a stage clock is set).
void timed(episode_pointer self, episode::stage s, bool begin) {
  auto& st = self->state;
  if (!st.res->stages)
    return;
  if (begin)
    st.res->stages->begin(s, st.settings.round);
  else
    st.res->stages->end(s, st.settings.round);
}

std::string label(episode_pointer self) {
  auto& st = self->state;
  const bool judging = st.phase == episode::episode_phase::evaluating;
  return st.task.id + " trajectory " + std::to_string(st.traj.id) + " turn "
         + std::to_string(st.traj.turns.size() + (judging ? 0 : 1));
}

/// After a busy answer: asks again (tick_atom) once the back-off has passed and returns true;
/// false when the step has waited busy_wait_limit already.
bool wait_after_busy(episode_pointer self, const caf::error& err) {
  auto& st = self->state;
  if (st.busy_waited >= st.settings.busy_wait_limit)
    return false;
  // Spread the episodes of one group, which were all turned away at the same moment.
  auto delay = io::backoff(st.settings.busy_backoff_first, st.settings.busy_backoff_max,
                           st.busy_answers + 1, 1 + static_cast<double>(st.traj.id % 97) / 194);
  ++st.busy_answers;
  st.busy_waited += delay;
  if (st.busy_answers == 1)
    spdlog::debug("{}: {}; asking again in {} ms", label(self), self->system().render(err),
                  delay.count());
  self->delayed_send(self, delay, tick_atom::value);
  return true;
}

void step_done(episode_pointer self) {
  auto& st = self->state;
  st.retries = 0;
  st.resent = 0;
  st.busy_answers = 0;
  st.busy_waited = std::chrono::milliseconds{0};
}

constexpr auto worker_poll_interval = std::chrono::seconds(1);

/// Takes the board's lists when it has newer ones (RL runs: nodes joined, left or came back).
void refresh_workers(episode_pointer self) {
  auto& st = self->state;
  if (st.res->board)
    st.board_seen = st.res->board->copy_if_newer(st.board_seen, st.samplers, st.evaluators);
}

/// The next of `list` (round robin from `next`) not lost while asked; a null handle when none.
template <class Handle>
Handle pick(episode_pointer self, const std::vector<Handle>& list, size_t& next) {
  for (size_t i = 0; i < list.size(); ++i) {
    auto& h = list[(next + i) % list.size()];
    if (self->state.lost.count(h.address()) == 0) {
      next += i;
      return h;
    }
  }
  return Handle{};
}

/// No sampler or evaluator to ask: with a board one may join, so wait and look again (the RL
/// run logs what the step waits for); without one the episode cannot go on.
void wait_for_workers(episode_pointer self, const std::string& none) {
  auto& st = self->state;
  if (!st.res->board)
    return finish(self, "failed: " + none);
  if (st.waiting.empty())
    spdlog::debug("{}: {}; waiting for one to join", label(self), none);
  st.waiting = none + ", waiting for one to join";
  self->delayed_send(self, worker_poll_interval, tick_atom::value);
}

/// Monitors `target` and numbers a new request to it; answers carry the number.
uint64_t ask(episode_pointer self, const caf::actor_addr& target) {
  auto& st = self->state;
  st.waiting.clear();
  st.asked = target;
  st.in_flight = true;
  self->monitor(target);
  return ++st.attempt;
}

/// An answer (or error) to request `attempt` arrived: false when it is stale (the request was
/// sent again after its target was lost), else the request is over.
bool answered(episode_pointer self, uint64_t attempt) {
  auto& st = self->state;
  if (attempt != st.attempt || !st.in_flight)
    return false;
  st.in_flight = false;
  self->demonitor(st.asked); // samplers live long: monitors of ended requests would pile up
  return true;
}

/// The sampler or evaluator holding the request is gone (its node died, or it was sent to a
/// dead handle): not asked again; the request goes elsewhere without spending a retry.
void target_lost(episode_pointer self, const std::string& why) {
  auto& st = self->state;
  st.lost.insert(st.asked);
  st.in_flight = false;
  ++st.attempt; // an answer that still comes is dropped
  bool sampling = st.phase == episode::episode_phase::sampling;
  timed(self, sampling ? episode::stage::sampling : episode::stage::evaluating, false);
  spdlog::warn("{}: the {} it asked was lost ({}); asking another one", label(self),
               sampling ? "sampler" : "evaluator", why);
  if (sampling) {
    ++st.resent; // the turn that comes of it counts it
    sample(self);
  } else {
    ++st.traj.turns.back().retries;
    evaluate(self);
  }
}

bool receiver_gone(const caf::error& err) {
  return err == caf::sec::request_receiver_down;
}

/// Scores the newest turn (evaluated or not) and decides what comes next.
void score_and_continue(episode_pointer self, const eval_result* verdict) {
  auto& st = self->state;
  auto& t = st.traj.turns.back();
  auto& prev = st.history.back();
  if (verdict != nullptr) {
    t.verdict = *verdict;
    prev.evaluated = true;
    prev.verdict = *verdict;
  }
  auto r = episode::score_turn(prev.answer, verdict, t.completion_tokens.size(),
                               st.settings.rewards);
  t.score = r.total;
  bool success = verdict != nullptr && verdict->correct
                 && verdict->speedup > st.settings.success_speedup;
  if (success)
    return finish(self, "success");
  if (static_cast<int32_t>(st.traj.turns.size()) >= st.settings.max_turns)
    return finish(self, "max_turns");
  sample(self);
}

void evaluate(episode_pointer self) {
  auto& st = self->state;
  st.phase = episode::episode_phase::evaluating;
  refresh_workers(self);
  auto target = pick(self, st.evaluators, st.next_evaluator);
  if (!target)
    return wait_for_workers(self, st.evaluators.empty()
                                    ? "no evaluator to send the candidate to"
                                    : "every evaluator it knows was lost");
  eval_request req;
  req.id = st.traj.id * 100 + st.traj.turns.size();
  req.candidate_source = st.history.back().answer.code;
  req.task = st.task;
  req.timing = st.settings.timing;
  req.trace = label(self);
  timed(self, episode::stage::evaluating, true);
  auto attempt = ask(self, target.address());
  self->request(target, st.settings.evaluator_timeout, evaluate_atom::value, req)
    .then(
      [self, attempt](eval_result& verdict) {
        auto& st = self->state;
        if (!answered(self, attempt))
          return;
        timed(self, episode::stage::evaluating, false);
        if (verdict.error == eval_error::infrastructure && st.retries < st.settings.max_retries) {
          // kbrl's own failure, not the candidate's: the candidate gets another evaluator
          ++st.retries;
          ++st.traj.turns.back().retries;
          ++st.next_evaluator;
          return evaluate(self);
        }
        step_done(self);
        score_and_continue(self, &verdict);
      },
      [self, attempt](caf::error& err) {
        auto& st = self->state;
        if (receiver_gone(err) && attempt == st.attempt && st.in_flight)
          return target_lost(self, self->system().render(err));
        if (!answered(self, attempt))
          return;
        timed(self, episode::stage::evaluating, false);
        ++st.next_evaluator;
        if (has_code(err, errc::busy) && wait_after_busy(self, err))
          return;
        spdlog::warn("{}: evaluator failed: {}", label(self), self->system().render(err));
        if (st.retries >= st.settings.max_retries)
          return finish(self, "failed: no evaluator answered after "
                                + std::to_string(st.retries + 1) + " tries: "
                                + self->system().render(err));
        ++st.retries;
        ++st.traj.turns.back().retries;
        evaluate(self);
      });
}

/// Asks the retriever for examples of the problem, then samples the first turn with them.
void fetch_examples(episode_pointer self) {
  auto& st = self->state;
  st.examples_fetched = true;
  st.phase = episode::episode_phase::retrieving;
  self->request(st.res->retriever, std::chrono::seconds(30), retrieve_atom::value, st.task,
                st.res->retrieval_k)
    .then(
      [self](std::vector<retrieved_example>& examples) {
        auto& st = self->state;
        retrieval::few_shot_options o;
        o.max_tokens = st.res->retrieval_token_budget;
        o.backend = st.task.backend;
        o.count = retrieval::tokenizer_count(*st.res->tokenizer);
        st.settings.prompts.examples = retrieval::render_few_shot(examples, o).text;
        sample(self);
      },
      [self](caf::error& err) {
        spdlog::warn("{}: no retrieved examples ({}); the prompt goes without them", label(self),
                     self->system().render(err));
        sample(self);
      });
}

void sample(episode_pointer self) {
  auto& st = self->state;
  if (!st.examples_fetched && st.res->retriever)
    return fetch_examples(self);
  st.phase = episode::episode_phase::sampling;
  refresh_workers(self);
  auto target = pick(self, st.samplers, st.next_sampler);
  if (!target)
    return wait_for_workers(self, st.samplers.empty() ? "no sampler to ask"
                                                      : "every sampler it knows was lost");
  auto tokens = episode::prompt_tokens(st.task, st.history, st.settings.prompts,
                                      *st.res->tokenizer, *st.res->chat);
  if (!tokens)
    return finish(self, "failed: the prompt could not be rendered: " + describe(tokens.error()));
  generation_request req;
  req.id = st.traj.id * 100 + st.traj.turns.size();
  req.prompt_tokens = std::move(*tokens);
  req.params = st.settings.sampling;
  req.params.seed = st.settings.sampling.seed + req.id; // each turn of each episode its own draw
  req.min_policy_version = st.settings.min_policy_version;
  req.trace = label(self);
  auto prompt_tokens = req.prompt_tokens;
  timed(self, episode::stage::sampling, true);
  auto attempt = ask(self, target.address());
  self->request(target, st.settings.sampler_timeout, generate_atom::value, req)
    .then(
      [self, prompt_tokens, attempt](generation_result& out) {
        auto& st = self->state;
        if (!answered(self, attempt))
          return;
        timed(self, episode::stage::sampling, false);
        if (out.finish == finish_reason::error) {
          // The sampler could not generate (a prompt the model cannot take, a failed
          // forward): another may; an empty turn scored as the policy's would teach nothing.
          auto why = out.error.empty() ? std::string("no reason given") : out.error;
          if (st.retries >= st.settings.max_retries)
            return finish(self, "failed: the sampler could not generate: " + why);
          if (st.retries == 0)
            spdlog::warn("{}: {} could not generate: {}; asking again", label(self),
                         out.sampler.empty() ? std::string("the sampler") : out.sampler, why);
          ++st.retries;
          ++st.next_sampler;
          return sample(self);
        }
        turn t;
        t.index = static_cast<int32_t>(st.traj.turns.size());
        t.prompt_tokens = prompt_tokens;
        t.completion_tokens = std::move(out.completion_tokens);
        t.logprobs = std::move(out.logprobs);
        t.completion_text = std::move(out.completion_text);
        t.policy_version = out.policy_version;
        t.retries = st.retries + st.resent;
        step_done(self);
        if (st.traj.policy_versions.empty() || st.traj.policy_versions.back() != t.policy_version)
          st.traj.policy_versions.push_back(t.policy_version);
        episode::previous_turn prev;
        prev.answer = episode::parse_answer(t.completion_text, st.settings.prompts.format);
        prev.completion_text = t.completion_text;
        st.traj.turns.push_back(std::move(t));
        st.history.push_back(std::move(prev));
        if (st.history.back().answer.ok())
          evaluate(self);
        else
          score_and_continue(self, nullptr);
      },
      [self, attempt](caf::error& err) {
        auto& st = self->state;
        if (receiver_gone(err) && attempt == st.attempt && st.in_flight)
          return target_lost(self, self->system().render(err));
        if (!answered(self, attempt))
          return;
        timed(self, episode::stage::sampling, false);
        ++st.next_sampler;
        if (has_code(err, errc::busy) && wait_after_busy(self, err))
          return;
        spdlog::warn("{}: sampler failed: {}", label(self), self->system().render(err));
        if (st.retries >= st.settings.max_retries)
          return finish(self, "failed: no sampler answered after " + std::to_string(st.retries + 1)
                                + " tries: " + self->system().render(err));
        ++st.retries;
        sample(self);
      });
}

void finish(episode_pointer self, std::string reason) {
  auto& st = self->state;
  st.phase = episode::episode_phase::done;
  st.traj.end_reason = std::move(reason);
  std::vector<double> scores;
  for (auto& t : st.traj.turns)
    scores.push_back(t.score);
  auto returns = episode::turn_returns(scores, st.settings.gamma, st.settings.aggregation);
  for (size_t i = 0; i < returns.size(); ++i)
    st.traj.turns[i].return_value = returns[i];
  if (st.res->coordinator)
    self->send(st.res->coordinator, trajectory_atom::value, st.traj);
  self->quit();
}

} // namespace

episode_behavior::behavior_type run_episode(episode_pointer self, actor_stats stats,
                                            episode_settings settings,
                                            std::shared_ptr<const episode_resources> resources,
                                            uint64_t trajectory_id) {
  auto& st = self->state;
  st.stats = std::move(stats);
  st.settings = std::move(settings);
  st.res = std::move(resources);
  st.samplers = st.res->samplers;
  st.evaluators = st.res->evaluators;
  st.traj.id = trajectory_id;
  self->set_down_handler([self](const caf::down_msg& msg) {
    auto& st = self->state;
    if (st.in_flight && msg.source == st.asked)
      target_lost(self, self->system().render(msg.reason));
  });
  return {
    [self](status_atom) -> actor_status {
      auto& st = self->state;
      st.stats.count();
      return st.stats.snapshot(to_string(st.phase), self->mailbox().size(),
                               {{"problem", st.task.id},
                                {"turns", std::to_string(st.traj.turns.size()) + " / "
                                            + std::to_string(st.settings.max_turns)},
                                {"waiting for", st.waiting.empty() ? "an answer" : st.waiting}});
    },
    [self](control_atom, const std::string& verb,
           const std::vector<std::string>&) -> caf::result<std::string> {
      self->state.stats.count();
      return no_control_verbs(self->state.stats.name, verb);
    },
    [self](start_atom, problem& p, uint64_t group) {
      auto& st = self->state;
      st.stats.count();
      if (st.phase != episode::episode_phase::waiting)
        return; // started once only
      st.task = std::move(p);
      st.traj.problem_id = st.task.id;
      st.traj.group_id = group;
      sample(self);
    },
    [self](tick_atom) {
      // The back-off after a busy answer has passed, or it waited for a worker: ask again.
      auto& st = self->state;
      if (st.in_flight)
        return; // asked meanwhile (one tick is pending at most; this guards the invariant)
      if (st.phase == episode::episode_phase::evaluating)
        evaluate(self);
      else if (st.phase == episode::episode_phase::sampling)
        sample(self);
    },
  };
}

} // namespace kbrl
