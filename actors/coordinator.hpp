#pragma once
// The coordinator: runs training steps. Each step hands B problems x G samples (one GRPO group
// per problem) to episode actors, collects their trajectories, drops those too stale to train on
// and groups without reward variance, has the learner train on the rest, sends the new policy
// to the samplers and commits the step; every eval_every steps it also runs the held-out
// problems and logs them apart.
//
// The pipeline (which rounds start, which step trains, what a commit leaves, the window of
// asynchronous mode) is runtime/episode/step_pipeline.hpp; its records on disk are
// runtime/episode/step_ledger.hpp. This actor sends what they decide:
//
//   [starting] --learner's policy version (or its error)--> launch the rounds the window allows
//   (one episode actor per problem and sample) --> trajectories come in --> the next step to
//   train goes to the learner --> its policy goes to every sampler; each confirms by answering a
//   status request queued behind the policy --> commit: the step's traces, metrics (summary +
//   step_timeline/*) and coordinator.json -> held-out evaluation when due -> launch more.
//
//   pause: the steps under way finish, no new one starts. [finished] once `steps` are committed
//   and nothing is under way. After max_failed_steps committed steps in a row whose episodes
//   all failed (nothing could be sampled or judged), the coordinator stops with that error.
//
// In synchronous mode (window 0) this is the plain loop: episodes, training, publishing, next
// step. Exactly once: everything a step leaves (traces, metrics, the checkpoint) is written in
// the one handler that commits it, so a coordinator stopped anywhere resumes after its last
// committed step. Steps that were under way are redone, with the same problems (the cursor),
// trajectory ids (step * 1e6 + k) and seeds. One gap is closed at start: when the learner's
// version is one past coordinator.json's, the learner trained the next step but the
// coordinator stopped before committing it. That step then counts as done; its trajectories and
// metrics were never recorded.

#include "actors/actor_stats.hpp"
#include "actors/episode.hpp"
#include "messages/type_ids.hpp"
#include "runtime/episode/coordinator_settings.hpp"
#include "runtime/episode/stage_clock.hpp"
#include "runtime/episode/step_ledger.hpp"
#include "runtime/episode/step_pipeline.hpp"
#include "runtime/episode/step_timeline.hpp"
#include "runtime/episode/trajectory_view.hpp"
#include "runtime/episode/worker_board.hpp"

#include <caf/typed_event_based_actor.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <set>

namespace kbrl {

struct coordinator_state {
  static inline const char* name = "coordinator";
  actor_stats stats;
  std::unique_ptr<episode::step_pipeline> pipeline;
  std::unique_ptr<episode::step_ledger> ledger;
  std::shared_ptr<episode_resources> res;
  learner_actor learner;
  metrics_actor metrics;
  uint64_t workers_seen = 0;      ///< revision of the worker board last copied into res
  std::set<caf::actor_addr> awaiting_confirmation; ///< samplers yet to confirm the policy
  uint64_t publishing_key = 0;    ///< the round whose policy is being published
  uint64_t publishing_version = 0;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  std::shared_ptr<episode::stage_clock> clock;   ///< the per-step timeline's
  std::unique_ptr<episode::timeline_book> timelines;
  episode::latest_trajectories last_trajectories; ///< for the `trajectory` view
  std::function<episode::reward_breakdown(const turn&)> reward_of; ///< terms for metrics
  bool finish_announced = false;
};

using coordinator_pointer = coordinator_actor::stateful_pointer<coordinator_state>;

/// Spawn with sys.spawn(coordinator, stats, settings, resources (its coordinator and stages
/// fields are filled in here), learner, metrics, train problems, eval problems). It resumes
/// from <run_dir>/coordinator.json when there is one, asks the learner for its policy version,
/// then starts.
///
/// Control verbs: pause, resume, `timeline [N]` (the last N steps' per-stage timings as a
/// table), `trajectory PROBLEM` (the newest trajectory of a problem, by id or name).
coordinator_actor::behavior_type coordinator(coordinator_pointer self, actor_stats stats,
                                             coordinator_settings settings,
                                             std::shared_ptr<episode_resources> resources,
                                             learner_actor learner, metrics_actor metrics,
                                             std::vector<problem> train, std::vector<problem> eval);

} // namespace kbrl
