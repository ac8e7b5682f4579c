#pragma once
// A run's config as TensorBoard shows it: every setting as a hyperparameter (HParams dashboard,
// which `wandb sync --sync-tensorboard` also reads as the run's config) and the TOML as text.

#include "runtime/config/settings.hpp"
#include "runtime/report/tfevents_writer.hpp"

#include <string>
#include <vector>

namespace kbrl::report {

/// Every setting of `run` by its key: numbers as numbers, booleans as booleans, strings and
/// lists as text.
std::vector<hparam> hparams_of(const config::run_config& run);

/// The config's TOML as markdown that keeps its layout (an indented code block).
std::string config_markdown(const std::string& toml);

} // namespace kbrl::report
