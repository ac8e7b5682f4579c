#pragma once
// One kbrl-eval invocation's actor system: the sampler (when completions are to be drawn, with
// the adapter applied and checked), the evaluator supervisor (spawned lazily), and the scheduler
// (eval_scheduler.hpp), waited for until it is done.
//
// Signals: only while candidates are evaluated does SIGINT/SIGTERM wait for the next poll (every
// 200 ms); the process then leaves at once with exit status 130, the finished problems on disk
// (each file is written whole) and the scratch folder removed - the next run continues. A second
// signal ends the process immediately. Before (model loading) and after (shutdown) signals act
// as usual: no file is ever half written, so nothing is lost either way.

#include "runtime/evalcli/eval_scheduler.hpp"
#include "runtime/evalcli/evaluator_setup.hpp"
#include "runtime/sampler/sampler_settings.hpp"

#include <caf/error.hpp>

#include <memory>
#include <optional>
#include <string>

namespace kbrl::evalcli {

struct session_options {
  std::optional<sampling::sampler_settings> sampler; ///< set for --model runs
  bool draws = false;            ///< some completion is to be drawn (else no sampler starts)
  std::string model;             ///< for the log line
  std::string adapter_dir;       ///< applied to the sampler as policy version 1; "" for none
  std::string output_dir;        ///< named in the interruption message
};

/// Runs ctx's work to the end. Fails when the sampler cannot start or did not take the adapter
/// (errc::invalid_config / invalid_argument with the sampler's reason); failures during the run
/// are in ctx->failure. Does not return on an interruption (exit status 130).
caf::error run_session(std::shared_ptr<run_context> ctx, const evaluator_setup& evaluators,
                       const session_options& o);

} // namespace kbrl::evalcli
