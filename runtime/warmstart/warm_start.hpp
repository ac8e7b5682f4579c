#pragma once
// The supervised warm start (kbrl-warmstart): from a folder of problems, example answers
// (solutions.hpp) and a run config's prompt.* keys to a tiny policy in the Hugging Face layout
// that kbrl's samplers, learner and evaluators load.
//
//   1. prompts   every example's first-turn prompt, rendered as the episodes render it
//                (episode::conversation with the config's prompt settings, ChatML)
//   2. tokenizer a byte-level BPE trained on the prompts and completions (bpe_trainer.hpp):
//                tokenizer.json, tokenizer_config.json (ChatML template, eos <|im_end|>)
//   3. model     a qwen2 config.json (tied embeddings) and generation_config.json; random
//                weights (write_random_checkpoint, seeded)
//   4. training  every weight, cross-entropy on the completion tokens plus the closing
//                <|im_end|> (full_finetune.hpp); the prompt ids are episode::prompt_tokens() of
//                the loaded tokenizer, the very ids an RL episode samples from
//   5. output    model.safetensors (atomically) and warmstart.json: the command line, seed,
//                sizes, SHA-256 of the data and the config, the loss before and after
//
// With the same inputs, seed and thread count, two runs write the same bytes.

#include "messages/data.hpp"
#include "runtime/model/safetensors.hpp"
#include "runtime/warmstart/full_finetune.hpp"

#include <caf/expected.hpp>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace kbrl::warmstart {

/// The shape of the model made (qwen2 layout; see model_config.hpp for each field).
struct policy_shape {
  int64_t hidden_size = 192;
  int64_t intermediate_size = 512;
  int64_t num_hidden_layers = 4;
  int64_t num_attention_heads = 6;
  int64_t num_key_value_heads = 2;
  int64_t max_position_embeddings = 2048;
  double rope_theta = 10000.0;
};

struct warm_start_options {
  std::string problems_root;   ///< folder with level<N>/ folders of problem files
  std::string solutions_path;  ///< solutions.jsonl
  std::string config_path;     ///< run config whose prompt.* keys shape the prompts; "": defaults
  std::filesystem::path output;///< the model directory written (created if missing)
  kernel_backend backend = kernel_backend::torch;       ///< what the prompts ask for
  kernel_precision precision = kernel_precision::fp32;
  int32_t vocab_size = 2048;   ///< tokenizer ids in all (fewer if the data runs out of pairs)
  policy_shape shape;
  finetune_options training;   ///< training.seed also seeds the random initialisation
  model::st_dtype dtype = model::st_dtype::bf16; ///< of the weights written
  std::string command_line;    ///< recorded in warmstart.json
};

/// What a warm start did.
struct warm_start_result {
  size_t examples = 0;
  size_t problems = 0;
  int32_t vocab_size = 0;
  int64_t parameters = 0;
  size_t longest_prompt = 0, longest_completion = 0; ///< tokens
  double mean_prompt = 0, mean_completion = 0;       ///< tokens
  double initial_loss = 0, final_loss = 0;           ///< per completion token, no dropout
  double train_seconds = 0;
};

/// Runs the warm start (see above), reporting training progress through `progress`. Fails with
/// the error of the step that failed: a bad input names its file (and line), a failed write
/// names the path.
caf::expected<warm_start_result> run_warm_start(
  const warm_start_options& options,
  const std::function<void(const finetune_progress&)>& progress = {});

/// The problems under `root`: every level<N>/ folder it holds, problems set to `backend` and
/// `precision`. Fails if there is no such folder or no problem.
caf::expected<std::vector<problem>> load_problem_folder(const std::string& root,
                                                        kernel_backend backend,
                                                        kernel_precision precision);

/// tokenizer_config.json for a ChatML policy: eos <|im_end|>, pad <|endoftext|>, no bos, and a
/// template that kbrl's chat_format recognises as "chatml" without a default system prompt.
std::string chatml_tokenizer_config_json();

} // namespace kbrl::warmstart
