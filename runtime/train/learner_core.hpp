#pragma once
// What the learner actor does with a trajectory batch, without an actor system:
//
//   batch --staleness--> refused (errc::invalid_argument) when its oldest turn was sampled more
//     |                  than max_staleness versions ago, or claims a version not yet published
//     v
//   advantages (rl::compute_advantages; groups without signal dropped and counted)
//     |--- nothing left: no step; the current policy is answered again
//     v
//   samples -> trainer step -> version + 1 -> adapter written to <run>/learner/policy/v<version>
//     |                                       (PEFT layout; older versions pruned, the newest
//     v                                        max_staleness + 2 kept for lagging samplers)
//   checkpoint every checkpoint_every steps (<run>/learner/checkpoints, checkpoint.hpp)
//
// With several devices (learner_settings::gpus, or cpu_ranks on the CPU) the step is
// data-parallel over one model replica per device (data_parallel.hpp); the primary replica (the
// first device) is what is checkpointed and published.
//
// Policy versions count optimiser steps: version v is the adapter after v steps, version 0 the
// initial adapter (B = 0: the base model). On start the newest checkpoint is resumed (when
// learner.resume is on) and its version published again.

#include "messages/data.hpp"
#include "runtime/model/transformer.hpp"
#include "runtime/train/checkpoint.hpp"
#include "runtime/train/data_parallel.hpp"
#include "runtime/train/learner_settings.hpp"
#include "runtime/train/trainer.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kbrl::train {

/// Figures for the learner's status.
struct learner_report {
  uint64_t version = 0;
  int64_t step = 0;
  uint64_t batches_trained = 0;
  uint64_t batches_refused = 0;       ///< stale or malformed
  uint64_t batches_without_signal = 0;///< every group dropped: no step taken
  uint64_t groups_dropped = 0;        ///< groups without signal, over all batches
  std::optional<step_stats> last;     ///< the last step's figures
  double tokens_per_second = 0;       ///< of the last step (prompt + completion tokens)
  double mean_score = 0;              ///< of the last batch trained
  std::vector<double> advantages;     ///< of the last batch trained, one per turn
  /// Turns trained per policy version that sampled them, over the last batches.
  std::map<uint64_t, uint64_t> turns_by_version;
  int64_t trainable_parameters = 0;
  int64_t state_bytes = 0;            ///< factors, gradients and AdamW moments
  int64_t weight_bytes = 0;           ///< the frozen base model
  std::string last_checkpoint;        ///< directory of the newest checkpoint, or ""
  std::string resumed_from;           ///< the checkpoint this run resumed from, or ""
  std::string checkpoint_error;       ///< why the last checkpoint failed, "" after a success
};

/// The learner's work (see above). Not thread-safe: one owner drives it.
class learner_core {
public:
  /// Loads the model of `settings` (a directory or hub id) once per device, creates the
  /// trainers (data-parallel with several devices), resumes from
  /// the newest checkpoint if asked to, and writes the current policy. Fails with the errors of
  /// model loading (errc::invalid_config for an empty model name), of the trainer's options and
  /// of load_checkpoint(), and with errc::io_failure if the run directory cannot be written.
  static caf::expected<std::unique_ptr<learner_core>> start(const learner_settings& settings);

  /// As start(), with an already loaded model (tests); `model_name` labels policy updates.
  static caf::expected<std::unique_ptr<learner_core>>
  start_with(std::unique_ptr<model::transformer> model, std::string model_name,
             const learner_settings& settings);

  /// As start(), with already loaded replicas of one model (one per device; tests).
  static caf::expected<std::unique_ptr<learner_core>>
  start_with(std::vector<std::unique_ptr<model::transformer>> replicas, std::string model_name,
             const learner_settings& settings);

  /// Trains one step on `batch` and publishes the new version (see above). Fails, changing
  /// nothing, with errc::invalid_argument for a stale or malformed batch and errc::internal when
  /// the step fails; errc::io_failure if the new adapter cannot be written (the step is then
  /// done, and the next success publishes it). A failed checkpoint is not a failure of the
  /// step: report().checkpoint_error says why.
  caf::expected<policy_update> train(trajectory_batch batch);

  /// The newest published policy (with adapter bytes if publish_bytes).
  const policy_update& latest() const { return latest_; }
  const learner_report& report() const { return report_; }
  /// The primary replica's trainer.
  const lora_trainer& trainer() const { return replicas_->primary(); }
  /// All replicas (one, unless data-parallel).
  const data_parallel_trainer& replicas() const { return *replicas_; }
  const learner_settings& settings() const { return settings_; }

  /// Writes a checkpoint now (also done every checkpoint_every steps).
  caf::expected<checkpoint_entry> checkpoint();

  std::filesystem::path checkpoint_root() const;
  std::filesystem::path policy_root() const;

private:
  learner_core() = default;
  caf::expected<void> publish();
  caf::expected<void> check_staleness(const trajectory_batch& batch) const;

  learner_settings settings_;
  std::string model_name_;
  std::unique_ptr<data_parallel_trainer> replicas_;
  data_cursor cursor_;
  policy_update latest_;
  learner_report report_;
  std::deque<uint64_t> published_; ///< versions with a directory on disk, oldest first
};

} // namespace kbrl::train
