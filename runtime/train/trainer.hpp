#pragma once
// LoRA policy-gradient training of a transformer, one optimisation step at a time.
//
// A step over samples (training_sample.hpp):
//
//   1. check     every sample (tokens in the vocabulary, logprobs where the loss needs them)
//   2. weigh     aggregation weights over the whole step (rl::aggregation_weights)
//   3. pack      samples sorted by length (longest first) into micro-batches of at most
//                micro_batch_tokens padded tokens (a longer sample gets a micro-batch alone);
//                sequences are right-padded, so causal attention never sees the padding: the
//                layers attend causally without a mask tensor (model/attention.hpp)
//   4. per micro-batch, gradients accumulated into the flat bucket:
//        base      with kl_coef > 0: the base model's log-probabilities (the adapter switched
//                  off: same weights, no second model) under no_grad
//        forward   embed -> layers (each through checkpointed_layer() when gradient
//                  checkpointing is on) -> final norm -> the hidden states of the positions that
//                  predict completion tokens -> chunked_token_logprobs() at the sampler's
//                  temperature -> rl::compute_policy_loss()
//        backward  into the LoRA factors' flat gradient bucket
//   5. clip      the bucket's global L2 norm to clip_norm
//   6. update    AdamW with the scheduled learning rate; the step counter advances
//
// Frozen base weights stay in the model's run dtype (bfloat16 on a GPU); the factors, their
// gradients and the optimiser's moments are float32. LoRA dropout draws its masks from the
// trainer's own generator (seeded), so runs repeat exactly, and a checkpoint stores its state.
//
// The trainer attaches its factors to the model for its whole life (lora_parameters.hpp): the
// model then computes with the current adapter. Not thread-safe; one owner drives it.

#include "runtime/model/lora_adapter.hpp"
#include "runtime/model/transformer.hpp"
#include "runtime/rl/policy_loss.hpp"
#include "runtime/train/lora_parameters.hpp"
#include "runtime/train/optimizer.hpp"
#include "runtime/train/trainer_options.hpp"
#include "runtime/train/training_sample.hpp"

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <caf/expected.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kbrl::train {

/// The torch dtype of the factors.
at::ScalarType to_scalar_type(factor_dtype dtype);

/// What one step (or one gradient computation) did. Loss figures are the step's aggregated
/// values (rl::policy_loss_terms summed over micro-batches).
struct step_stats {
  int64_t step = 0;            ///< optimiser steps done after this one
  double loss = 0;             ///< policy term + kl_coef * kl
  double policy_loss = 0;
  double kl = 0;
  double clip_fraction = 0;    ///< weighted share of tokens whose ratio was clipped
  double mean_ratio = 0;
  double max_ratio = 0;
  double grad_norm = 0;        ///< before clipping
  double lr = 0;
  int64_t sequences = 0;
  int64_t completion_tokens = 0;
  int64_t tokens = 0;          ///< prompt + completion tokens of all sequences
  int64_t padded_tokens = 0;   ///< tokens the forward passes computed, padding included
  int64_t micro_batches = 0;
  double seconds = 0;
};

/// The trainer's state that a checkpoint stores (besides the adapter's configuration).
struct trainer_state {
  int64_t step = 0;
  at::Tensor values;       ///< flat factors (CPU)
  at::Tensor exp_avg;      ///< AdamW moments (CPU)
  at::Tensor exp_avg_sq;
  at::Tensor dropout_rng;  ///< the dropout generator's state (uint8, CPU)
};

/// LoRA training of one model (see above).
class lora_trainer {
public:
  /// A trainer for `model` (which must outlive it and stay at its address) with fresh factors
  /// (PEFT's initialisation, B = 0: the model computes as the base model), or with the factors of
  /// `initial` if given (its configuration then replaces the options' LoRA fields). Fails with
  /// errc::invalid_argument for options out of range or an adapter that does not fit the model.
  static caf::expected<std::unique_ptr<lora_trainer>>
  create(model::transformer& model, const trainer_options& options,
         const model::lora_adapter* initial = nullptr);

  /// One optimisation step on `samples` (see the header comment). Fails with
  /// errc::invalid_argument, changing nothing, for samples that do not pass
  /// check_training_samples(), or for an empty batch; with errc::internal (the text from torch)
  /// if the computation fails, in which case the parameters are unchanged.
  caf::expected<step_stats> step(const std::vector<training_sample>& samples);

  /// Steps 1-4 only: the gradient of the step's loss, left in gradients() (zeroed first).
  /// Dropout is on, as in step().
  caf::expected<step_stats> compute_gradients(const std::vector<training_sample>& samples);

  /// Steps 1-4 for one replica's share of a data-parallel step: the samples at the indices
  /// `shard` of the step's `samples`, weighted with the aggregation weights of the whole step,
  /// so the gradients (and loss terms) of all shards add up to compute_gradients(samples)'s.
  /// Only the shard is checked; its figures (sequences, tokens, loss terms) count the shard. An
  /// empty shard leaves a zero gradient. Errors as compute_gradients().
  caf::expected<step_stats> compute_shard_gradients(const std::vector<training_sample>& samples,
                                                    const std::vector<std::size_t>& shard);

  /// Steps 5-6 on the gradient in gradients(): clipping and the AdamW update; `stats` are the
  /// gradient computation's figures, returned with grad_norm (before clipping), lr and step
  /// filled in. Fails with errc::internal, parameters unchanged, if the norm is not finite.
  caf::expected<step_stats> apply_gradients(step_stats stats);

  /// The step's loss at the current parameters without gradients and without dropout.
  caf::expected<double> loss(const std::vector<training_sample>& samples);

  /// The flat parameters, and the flat gradient bucket (lora_parameters.hpp).
  const at::Tensor& parameters() const { return params_.values(); }
  const at::Tensor& gradients() const { return params_.grads(); }
  /// Copies `flat` (same size) into the parameters.
  void set_parameters(const at::Tensor& flat);

  const lora_parameters& lora() const { return params_; }
  const trainer_options& options() const { return options_; }
  const model::transformer& model() const { return *model_; }

  /// The current adapter, float copies on the CPU, ready for write_lora_adapter().
  model::lora_adapter adapter() const;

  /// Optimiser steps done.
  int64_t steps_done() const { return optimizer_.steps(); }
  /// The learning rate the next step will use.
  double next_lr() const;

  /// The state a checkpoint stores, and its restoration (resume). restore() fails with
  /// errc::invalid_argument if the tensors do not fit this trainer's layout.
  trainer_state state() const;
  caf::expected<void> restore(const trainer_state& state);

private:
  struct micro_batch;
  lora_trainer(model::transformer& model, trainer_options options, lora_parameters params);
  std::vector<micro_batch> pack(const std::vector<training_sample>& samples,
                                const std::vector<std::size_t>& shard) const;
  /// Forward (and backward when `train`) of every micro-batch of the samples at `shard`, with
  /// the whole step's aggregation weights; sums the loss terms.
  step_stats run(const std::vector<training_sample>& samples,
                 const std::vector<std::size_t>& shard, bool train);
  at::Tensor completion_logprobs(const micro_batch& mb, bool train);
  bool needs_logprobs() const;

  model::transformer* model_;
  trainer_options options_;
  lora_parameters params_;
  adamw optimizer_;
  at::Generator dropout_generator_;
};

} // namespace kbrl::train
