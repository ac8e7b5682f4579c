#pragma once
// The coordinator's step pipeline without the actor: which rounds start, which step trains,
// what a commit leaves. actors/coordinator.cpp sends the messages this class decides on; it is
// tested directly (test step_pipeline), no actors, threads or clocks.
//
// Steps are launched, trained and committed in order. A step's episodes may run ahead of the
// learner by a window of steps: 0 in synchronous mode, max_staleness (K) in asynchronous mode.
// Step s may start once s <= committed + 1 + window. The learner's version when it trains s is
// at most (the version published now) + (s - 1 - committed), because each step publishes at
// most one version. So episodes that ask the samplers for at least the version published now
// (round_launch::min_policy_version) are never more than K versions behind when s is trained.
//
//   begin(learner's version) --> launches():
//
//     launch while s <= committed + 1 + window, not paused, steps left (and, in sync mode, no
//     held-out round under way)
//        |
//        v
//   [episodes of s .. s+window under way]   add(trajectory): in any order
//        |  all of step committed+1 in, the learner free: next_training()
//        v
//   [training]  (stale trajectories dropped and counted, flat groups dropped; nothing left:
//        |       no training, the step commits at once)
//        |  trained(version) / training_failed()
//        v
//   [publishing]  published()  -->  commit(key): the round leaves the pipeline, `committed`
//        advances; the actor writes its traces, metrics and checkpoint, then asks
//        held_out_due() and launches() again.
//
// Held-out rounds (eval_every) are keyed past every step number and never trained on.

#include "messages/data.hpp"
#include "runtime/episode/coordinator_checkpoint.hpp"
#include "runtime/episode/coordinator_settings.hpp"
#include "runtime/episode/phases.hpp"
#include "runtime/episode/problem_set.hpp"
#include "runtime/episode/step_health.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kbrl::episode {

/// Trajectory ids are round key * trajectory_id_stride + k (k = 1 .. B*G).
constexpr uint64_t trajectory_id_stride = 1'000'000;
/// Held-out rounds are keyed past every step number.
constexpr uint64_t held_out_round_base = 1'000'000'000;

/// One step's (or one held-out round's) episodes.
struct step_round {
  uint64_t key = 0;               ///< the step, or held_out_round_base + the step it follows
  uint64_t step = 0;
  bool eval = false;
  size_t expected = 0;            ///< trajectories it waits for
  std::vector<trajectory> collected;
  uint64_t cursor_after = 0;      ///< problem cursor just past this step's problems
  uint64_t sampled_from = 0;      ///< policy version published when its episodes started
  std::vector<metric_record> summary; ///< set by next_training()
  uint64_t stale_dropped = 0;
};

/// A round to start: one episode per (problem, sample).
struct round_launch {
  uint64_t key = 0;
  uint64_t step = 0;
  bool eval = false;
  std::vector<problem> problems;
  size_t group_size = 0;
  uint64_t min_policy_version = 0; ///< episodes ask samplers for at least this version

  /// The GRPO group of problem i: unique per step and problem; held-out rounds get their own
  /// range so traces never show them in a training step's groups.
  uint64_t group_id(size_t problem_index) const;
  /// The id of the k-th episode (k = 1 .. problems * group_size).
  uint64_t trajectory_id(uint64_t k) const { return key * trajectory_id_stride + k; }
};

/// How begin() reconciled coordinator.json with the learner's version.
enum class start_kind : uint8_t {
  as_recorded,                ///< they agree, or the learner did not say
  learner_trained_next_step,  ///< the learner is one version past a resumed checkpoint: that
                              ///< step counts as done (its traces and metrics were never written)
  learner_version_differs,    ///< any other difference: the learner's version is taken
};
struct start_outcome {
  start_kind kind = start_kind::as_recorded;
  uint64_t recorded_version = 0; ///< coordinator.json's version before begin()
  bool checkpoint_changed = false; ///< the actor writes checkpoint() again
};

/// What add() did with a trajectory.
enum class arrival : uint8_t {
  unknown_round,      ///< belongs to no round under way (ignored)
  waiting,            ///< its round waits for more
  step_complete,      ///< a training step has all its trajectories: try next_training()
  held_out_complete,  ///< a held-out round is complete: finish_held_out(key)
};

/// The next step in order, ready for the learner.
struct training_order {
  uint64_t key = 0;
  std::vector<trajectory> batch; ///< empty: nothing to learn from, commit(key) at once
  uint64_t stale_dropped = 0;
  uint64_t flat_groups_dropped = 0;
};

