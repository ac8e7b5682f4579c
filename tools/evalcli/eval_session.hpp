#pragma once
// One kbrl-eval invocation's actor system: the sampler (when completions are to be drawn, with
// the adapter applied and checked), the evaluator supervisor (spawned lazily) or, with a cluster
// manifest, the cluster's evaluator nodes (cluster_evaluators.hpp, reached before the sampler
// loads anything), and the scheduler (eval_scheduler.hpp), waited for until it is done.
//
// On a cluster the sampler stays in kbrl-eval's process (the built-in or a remote HTTP one): a
// cluster's sampler nodes load the model of their own run config and follow their learner's
// policy updates, so they do not draw from --model/--adapter, and sending them another policy
// would change what a training run shares them with.
//
// Signals: only while candidates are evaluated does SIGINT/SIGTERM wait for the next poll (every
// 200 ms); the process then leaves at once with exit status 130, the finished problems on disk
// (each file is written whole) and the scratch folder removed - the next run continues. A second
// signal ends the process immediately. Before (model loading) and after (shutdown) signals act
// as usual: no file is ever half written, so nothing is lost either way.

#include "runtime/config/manifest.hpp"
#include "runtime/sampler/sampler_settings.hpp"
#include "tools/evalcli/eval_scheduler.hpp"
#include "tools/evalcli/evaluator_setup.hpp"

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
  /// --manifest: evaluate on this cluster's evaluator nodes instead of local evaluators.
  std::optional<config::cluster_manifest> cluster;
  /// The settings every evaluator node must judge with (verdict_settings() of the run config).
  setting_values cluster_settings;
};

/// Runs ctx's work to the end. Fails when no evaluator node of the cluster can be used
/// (errc::node_unreachable / invalid_config naming each node; nodes that cannot be used while
/// others can are warned about on stderr), or when the sampler cannot start or did not take the
/// adapter (errc::invalid_config / invalid_argument with the sampler's reason); failures during
/// the run are in ctx->failure. Does not return on an interruption (exit status 130).
caf::error run_session(std::shared_ptr<run_context> ctx, const evaluator_setup& evaluators,
                       const session_options& o);

} // namespace kbrl::evalcli
