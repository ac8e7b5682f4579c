#pragma once
// The coordinator: runs training steps. Each step hands B problems x G samples (one GRPO group
// per problem) to episode actors, collects their trajectories, drops those too stale to train on
// and groups without reward variance, has the learner train on the rest, sends the new policy
// to the samplers and commits the step; every eval_every steps it also runs the held-out
// problems and logs them apart.
//
// Steps are launched, trained and committed in order. A step's episodes may run ahead of the
// learner by a window of steps: 0 in synchronous mode, max_staleness (K) in asynchronous mode.
// Step s may start once s <= committed + 1 + window. The learner's version when it trains s is
// at most (the version published now) + (s - 1 - committed), because each step publishes at
// most one version. So episodes that ask the samplers for at least the version published now
// (generation_request::min_policy_version) are never more than K versions behind when s is
// trained.
//
//   [starting] --learner's policy version (or its error)--> pipeline:
//
//     launch while s <= committed + 1 + window, not paused, steps left (and, in sync mode, no
//     held-out evaluation under way)
//        |
//        v
//   [episodes of s, s+1 .. s+window under way]          (trajectories may arrive in any order)
//        |  all of step committed+1 in, and the learner free
//        v
//   [training committed+1] --answer--> [publishing: policy to every sampler; each confirms by
//        |   (stale trajectories dropped, counted;     answering a status request queued
//        |    flat groups dropped; nothing left:       behind the policy]
//        |    no training)                                  |
//        v                                                  v
//   commit: the step's traces, metrics (summary + step_timeline.*) and coordinator.json (the
//   step, and the data cursor just past this step's problems, not past the later steps'
//   problems already handed out) -> held-out evaluation when due -> launch more, train the next
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
#include "runtime/episode/coordinator_checkpoint.hpp"
#include "runtime/episode/coordinator_settings.hpp"
#include "runtime/episode/phases.hpp"
#include "runtime/episode/problem_set.hpp"
#include "runtime/episode/stage_clock.hpp"
#include "runtime/episode/step_health.hpp"
#include "runtime/episode/step_timeline.hpp"
#include "runtime/episode/trace_log.hpp"
#include "runtime/episode/worker_board.hpp"

#include <caf/typed_event_based_actor.hpp>

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>

namespace kbrl {

/// One step's (or one held-out evaluation's) episodes.
struct step_round {
  uint64_t key = 0;               ///< the step, or held_out_round_base + the step it follows
  uint64_t step = 0;
  bool eval = false;
  size_t expected = 0;            ///< trajectories it waits for
  std::vector<trajectory> collected;
  uint64_t cursor_after = 0;      ///< problem cursor just past this step's problems
  uint64_t sampled_from = 0;      ///< policy version published when its episodes started
  std::vector<metric_record> summary; ///< set when it is sent to the learner
  uint64_t stale_dropped = 0;
};

struct coordinator_state {
  static inline const char* name = "coordinator";
  actor_stats stats;
  coordinator_settings settings;
  std::shared_ptr<episode_resources> res;
  learner_actor learner;
  metrics_actor metrics;
  std::unique_ptr<episode::problem_order> order;
  std::vector<problem> eval_problems;

  episode::coordinator_phase phase = episode::coordinator_phase::starting;
  bool starting = true;           ///< waiting for the learner's policy version
  bool paused = false;
  bool resumed = false;           ///< coordinator.json existed
  uint64_t step = 0;              ///< steps committed
  uint64_t launched = 0;          ///< highest step whose episodes were started
  uint64_t first_step = 0;        ///< steps committed when this coordinator started (resume)
  uint64_t policy_version = 0;    ///< the newest version published
  bool training = false;          ///< a batch is with the learner
  bool publishing = false;        ///< waiting for samplers to confirm a policy
  std::map<uint64_t, step_round> rounds; ///< under way, by key
  uint64_t workers_seen = 0;      ///< revision of settings.workers last copied into res
  std::set<caf::actor_addr> awaiting_confirmation; ///< samplers yet to confirm the policy
  uint64_t publishing_key = 0;    ///< the round whose policy is being published
  uint64_t publishing_version = 0;
  uint64_t dropped_groups = 0;
  episode::failed_step_counter failed_steps{0}; ///< set from settings.max_failed_steps
  uint64_t stale_dropped = 0;
  double last_reward = 0, last_correct = 0;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  std::unique_ptr<episode::trace_log> traces; ///< traces.jsonl

  // the per-step timeline
  std::shared_ptr<episode::stage_clock> clock;
  double last_commit_s = 0;                       ///< clock time of the previous commit
  double busy_at_last_commit[episode::stage_count] = {};
  std::deque<episode::step_timeline> timelines;   ///< the last timeline_steps steps

  /// The newest trajectory of each problem (token ids of completions and log-probabilities
  /// dropped), with the step it belongs to: for the `trajectory` view.
  std::map<std::string, std::pair<uint64_t, trajectory>> last_trajectory;
};

using coordinator_pointer = coordinator_actor::stateful_pointer<coordinator_state>;

/// Trajectory ids are round key * trajectory_id_stride + k (k = 1 .. B*G).
constexpr uint64_t trajectory_id_stride = 1'000'000;
/// Held-out evaluation rounds are keyed past every step number.
constexpr uint64_t held_out_round_base = 1'000'000'000;

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
