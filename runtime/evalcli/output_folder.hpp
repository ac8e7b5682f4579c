#pragma once
// Opening a kbrl-eval output folder for a run (runtime/report/results_json.hpp lists its files):
// a folder holding a run with other settings is refused; otherwise run.json is (re)written, the
// problems finished before are read back, and what is left of the plan becomes this
// invocation's work.
//
// Continuing a run: a finished problem (OUT/problems/<id>.json) is not evaluated again; in an
// unfinished one, every sample is evaluated again except the turns of multi-turn samples found
// in their turn logs (turn_log.hpp) - a sample is finished when all its turns are logged.

#include "runtime/evalcli/run_context.hpp"
#include "runtime/report/results_json.hpp"

#include <caf/error.hpp>

#include <cstddef>
#include <string>

namespace kbrl::evalcli {

/// What a continued run found.
struct resumed {
  size_t problems_finished = 0; ///< read back whole
  size_t turns_logged = 0;      ///< turns of unfinished multi-turn samples read from their logs
};

/// Opens `output_dir` for the run `info` whose plan is in ctx.problems and ctx.items: checks
/// and writes run.json, creates ctx.ledger, restores finished problems, drops their items,
/// reads the turn logs of multi-turn items into ctx.logged, and sets ctx.expected and
/// ctx.output_dir. Fails with errc::invalid_argument (another run's folder, a damaged problem
/// file or turn log: the text names the file and what differs) or errc::io_failure.
caf::expected<resumed> open_output_folder(const std::string& output_dir,
                                          const report::run_info& info, run_context& ctx);

} // namespace kbrl::evalcli
