#pragma once
// Data-parallel LoRA training: R replicas of the model (one per device), each with its own
// lora_trainer, that take every optimisation step together and stay identical.
//
// A step over samples (R > 1):
//
//   shard      shard_by_tokens(): the samples dealt to the replicas, balanced by tokens
//              (deterministic: the same step gives the same shards)
//   gradients  every replica, on its own thread: compute_shard_gradients() of its shard with the
//              aggregation weights of the WHOLE step, so the replicas' gradients add up to the
//              single-device gradient of the step (rl::aggregation_weights)
//   summary    one small all-reduce of a table with a row per replica: whether its share failed,
//              its loss terms and counts, and a checksum of its parameters. Every replica enters
//              it even when its share failed, so one replica's bad sample fails the step on all
//              of them with that replica's error, and nothing waits for a collective that never
//              comes. Diverged checksums fail the step too (errc::internal).
//   all-reduce ONE all-reduce (sum) of the flat gradient bucket (lora_parameters)
//   update     clipping and AdamW on every replica (lora_trainer::apply_gradients)
//
// Why every replica updates instead of rank 0 + broadcast: after the all-reduce every replica
// holds the same summed gradient, and clipping and AdamW are the same element-wise arithmetic on
// the same values, so the parameters stay bit-identical (the checksum verifies this each step)
// while the update costs O(P) local work instead of a broadcast of P values after it.
//
// The result equals single-device training up to the order of floating-point sums (the bucket
// sums R partial gradients; micro-batches differ). Step figures are merged: counts and loss
// terms summed, max_ratio the maximum, grad_norm/lr/step from the update, seconds the step's
// wall time. Rank 0 is the primary replica: its trainer writes checkpoints and its adapter is
// published; after resuming rank 0 from a checkpoint, sync_replicas() copies its state to the
// others.
//
// LoRA dropout: each replica's trainer has its own generator, seeded alike; the masks differ
// from a single device's (other shapes) and a checkpoint stores rank 0's generator only.
//
// Ranks are threads of this process today and meet at an in-process store; collective_group.hpp
// has the TCP store a group spanning processes or nodes would meet at instead.
//
// With one replica there is no group and no thread: step() is lora_trainer::step().

#include "runtime/model/lora_adapter.hpp"
#include "runtime/model/transformer.hpp"
#include "runtime/train/collective_group.hpp"
#include "runtime/train/trainer.hpp"

#include <caf/expected.hpp>

#include <cstddef>
#include <memory>
#include <vector>

namespace kbrl::train {

/// The indices of `samples` each of `ranks` replicas computes: samples by length (prompt +
/// completion), longest first (ties: lower index first), each dealt to the replica with the
/// fewest tokens so far (ties: the lower rank); each shard in ascending index order. Samples
/// without completion tokens are dealt too (they cost nothing). ranks >= 1.
std::vector<std::vector<std::size_t>> shard_by_tokens(const std::vector<training_sample>& samples,
                                                      int ranks);

/// Merges the figures of the replicas' shares of one step (see the header comment).
step_stats merge_shard_stats(const std::vector<step_stats>& shards);

/// The replicas of one data-parallel learner (see above). Not thread-safe: one owner drives it.
class data_parallel_trainer {
public:
  /// Trainers for `models` (one per replica, rank i on models[i]'s device; all with the same
  /// weights), created as lora_trainer::create(model, options, initial), and the replica group
  /// joined over `group` (skipped for one model). Fails with the errors of lora_trainer::create
  /// and join_group (errc::not_supported when the backend is missing from this build), and with
  /// errc::invalid_argument for no models.
  static caf::expected<std::unique_ptr<data_parallel_trainer>>
  create(std::vector<std::unique_ptr<model::transformer>> models, const trainer_options& options,
         const group_options& group = {}, const model::lora_adapter* initial = nullptr);

  ~data_parallel_trainer();

  /// One optimisation step of all replicas on `samples` (see the header comment). Errors as
  /// lora_trainer::step(), the text naming the replica whose share failed; errc::internal when
  /// a collective fails (the group is then unusable and every later step fails saying so).
  caf::expected<step_stats> step(const std::vector<training_sample>& samples);

  /// Copies the primary's state (factors, AdamW moments and step, dropout generator) into every
  /// other replica: after restoring the primary from a checkpoint.
  caf::expected<void> sync_replicas();

  /// The primary replica (rank 0): checkpoints, the published adapter, figures.
  lora_trainer& primary() { return *trainers_.front(); }
  const lora_trainer& primary() const { return *trainers_.front(); }
  /// Replica `rank`'s trainer and model (tests compare them).
  const lora_trainer& replica(int rank) const { return *trainers_.at(rank); }
  const model::transformer& model(int rank = 0) const { return *models_.at(rank); }
  int ranks() const { return static_cast<int>(trainers_.size()); }
  /// "gloo", "nccl", or "" for one replica.
  std::string backend() const;

private:
  /// Whose failure a replica's error is: its own share's (or its update's), the group's (a
  /// collective failed, the parameters diverged: the group is unusable after), or neither
  /// (another replica's share failed and this one relays it).
  enum class rank_failure { none, own, group };

  data_parallel_trainer() = default;
  /// Replica `rank`'s part of a step, on its own thread.
  caf::expected<step_stats> rank_step(int rank, const std::vector<training_sample>& samples,
                                      const std::vector<std::size_t>& shard,
                                      rank_failure& failure);

  std::vector<std::unique_ptr<model::transformer>> models_;
  std::vector<std::unique_ptr<lora_trainer>> trainers_;
  std::vector<std::unique_ptr<collective_group>> groups_; ///< empty for one replica
  caf::error broken_;                                      ///< why the group is unusable
};

} // namespace kbrl::train
