#pragma once
// Supervised fine-tuning of every weight of a (small) model on prompt + completion sequences:
// the warm start that gives a fresh policy something to begin RL from. Unlike the LoRA trainer
// (runtime/train/trainer.hpp), nothing is frozen.
//
// The weights live in one flat float32 vector and their gradients in another, as the LoRA
// trainer keeps its factors (lora_parameters.hpp): each weight is a leaf viewing its slice, and
// autograd accumulates straight into the gradient vector, so clipping and AdamW
// (runtime/train/optimizer.hpp) act on one tensor each. The layers are the loaded transformer's
// own (run through transformer::run_layer); the embedding (tied with the output head) and the
// final norm are held here, read from the same checkpoint.
//
// A step: sequences right-padded into one batch -> embedding -> layers -> final norm -> logits
// of the positions that predict completion tokens only -> mean cross-entropy over those tokens
// -> backward -> clip -> AdamW with warm-up and cosine decay. Epochs visit the examples in a
// seeded shuffle; with the same seed, examples and thread count a run repeats bit for bit on the
// CPU. Not thread-safe; one owner drives it.

#include "runtime/model/safetensors.hpp"
#include "runtime/model/transformer.hpp"
#include "runtime/train/optimizer.hpp"

#include <ATen/core/Tensor.h>
#include <caf/expected.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace kbrl::warmstart {

/// One training sequence: the loss covers the completion tokens.
struct supervised_example {
  std::vector<int32_t> prompt_tokens;     ///< non-empty
  std::vector<int32_t> completion_tokens; ///< non-empty; ends with the end-of-turn token
};

struct finetune_options {
  int64_t epochs = 30;           ///< passes over the examples, > 0
  int64_t batch_sequences = 8;   ///< sequences per optimiser step, > 0
  double lr = 2e-3;              ///< peak learning rate of AdamW, > 0
  double min_lr_ratio = 0.05;    ///< cosine decay ends at lr * this, in [0, 1]
  int64_t warmup_steps = 20;     ///< linear warm-up, >= 0
  double weight_decay = 0.01;    ///< decoupled, >= 0 (applied to every weight)
  double clip_norm = 1.0;        ///< global gradient norm; 0: no clipping
  uint64_t seed = 0;             ///< the order of examples in each epoch
};

/// Progress after one optimiser step.
struct finetune_progress {
  int64_t epoch = 0, epochs = 0; ///< 1-based epoch
  int64_t step = 0, steps = 0;   ///< optimiser steps done / in all
  double loss = 0;               ///< mean cross-entropy of this step's completion tokens
  double epoch_loss = 0;         ///< token-weighted mean over the epoch so far
  double lr = 0;
  double tokens_per_s = 0;       ///< tokens (prompt + completion) trained per second so far
  double elapsed_s = 0;
  double remaining_s = 0;        ///< estimate from the pace so far
  bool epoch_done = false;       ///< the last step of its epoch
};

/// Trains all weights of one model (see above).
class full_finetune {
public:
  /// Loads the model directory `dir` in float32 on the CPU. Fails with the loader's errors,
  /// with errc::invalid_argument for options out of range or a model whose embedding is not
  /// tied to its output head (the layout kbrl's warm start makes).
  static caf::expected<std::unique_ptr<full_finetune>> create(const std::filesystem::path& dir,
                                                              const finetune_options& options);

  /// Runs every epoch over `examples`, calling `progress` after each step. Fails with
  /// errc::invalid_argument (nothing trained) for an empty set, an empty prompt or completion,
  /// or a token outside the vocabulary, naming the example; with errc::internal (torch's text)
  /// if the computation fails.
  caf::expected<void> train(const std::vector<supervised_example>& examples,
                            const std::function<void(const finetune_progress&)>& progress = {});

  /// The mean cross-entropy per completion token over `examples`, without gradients.
  caf::expected<double> loss(const std::vector<supervised_example>& examples);

  /// Writes the weights as `path` (a safetensors file, atomically) in `dtype`, with the
  /// checkpoint's names; the tied output head is not written (as transformers saves it).
  caf::expected<void> save(const std::filesystem::path& path, model::st_dtype dtype) const;

  /// Weights trained (elements).
  int64_t parameter_count() const { return flat_.numel(); }
  const model::transformer& model() const { return model_; }

private:
  explicit full_finetune(model::transformer model) : model_(std::move(model)) {}
  /// Mean cross-entropy of the batch's completion tokens (a graph when grad mode is on), and
  /// how many completion tokens it covered.
  std::pair<at::Tensor, int64_t> batch_loss(const std::vector<const supervised_example*>& batch);
  caf::expected<void> check(const std::vector<supervised_example>& examples) const;

  model::transformer model_;
  finetune_options options_;
  at::Tensor embed_, norm_;                              ///< leaves viewing flat_
  std::vector<std::pair<std::string, at::Tensor>> weights_; ///< checkpoint name, leaf
  at::Tensor flat_, grads_;
  train::adamw optimizer_;
};

} // namespace kbrl::warmstart
