#pragma once
// What kbrl-eval's command line says (tools/kbrl_eval.cpp parses it; --help documents each
// option). Plain data: the functions of runtime/evalcli/ read it, none of them parse it.

#include <cstdint>
#include <string>
#include <vector>

namespace kbrl::evalcli {

struct eval_options {
  std::string model;       ///< --model: model directory, hub id, or a remote server's model name
  std::string adapter;     ///< --adapter: PEFT adapter directory (a training checkpoint's)
  std::string generations; ///< --generations: score this folder instead of generating
  std::string output;      ///< --output: the run's folder (a re-run continues it)
  std::string kernelbench; ///< --kernelbench: problem source; "" reads $KERNELBENCH_ROOT
  std::string levels;      ///< --levels "1,2"
  std::string problems;    ///< --problems "1-20,25"; "" = all
  int32_t samples = 0;     ///< 0: --generations takes it from the folder, --model uses 1
  std::string prompt_style = "kernelbench"; ///< single-turn prompts: kernelbench or episode
  int32_t turns = 1;       ///< turns per sample; > 1 with --model runs multi-turn episodes
  bool turns_given = false;
  std::string backend = "cuda", precision = "fp32";
  std::vector<int> gpus;   ///< one evaluator per device; none: one CPU evaluator
  /// --manifest (or eval.manifest): evaluate on this cluster's evaluator nodes; "" = locally.
  std::string manifest;
  int sampler_gpu = -2;    ///< -2: the first of gpus, else the CPU; -1: the CPU
  int builders = -1;       ///< -1: eval.build_workers
  int32_t trials = 5, perf_trials = 100;
  double timing_precision = 0; ///< --timing-precision: 0 = KernelBench's fixed perf_trials
  bool no_timing = false;
  bool compare_compile = false; ///< --compare-torch-compile: also time a torch.compile reference
  std::string reference;   ///< --reference eager|compile; "" = eval.reference_mode
  double timeout_s = 300;
  uint64_t eval_seed = 42;
  double temperature = -1, top_p = 0.95; ///< temperature < 0: 0 with one sample, else 0.7
  int32_t top_k = 0, max_new_tokens = 4096;
  uint64_t sampling_seed = 0;
  std::string chat_format = "auto", tokenizer;
  std::string tensorboard; ///< a training run's folder or a TensorBoard log folder; "" = none
  int64_t step = -1;       ///< -1: the --adapter checkpoint's step
  /// --sample-counting: kernelbench (each problem's own samples, as KernelBench) or padded
  /// (every problem padded to the largest count, missing samples failed); eval_metrics.hpp.
  std::string sample_counting = "kernelbench";
  std::vector<std::string> config; ///< --config: TOML files and key=value overrides, in order
};

} // namespace kbrl::evalcli
