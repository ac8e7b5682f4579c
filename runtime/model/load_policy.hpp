#pragma once
// One way for every role to get its policy model from a run config's words: a directory or hub
// id, "bf16" or "fp32", and a GPU index (-1: the CPU).

#include "runtime/model/policy_dir.hpp"
#include "runtime/model/transformer.hpp"

#include <caf/expected.hpp>

#include <filesystem>
#include <string>

namespace kbrl::model {

/// Where and how a role runs the model.
struct policy_placement {
  std::string dtype = "bf16"; ///< "bf16" or "fp32"
  int gpu = -1;               ///< CUDA device index; -1: the CPU
};

/// The transformer options for `placement`.
transformer_options placement_options(const policy_placement& placement);

/// Resolves `model_ref` and loads it as `placement` says.
caf::expected<transformer> load_policy(const std::string& model_ref,
                                       const policy_placement& placement);

} // namespace kbrl::model
