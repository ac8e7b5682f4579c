#pragma once
// The evaluators of a kbrl-eval run, set up as kbrl-node and kbrl-bench-eval set them up: one
// evaluator per --gpu (one CPU evaluator without), CPU builders per eval.build_workers, the
// engine options of the run config's eval.* keys.
//
// Caches: with eval.cache_dir, reference timings (eager and torch.compile, kept apart) and built
// extensions are shared by every run that names the folder (a candidate built once is loaded,
// not built, next time); without it, reference timings stay with the output folder
// (OUT/.cache/reference_times.jsonl) and builds with this invocation (a scratch folder).

#include "actors/evaluator_supervisor.hpp"
#include "runtime/config/settings.hpp"
#include "runtime/evalcli/eval_options.hpp"

#include <caf/expected.hpp>

#include <string>
#include <vector>

namespace kbrl::evalcli {

struct evaluator_setup {
  std::vector<evaluator_slot> slots;
  eval::engine_options builder_engine;
  supervisor_settings supervision;
  std::string scratch; ///< the invocation's scratch folder under /tmp; the caller removes it
};

/// The evaluators for `o` and `run`, with a queue for `queue_capacity` requests. Creates the
/// scratch folder. Fails with errc::invalid_argument (an unknown static-check rule) or
/// errc::io_failure (no scratch folder).
caf::expected<evaluator_setup> setup_evaluators(const eval_options& o,
                                                const config::run_config& run,
                                                const std::string& output_dir,
                                                size_t queue_capacity);

} // namespace kbrl::evalcli
