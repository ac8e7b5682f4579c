#pragma once
// Where kbrl-eval logs its metrics to TensorBoard, and at which step, so that evaluation curves
// sit beside a training run's curves (scalars named eval/..., eval_metrics.hpp's metric_scalars).
//
//   --tensorboard DIR   a training run's folder (it holds config.toml, metrics.jsonl or a
//                       tensorboard/ folder): the events go to DIR/tensorboard/, where the
//                       training run writes its own; any other folder is the log folder itself.
//   --step N            the step; without it, the step of the --adapter checkpoint: the adapter
//                       is <root>/step-NNNNNN/adapter (or the step folder itself) of a learner's
//                       checkpoints, and <root>/checkpoints.jsonl lists that folder with its step
//                       (runtime/train/checkpoint_list.hpp).

#include <caf/expected.hpp>

#include <cstdint>
#include <string>

namespace kbrl::evalcli {

struct tensorboard_target {
  std::string log_dir;     ///< where the event file goes
  int64_t step = 0;
  std::string step_source; ///< "--step", or the checkpoints.jsonl the step was read from
};

/// The step of the learner checkpoint `adapter_dir` belongs to. Fails with
/// errc::invalid_argument naming the folder and where the step was looked for.
caf::expected<int64_t> checkpoint_step(const std::string& adapter_dir, std::string* source = nullptr);

/// The target for --tensorboard `dir`, --step `step` (< 0: not given) and --adapter `adapter`.
/// Fails with errc::invalid_argument when no step is given and none can be read from the adapter.
caf::expected<tensorboard_target> resolve_tensorboard(const std::string& dir, int64_t step,
                                                      const std::string& adapter);

} // namespace kbrl::evalcli
