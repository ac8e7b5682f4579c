#pragma once
// What a kbrl-eval run works on, shared by its scheduler actor (tools/evalcli/eval_scheduler.hpp)
// and the output folder (output_folder.hpp): the plan, the ledger, the prompts, and where the
// evaluations go.

#include "messages/interfaces.hpp"
#include "runtime/evalcli/cluster_evaluators.hpp"
#include "runtime/evalcli/prompt_maker.hpp"
#include "runtime/evalcli/turn_log.hpp"
#include "runtime/evalcli/work_plan.hpp"
#include "runtime/report/run_ledger.hpp"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace kbrl::evalcli {

/// The evaluator supervisor, spawned when the first candidate needs it: a run whose answers hold
/// no program (format failures) starts no worker process at all. With a cluster (--manifest),
/// the evaluations go to the cluster's evaluator nodes instead (cluster_dispatch.hpp) and no
/// local supervisor is spawned.
struct lazy_evaluators {
  std::function<evaluator_supervisor_actor()> spawn;
  evaluator_supervisor_actor handle;
  std::vector<remote_evaluator_node> cluster; ///< --manifest: the evaluator nodes reached

  evaluator_supervisor_actor get() {
    if (!handle)
      handle = spawn();
    return handle;
  }
};

/// Everything the scheduler works on; the caller reads it only after the scheduler is done.
struct run_context {
  std::vector<problem> problems;
  std::vector<work_item> items;
  /// Per item: the turns a continued run found logged (multi-turn items only).
  std::vector<std::vector<logged_turn>> logged;
  std::unique_ptr<report::run_ledger> ledger;
  timing_options timing;
  prompt_maker prompts;
  std::string output_dir;
  std::string generations_root;   ///< --model: where completions are written
  size_t generation_limit = 64;   ///< completions in flight at once
  size_t expected = 0;            ///< records this invocation files (restored ones included)
  size_t recorded = 0;
  std::string evaluated_on;       ///< --manifest runs: the nodes reached (describe_cluster())
  std::string failure;            ///< set when the run cannot go on (a file cannot be written,
                                  ///< every evaluator node of the cluster is lost)
};

} // namespace kbrl::evalcli
