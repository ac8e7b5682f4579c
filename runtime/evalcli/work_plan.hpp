#pragma once
// What a kbrl-eval run evaluates: its problems and one work item per candidate to score.
//
//   --generations DIR   one item per file of the folder (each turn file of a multi-turn sample
//                       is its own item, scored as it is); a sample without any file is one
//                       `missing` item. Always what the folder holds: nothing is generated.
//   --model, 1 turn     one item per (problem, sample): a completion to draw from the
//                       single-turn prompt, or the one already in OUT/generations/ (a continued
//                       run reuses what was drawn).
//   --model, T turns    one item per (problem, sample) that is a whole episode: T turns, each
//                       prompted with the previous answers and the evaluator's feedback on them
//                       (runtime/episode/prompts.hpp); it yields T records.

#include "messages/data.hpp"
#include "runtime/evalcli/eval_options.hpp"
#include "runtime/report/results_json.hpp"

#include <caf/error.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kbrl::evalcli {

/// One candidate to score, or one multi-turn episode to run.
struct work_item {
  size_t problem = 0;         ///< index into the plan's problems
  int32_t sample = 0;
  int32_t turn = 0;           ///< --generations: the file's turn
  int32_t turns = 1;          ///< > 1: an episode of that many turns (--model --turns T)
  std::string file;           ///< the candidate's file (--model, 1 turn: where its completion goes)
  std::string relative;       ///< recorded as the sample's source
  bool is_completion = false; ///< code must be extracted from the text
  bool generate = false;      ///< --model, 1 turn: no completion on disk yet
  bool missing = false;       ///< --generations: no file for this sample

  /// The records this item yields.
  size_t records() const { return turns > 1 ? static_cast<size_t>(turns) : 1; }
};

struct work_plan {
  std::vector<problem> problems;
  std::vector<work_item> items;
};

/// The problem source: --kernelbench, else $KERNELBENCH_ROOT ("" when neither).
std::string problem_root(const eval_options& o);

/// --generations: the problems the folder (and --levels/--problems) name and one item per file;
/// fills the run's mode, folder, levels, samples and turns into `info`. Fails with
/// errc::invalid_argument naming the folder, the level or the file that does not fit.
caf::error plan_generations(const eval_options& o, work_plan& plan, report::run_info& info);

/// --model: the problems of --levels/--problems and one item per sample (an episode of
/// --turns turns when > 1); completions go under `generations_root`. Fails with
/// errc::invalid_argument (no --levels, a bad level or number list, no such problems).
caf::error plan_model(const eval_options& o, const std::string& generations_root, work_plan& plan,
                      report::run_info& info);

} // namespace kbrl::evalcli
