#pragma once
// The example answers a policy is warm-started on: a JSONL file, one example per line,
//
//   {"problem": "level1/1_ReLU", "label": "correct", "completion": "<think>...</think>\n<KERNEL>...</KERNEL>"}
//
// `problem` is a problem id (level folder / file stem, as load_problem_set names them),
// `completion` the assistant's whole answer text, and `label` what the evaluator makes of it:
//   correct    parses, runs and matches the reference
//   incorrect  parses and runs, the output differs (eval_error::mismatch)
//   compile    parses; the program does not load (syntax error, ModelNew(...) fails to build)
//   runtime    parses and loads; forward raises
//   format     no program can be taken from the answer (parse_answer fails: missing tag, no
//              ModelNew, ...)
// The mixture is the point: a policy fine-tuned on correct and wrong answers samples both, and
// RL has something to choose between. Blank lines are skipped.

#include "messages/data.hpp"

#include <caf/expected.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace kbrl::warmstart {

/// The labels a solution may carry, in the order above.
const std::vector<std::string>& solution_labels();

/// One line of a solutions file.
struct solution {
  std::string problem;    ///< problem id, e.g. "level1/1_ReLU"
  std::string label;      ///< one of solution_labels()
  std::string completion; ///< the answer text
  size_t line = 0;        ///< 1-based line in the file, for messages
};

/// Parses the text of a solutions file; `path` names it in errors. Fails with
/// errc::invalid_config as `path:line: what` for a line that is not a JSON object, a missing or
/// non-string field, an unknown label (listing the known ones), or an empty completion; and
/// when the file holds no example.
caf::expected<std::vector<solution>> parse_solutions(std::string_view text,
                                                     const std::string& path);

/// Reads and parses the solutions file at `path` (errc::io_failure if it cannot be read).
caf::expected<std::vector<solution>> load_solutions(const std::string& path);

/// Checks that every solution names one of `problems`; errc::invalid_config as
/// `path:line: problem "X" is not among the N problems under ROOT` otherwise.
caf::expected<void> check_problems_exist(const std::vector<solution>& solutions,
                                         const std::vector<problem>& problems,
                                         const std::string& path, const std::string& root);

} // namespace kbrl::warmstart
