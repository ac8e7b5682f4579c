#pragma once
// Stand-ins for the coordinator's peers in its pipeline tests, all writing to one event log so a
// test asserts the order things happened in (never how long they took):
//   versioned_sampler   answers from the policy version it holds, and holds a request whose
//                       min_policy_version is newer until that policy arrives (as the real one)
//   verdict_evaluator   an evaluator supervisor that judges a candidate by a word in it
//   gated_learner       records batches and the staleness it saw; holds the answer of the steps
//                       a test gates until the test says `release`

#include "messages/type_ids.hpp"

#include <caf/all.hpp>

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace kbrl::test {

/// A problem the doubles can serve: "level1/<number>_Op", torch backend, an empty Model.
inline problem pipeline_problem(int number) {
  problem p;
  p.name = std::to_string(number) + "_Op";
  p.id = "level1/" + p.name;
  p.level = 1;
  p.number = number;
  p.backend = kernel_backend::torch;
  p.reference_source = "import torch\nclass Model(torch.nn.Module):\n    pass\n";
  return p;
}

/// What the doubles saw, in order. Shared between actor threads and the test.
struct pipeline_log {
  std::mutex mutex;
  std::vector<std::string> events;              ///< "generate 2000001", "train begin 1", ...
  std::vector<trajectory_batch> batches;        ///< trained, in order
  std::vector<uint64_t> staleness;              ///< learner version - oldest turn version, per batch
  std::set<uint64_t> gated_steps;               ///< train requests of these steps are held
  uint64_t learner_version = 0;                 ///< survives a learner double's restart

  void add(std::string e) {
    std::lock_guard<std::mutex> lock(mutex);
    events.push_back(std::move(e));
  }
  std::vector<std::string> snapshot() {
    std::lock_guard<std::mutex> lock(mutex);
    return events;
  }
  /// Index of the first event equal to `e`, or -1.
  long position(const std::string& e) {
    std::lock_guard<std::mutex> lock(mutex);
    for (size_t i = 0; i < events.size(); ++i)
      if (events[i] == e)
        return static_cast<long>(i);
    return -1;
  }
};

/// The trajectory id in an episode's request label ("<problem> trajectory <id> turn <n>").
inline uint64_t trajectory_of_label(const std::string& trace) {
  auto at = trace.find("trajectory ");
  return at == std::string::npos ? 0 : std::stoull(trace.substr(at + 11));
}

/// Answers "<KERNEL>class ModelNew ... RIGHT</KERNEL>" for odd trajectory ids and "... WRONG"
/// for even ones (so every group of two has a signal), sampled from the version it holds.
inline sampler_actor::behavior_type versioned_sampler(sampler_actor::pointer self,
                                                      std::shared_ptr<pipeline_log> log) {
  struct held {
    caf::typed_response_promise<generation_result> promise;
    generation_request req;
  };
  auto version = std::make_shared<uint64_t>(0);
  auto waiting = std::make_shared<std::vector<held>>();
  auto answer = [log, version](const generation_request& req) {
    auto id = trajectory_of_label(req.trace);
    log->add("generate " + std::to_string(id));
    generation_result r;
    r.id = req.id;
    r.completion_text = std::string("<KERNEL>\nclass ModelNew:\n    pass  # ")
                        + (id % 2 ? "RIGHT" : "WRONG") + "\n</KERNEL>";
    for (unsigned char c : r.completion_text)
      r.completion_tokens.push_back(c);
    r.logprobs.assign(r.completion_tokens.size(), -0.5f);
    r.finish = finish_reason::stop_token;
    r.policy_version = *version;
    return r;
  };
  return {
    [](status_atom) { return actor_status{}; },
    [](control_atom, const std::string&, const std::vector<std::string>&) { return std::string{}; },
    [=](generate_atom, generation_request& req) -> caf::result<generation_result> {
      if (req.min_policy_version > *version) {
        log->add("hold " + std::to_string(trajectory_of_label(req.trace)));
        auto rp = self->make_response_promise<generation_result>();
        waiting->push_back({rp, req});
        return rp;
      }
      return answer(req);
    },
    [=](policy_atom, policy_update& u) {
      *version = std::max(*version, u.version);
      for (auto it = waiting->begin(); it != waiting->end();) {
        if (it->req.min_policy_version <= *version) {
          it->promise.deliver(answer(it->req));
          it = waiting->erase(it);
        } else {
          ++it;
        }
      }
    },
  };
}

/// Correct when the candidate says RIGHT, else a mismatch; never touches a GPU or Python.
inline evaluator_supervisor_actor::behavior_type verdict_evaluator(
  evaluator_supervisor_actor::pointer, std::shared_ptr<pipeline_log> log) {
  return {
    [](status_atom) { return actor_status{}; },
    [](control_atom, const std::string&, const std::vector<std::string>&) { return std::string{}; },
    [=](evaluate_atom, eval_request& req) {
      log->add("evaluate " + std::to_string(req.id / 100));
      eval_result v;
      v.id = req.id;
      v.compiled = true;
      v.correct = req.candidate_source.find("RIGHT") != std::string::npos;
      v.error = v.correct ? eval_error::none : eval_error::mismatch;
      v.trials_total = 5;
      v.trials_passed = v.correct ? 5 : 0;
      v.speedup = v.correct ? 0.5 : 0; // correct, not faster: the episode goes on if it may
      v.evaluator = "test/evaluator.0";
      return v;
    },
    [](status_atom, actors_atom) { return std::vector<actor_status>{}; },
    [](status_atom, const std::string&) { return actor_status{}; },
    [](control_atom, const std::string&, const std::string&, const std::vector<std::string>&) {
      return std::string{};
    },
    [](membership_view&) {},
  };
}

/// Trains instantly (the version goes up by one per batch) except for gated steps, whose answer
/// waits for control "release". Logs "train begin S" on receipt and "train end S" on answering.
inline learner_actor::behavior_type gated_learner(learner_actor::pointer self,
                                                  std::shared_ptr<pipeline_log> log) {
  struct held {
    caf::typed_response_promise<policy_update> promise;
    trajectory_batch batch;
  };
  auto pending = std::make_shared<std::vector<held>>();
  auto train = [log](const trajectory_batch& b) {
    std::lock_guard<std::mutex> lock(log->mutex);
    uint64_t oldest = log->learner_version;
    for (auto& t : b.trajectories)
      for (auto& u : t.turns)
        oldest = std::min(oldest, u.policy_version);
    log->staleness.push_back(log->learner_version - oldest);
    log->batches.push_back(b);
    log->events.push_back("train end " + std::to_string(b.coordinator_step));
    policy_update u;
    u.version = ++log->learner_version;
    u.learner_step = u.version;
    return u;
  };
  return {
    [](status_atom) { return actor_status{}; },
    [=](control_atom, const std::string& verb, const std::vector<std::string>&) {
      if (verb == "release") {
        for (auto& h : *pending)
          h.promise.deliver(train(h.batch));
        pending->clear();
      }
      return std::string{"released"};
    },
    [=](train_atom, trajectory_batch& b) -> caf::result<policy_update> {
      log->add("train begin " + std::to_string(b.coordinator_step));
      bool gated;
      {
        std::lock_guard<std::mutex> lock(log->mutex);
        gated = log->gated_steps.count(b.coordinator_step) > 0;
      }
      if (!gated)
        return train(b);
      auto rp = self->make_response_promise<policy_update>();
      pending->push_back({rp, std::move(b)});
      return rp;
    },
    [=](policy_atom) {
      std::lock_guard<std::mutex> lock(log->mutex);
      policy_update u;
      u.version = log->learner_version;
      return u;
    },
    [](subscribe_atom, policy_listener_actor) {},
  };
}

} // namespace kbrl::test
