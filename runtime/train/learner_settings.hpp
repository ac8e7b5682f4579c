#pragma once
// How the learner is set up, read from the run config's learner.* keys (settings.cpp documents
// each one).

#include "runtime/rl/advantages.hpp"
#include "runtime/train/trainer.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <string>

namespace kbrl::config {
class run_config;
}

namespace kbrl::train {

struct learner_settings {
  std::string model;             ///< model directory or hub id (learner.model, else sampler.model)
  std::string dtype = "bf16";    ///< base weights: "bf16" or "fp32"
  int gpu = -1;                  ///< CUDA device; -1: the CPU
  trainer_options trainer;
  rl::advantage_options advantage;
  uint64_t max_staleness = 4;    ///< newest version - oldest version in a batch still trained on
  int64_t checkpoint_every = 50; ///< steps between checkpoints; 0: none
  int64_t keep_checkpoints = 3;  ///< 0: keep all
  bool resume = true;
  bool publish_bytes = true;     ///< adapter_model.safetensors bytes inside each policy_update
  std::string run_dir;           ///< the run's directory; the learner writes in <run_dir>/learner
};

/// The learner.* settings of `run` for a learner on `gpu` (-1: CPU) writing under `run_dir`.
/// Fails with errc::invalid_config naming the key for values the trainer refuses (e.g.
/// total_steps not above warmup_steps with the cosine schedule).
caf::expected<learner_settings> learner_settings_from(const config::run_config& run, int gpu,
                                                      const std::string& run_dir);

} // namespace kbrl::train
