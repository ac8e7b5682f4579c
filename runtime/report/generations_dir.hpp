#pragma once
// A generations folder: candidates (or model answers) that already exist, one file per sample,
// so kernels from any system or API model are scored on kbrl's evaluator (kbrl-eval
// --generations DIR). kbrl-eval --model writes its completions in the same layout, so its runs
// can be scored again the same way.
//
//   DIR/level<L>/<P>/sample_<S>.<ext>               one candidate per sample (single turn)
//   DIR/level<L>/<P>/sample_<S>/turn_<T>.<ext>      multi-turn: each turn a candidate
//   DIR/level_<L>_problem_<N>_sample_<S>_kernel.py  KernelBench's own runs folder
//
// <P> is the problem's number, alone ("19") or with its name ("19_ReLU"); L, N, S, T are decimal
// numbers (S and T from 0). <ext> says what the file holds:
//   .py          the program (ModelNew) itself, evaluated as it is
//   .txt, .md    a model's whole answer: the program is taken out of it by
//                eval::extract_kernel_code (```python block or <KERNEL>...</KERNEL>); no
//                program found is a format failure
// Anything else in DIR is ignored (and listed, so a misnamed file is noticed).

#include "messages/data.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kbrl::report {

/// One candidate file of a generations folder.
struct generation_file {
  int32_t level = 0;
  int32_t problem_number = 0;
  int32_t sample = 0;
  int32_t turn = 0;
  std::string path;            ///< where it is
  std::string relative;        ///< its path inside the generations folder
  bool is_completion = false;  ///< .txt/.md (code to extract) rather than .py (the program)
};

/// What a generations folder holds.
struct generations_scan {
  std::vector<generation_file> files; ///< ordered by level, problem, sample, turn
  std::vector<std::string> ignored;   ///< relative paths that match no layout (dotfiles left out)
};

/// Reads the layout of `dir`. Fails with errc::invalid_argument when `dir` is not a folder or
/// when two files claim the same (level, problem, sample, turn) - the error names both.
caf::expected<generations_scan> scan_generations(const std::string& dir);

/// Where a completion of `p` is written inside a generations folder:
/// level<L>/<name>/sample_<S>.txt, or level<L>/<name>/sample_<S>/turn_<T>.txt when the run has
/// several turns.
std::string completion_relative_path(const problem& p, int32_t sample, int32_t turn,
                                     bool multi_turn);

} // namespace kbrl::report
