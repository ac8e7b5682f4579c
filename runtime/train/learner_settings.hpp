#pragma once
// How the learner is set up, read from the run config's learner.* keys (settings.cpp documents
// each one).

#include "runtime/rl/advantages.hpp"
#include "runtime/train/trainer_options.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kbrl::config {
class run_config;
}

namespace kbrl::train {

struct learner_settings {
  std::string model;             ///< model directory or hub id (learner.model, else sampler.model)
  std::string dtype = "bf16";    ///< base weights: "bf16" or "fp32"
  /// CUDA devices, one data-parallel replica on each (data_parallel.hpp); the first holds the
  /// primary replica (checkpoints, published adapters). kbrl-node gives the learner all of its
  /// node's GPUs. Empty: the CPU.
  std::vector<int> gpus;
  /// Replicas on the CPU when gpus is empty (learner.data_parallel_ranks), >= 1; more than one
  /// runs the data-parallel path over Gloo (tests).
  int cpu_ranks = 1;
  /// Seconds one collective of a data-parallel step may take (learner.data_parallel_timeout_s).
  double collective_timeout_s = 600;
  trainer_options trainer;
  rl::advantage_options advantage;
  uint64_t max_staleness = 4;    ///< newest version - oldest version in a batch still trained on
  int64_t checkpoint_every = 50; ///< steps between checkpoints; 0: none
  int64_t keep_checkpoints = 3;  ///< 0: keep all
  bool resume = true;
  bool publish_bytes = true;     ///< adapter_model.safetensors bytes inside each policy_update
  std::string run_dir;           ///< the run's directory; the learner writes in <run_dir>/learner
};

/// The primary replica's CUDA device (the first of gpus), -1 for the CPU.
int primary_gpu(const learner_settings& settings);

/// "cpu", "cpu x2", "cuda:0", "cuda:0,1,2,3": the learner's devices, for status and logs.
std::string describe_devices(const learner_settings& settings);

/// The learner.* settings of `run` for a learner on `gpu` (-1: CPU) writing under `run_dir`.
/// Fails with errc::invalid_config naming the key for values the trainer refuses (e.g.
/// total_steps not above warmup_steps with the cosine schedule).
caf::expected<learner_settings> learner_settings_from(const config::run_config& run, int gpu,
                                                      const std::string& run_dir);

} // namespace kbrl::train