class step_pipeline {
public:
  step_pipeline(coordinator_settings settings, std::vector<problem> train,
                std::vector<problem> held_out);

  /// Continues after a checkpoint (coordinator.json) before begin().
  void resume(const coordinator_checkpoint& checkpoint);
  bool resumed() const { return resumed_; }

  /// Starts the pipeline once the learner's version is known (nullopt: it did not say).
  start_outcome begin(std::optional<uint64_t> learner_version);

  /// The rounds the window allows now (see the header), recorded as under way.
  std::vector<round_launch> launches();

  /// Records a trajectory of a round under way.
  arrival add(trajectory t, uint64_t* round_key = nullptr);

  /// The next step in order when all its trajectories are in and the learner is free; with a
  /// batch it marks the pipeline training. `source` names the summary's records.
  std::optional<training_order> next_training(const std::string& source);
  /// The learner answered with `version`: publishing until published().
  void trained(uint64_t version);
  /// The learner failed: the step commits without a new policy.
  void training_failed();
  void published();

  /// Takes round `key` out of the pipeline; a training step advances `committed()`. nullopt if
  /// no such round.
  std::optional<step_round> commit(uint64_t key);
  /// Records committed step `step`'s health. When this makes max_failed_steps steps in a row
  /// whose episodes all failed, the pipeline has failed (nothing more launches) and the answer
  /// says why, for the coordinator to stop with.
  std::optional<std::string> record_health(const step_health& health, uint64_t step);

  /// After a commit: whether a held-out round is due now (eval_every).
  bool held_out_due() const;
  /// Records the held-out round after the committed step.
  round_launch held_out();
  /// Takes a complete held-out round out of the pipeline.
  std::optional<step_round> finish_held_out(uint64_t key);

  void pause() { paused_ = true; }
  /// false when it was not paused.
  bool resume_launching();

  coordinator_phase phase() const;
  /// Between trained() and published().
  bool publishing() const { return publishing_; }
  /// coordinator.json after the last commit.
  coordinator_checkpoint checkpoint(uint64_t cursor) const;
  /// The training data cursor: problems handed out so far.
  uint64_t cursor() const { return order_.cursor(); }
  /// The settings an episode of `round` runs with: the round's key, greedy sampling for
  /// held-out rounds, the round's minimum policy version.
  episode_settings episode_settings_for(const round_launch& round) const;
  const coordinator_settings& settings() const { return settings_; }

  uint64_t committed() const { return step_; }
  uint64_t first_step() const { return first_step_; }
  uint64_t launched() const { return launched_; }
  uint64_t policy_version() const { return policy_version_; }
  /// A policy version seen outside the pipeline (a learner push): never lowers it.
  void saw_policy_version(uint64_t v) { policy_version_ = std::max(policy_version_, v); }
  bool async() const { return settings_.mode == coordinator_mode::async; }
  uint64_t window() const { return async() ? settings_.max_staleness : 0; }
  const std::map<uint64_t, step_round>& rounds() const { return rounds_; }
  /// Training steps other than `key` under way.
  uint64_t steps_in_flight_besides(uint64_t key) const;

  uint64_t groups_dropped() const { return groups_dropped_; }
  uint64_t stale_dropped() const { return stale_dropped_; }
  double last_reward() const { return last_reward_; }
  double last_correct() const { return last_correct_; }

private:
  bool held_out_under_way() const;
  round_launch launch(step_round r, std::vector<problem> problems, size_t group_size);
  std::vector<trajectory> drop_stale(std::vector<trajectory> in, uint64_t& dropped) const;

  coordinator_settings settings_;
  problem_order order_;
  std::vector<problem> held_out_;
  std::map<uint64_t, step_round> rounds_;
  failed_step_counter failed_steps_;
  bool resumed_ = false;
  bool starting_ = true;
  bool paused_ = false;
  bool training_ = false;
  bool publishing_ = false;
  bool failed_ = false;
  uint64_t step_ = 0;
  uint64_t launched_ = 0;
  uint64_t first_step_ = 0;
  uint64_t policy_version_ = 0;
  uint64_t groups_dropped_ = 0;
  uint64_t stale_dropped_ = 0;
  double last_reward_ = 0;
  double last_correct_ = 0;
};

/// The value of the record named `name` (`fallback` when absent).
double metric_value(const std::vector<metric_record>& records, const std::string& name,
                    double fallback = 0);

} // namespace kbrl::episode
