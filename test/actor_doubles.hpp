#pragma once
// Stand-ins for peers of the actor under test, where the peer's own behaviour is not the
// subject: a sampler that answers from a script, a coordinator that forwards trajectories, and a
// learner that records the batches it is given. The real ones are tested in their own suites and
// together in the end-to-end tests.

#include "messages/errors.hpp"
#include "messages/type_ids.hpp"

#include <caf/all.hpp>

#include <memory>
#include <string>
#include <vector>

namespace kbrl::test {

/// A sampler that answers turn after turn from a fixed list of completions (the model under
/// test is the episode's logic, not a policy), and records the prompts it was sent.
inline sampler_actor::behavior_type scripted_sampler(sampler_actor::pointer self,
                                              std::vector<std::string> answers,
                                              std::shared_ptr<std::vector<generation_request>> seen) {
  auto next = std::make_shared<size_t>(0);
  return {
    [](status_atom) { return actor_status{}; },
    [](control_atom, const std::string&, const std::vector<std::string>&) { return std::string{}; },
    [=](generate_atom, generation_request& req) {
      seen->push_back(req);
      generation_result r;
      r.id = req.id;
      r.completion_text = answers[std::min(*next, answers.size() - 1)];
      ++*next;
      for (unsigned char c : r.completion_text)
        r.completion_tokens.push_back(c);
      r.logprobs.assign(r.completion_tokens.size(), -0.5f);
      r.finish = finish_reason::stop_token;
      r.policy_version = 2;
      return r;
    },
    [](policy_atom, policy_update&) {},
  };
}

/// Answers errc::busy (a full queue) to its first `busy_answers` requests, then forwards each
/// request to `inner`; counts the busy answers in `turned_away`.
inline sampler_actor::behavior_type busy_sampler(sampler_actor::pointer self, int busy_answers,
                                                 sampler_actor inner,
                                                 std::shared_ptr<int> turned_away) {
  return {
    [](status_atom) { return actor_status{}; },
    [](control_atom, const std::string&, const std::vector<std::string>&) { return std::string{}; },
    [=](generate_atom, generation_request& req) -> caf::result<generation_result> {
      if (*turned_away < busy_answers) {
        ++*turned_away;
        return make_error(errc::busy, "test/busy-sampler queue is full; retry later");
      }
      return self->delegate(inner, generate_atom::value, std::move(req));
    },
    [](policy_atom, policy_update&) {},
  };
}

/// A sampler whose node is about to be lost: it takes every request, tells `sink` ("held"),
/// and never answers (the promises stay open, as a request held by a dead node does).
inline sampler_actor::behavior_type holding_sampler(sampler_actor::pointer self, caf::actor sink) {
  auto held = std::make_shared<std::vector<caf::response_promise>>();
  return {
    [](status_atom) { return actor_status{}; },
    [](control_atom, const std::string&, const std::vector<std::string>&) { return std::string{}; },
    [=](generate_atom, generation_request&) -> caf::result<generation_result> {
      held->push_back(self->make_response_promise());
      caf::anon_send(sink, std::string("held"));
      return caf::delegated<generation_result>();
    },
    [](policy_atom, policy_update&) {},
  };
}

/// The same for an evaluator supervisor.
inline evaluator_supervisor_actor::behavior_type
holding_evaluator(evaluator_supervisor_actor::pointer self, caf::actor sink) {
  auto held = std::make_shared<std::vector<caf::response_promise>>();
  return {
    [](status_atom) { return actor_status{}; },
    [](control_atom, const std::string&, const std::vector<std::string>&) { return std::string{}; },
    [=](evaluate_atom, eval_request&) -> caf::result<eval_result> {
      held->push_back(self->make_response_promise());
      caf::anon_send(sink, std::string("held"));
      return caf::delegated<eval_result>();
    },
    [](status_atom, actors_atom) { return std::vector<actor_status>{}; },
    [](status_atom, const std::string&) { return actor_status{}; },
    [](control_atom, const std::string&, const std::string&, const std::vector<std::string>&) {
      return std::string{};
    },
    [](membership_view&) {},
  };
}

/// Hands every finished trajectory to `sink` (the test's scoped actor).
inline coordinator_actor::behavior_type trajectory_sink(coordinator_actor::pointer, caf::actor sink) {
  return {
    [](status_atom) { return actor_status{}; },
    [](control_atom, const std::string&, const std::vector<std::string>&) { return std::string{}; },
    [=](trajectory_atom, trajectory& t) { caf::anon_send(sink, std::move(t)); },
    [](policy_atom, policy_update&) {},
    [](pause_atom) {},
    [](resume_atom) {},
  };
}

/// A learner that keeps every batch it is given and answers each with the next policy version.
inline learner_actor::behavior_type recording_learner(
  learner_actor::pointer self, std::shared_ptr<std::vector<trajectory_batch>> batches) {
  auto version = std::make_shared<uint64_t>(0);
  return {
    [](status_atom) { return actor_status{}; },
    [](control_atom, const std::string&, const std::vector<std::string>&) { return std::string{}; },
    [=](train_atom, trajectory_batch& b) {
      batches->push_back(b);
      policy_update u;
      u.version = ++*version;
      u.learner_step = *version;
      return u;
    },
    [=](policy_atom) {
      policy_update u;
      u.version = *version;
      return u;
    },
    [](subscribe_atom, policy_listener_actor) {},
  };
}

} // namespace kbrl::test
