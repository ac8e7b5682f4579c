#pragma once
// How a sampler actor is set up, read from the run config's sampler.* keys.

#include "runtime/remote/remote_options.hpp"

#include <cstdint>
#include <string>

namespace kbrl::config {
class run_config;
}

namespace kbrl::sampling {

struct sampler_settings {
  std::string backend = "builtin"; ///< "builtin" (libtorch on this node) or "remote"
  size_t queue_capacity = 1024;    ///< requests held at once; more are answered "busy"

  // built-in engine
  std::string model;               ///< model directory or Hugging Face id
  std::string dtype = "bf16";      ///< "bf16" or "fp32"
  int gpu = -1;                    ///< CUDA device; -1: CPU
  int32_t slots = 32;              ///< sequences decoded together (continuous batching)
  int32_t max_seq_len = 8192;      ///< prompt + completion tokens per sequence
  bool cuda_graphs = true;         ///< replay decode steps from CUDA graphs (on a GPU)

  // remote server
  remote::remote_sampler_options remote;

  /// JSONL of recorded completions (problem -> completion) whose text replaces the generated
  /// text, for timing runs with random weights (runtime/sampler/replay_backend.hpp). "": off.
  std::string replay_completions;
};

/// The sampler.* settings of `run` for the sampler on `gpu` (-1: CPU); `name` labels results.
sampler_settings sampler_settings_from(const config::run_config& run, int gpu,
                                       const std::string& name);

} // namespace kbrl::sampling
