#pragma once
// The coordinator: runs training steps. Each step hands B problems x G samples (one GRPO group
// per problem) to episode actors, collects their trajectories, logs the step, drops groups
// without reward variance, has the learner train on the rest, and sends the new policy to the
// samplers; every eval_every steps it also runs the held-out problems and logs them apart.
//
//   [idle] --start/resume--> [episodes] --all trajectories in--> [training] --policy--> [idle]
//      ^                          |  (a step of flat groups only skips training)          |
//      +---- pause: the current step finishes, no new one starts ------------------------+
//
// Synchronous: the next step's episodes start after the learner published the previous step's
// policy. What it leaves in the run directory: metrics through the metrics actor, traces.jsonl
// (every trajectory, rotated by size), coordinator.json (step, data cursor, policy version:
// what --resume continues from).

#include "actors/actor_stats.hpp"
#include "actors/episode.hpp"
#include "messages/type_ids.hpp"
#include "runtime/episode/problem_set.hpp"

#include <caf/typed_event_based_actor.hpp>

#include <chrono>
#include <fstream>
#include <memory>
#include <mutex>

namespace kbrl {

/// The samplers and evaluator supervisors of a running cluster, as whoever watches the
/// membership last saw them (the run actor on the coordinator node). The coordinator reads it
/// when a step starts, so nodes that join or leave are used from the next step on; episodes
/// already running keep the lists they started with. Thread-safe.
class worker_board {
public:
  /// Replaces both lists and bumps the revision.
  void set(std::vector<sampler_actor> samplers, std::vector<evaluator_supervisor_actor> evaluators);
  /// Copies the lists into `res` if the revision is newer than `seen`; returns the revision.
  uint64_t copy_if_newer(uint64_t seen, episode_resources& res) const;

private:
  mutable std::mutex mutex_;
  uint64_t revision_ = 0;
  std::vector<sampler_actor> samplers_;
  std::vector<evaluator_supervisor_actor> evaluators_;
};

struct coordinator_settings {
  uint64_t steps = 10;            ///< training steps to run (0: until stopped)
  size_t problems_per_step = 4;   ///< B
  size_t group_size = 4;          ///< G samples per problem
  uint64_t eval_every = 0;        ///< steps between held-out evaluations (0: never)
  bool drop_flat_groups = true;   ///< groups whose rewards are all equal are not trained on
  std::chrono::milliseconds learner_timeout{std::chrono::minutes(30)};
  std::string run_dir;            ///< traces.jsonl and coordinator.json go here
  uint64_t traces_max_bytes = 256ull << 20; ///< traces.jsonl is rotated to traces.1.jsonl past this
  uint64_t seed = 0;
  episode_settings episodes;
  /// When set, the samplers and evaluators of each new step come from here (see worker_board).
  std::shared_ptr<const worker_board> workers;
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

  std::string phase = "idle";     ///< idle, episodes, training, evaluating, paused, finished
  bool paused = false;
  uint64_t step = 0;              ///< steps finished
  uint64_t first_step = 0;        ///< steps finished when this coordinator started (resume)
  uint64_t policy_version = 0;
  size_t expected = 0;
  std::vector<trajectory> collected;
  bool collecting_eval = false;
  uint64_t next_trajectory = 1;
  uint64_t workers_seen = 0;      ///< revision of settings.workers last copied into res
  uint64_t dropped_groups = 0;
  double last_reward = 0, last_correct = 0;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  std::ofstream traces;
};

using coordinator_pointer = coordinator_actor::stateful_pointer<coordinator_state>;

/// Spawn with sys.spawn(coordinator, stats, settings, resources (its coordinator field is
/// filled in here), learner, metrics, train problems, eval problems, resume cursor state from
/// coordinator.json if any). It starts the first step at once.
coordinator_actor::behavior_type coordinator(coordinator_pointer self, actor_stats stats,
                                             coordinator_settings settings,
                                             std::shared_ptr<episode_resources> resources,
                                             learner_actor learner, metrics_actor metrics,
                                             std::vector<problem> train, std::vector<problem> eval);

/// What coordinator.json holds: the step reached and the training data cursor.
struct coordinator_checkpoint {
  uint64_t step = 0;
  uint64_t cursor = 0;
  uint64_t policy_version = 0;
};

/// Reads <run_dir>/coordinator.json; an absent file is a fresh start (all zero).
caf::expected<coordinator_checkpoint> read_coordinator_checkpoint(const std::string& run_dir);

} // namespace kbrl
