#pragma once
// The problems a run trains and evaluates on: where they come from, which are held out, and the
// order they are handed out in.
//
//   load_problem_set   a KernelBench checkout (levels, number ranges) or any folder of problem
//                      files in its format
//   split_problems     a seeded train/eval split that depends only on each problem's id and the
//                      seed (adding a problem never moves the others)
//   problem_order      the training order: a seeded shuffle per pass over the train split, with
//                      a cursor that a checkpoint saves so a resumed run sees the same sequence
//   curriculum         stages of levels, advanced after a number of steps or once the correct
//                      rate of the current stage reaches a threshold

#include "messages/data.hpp"

#include <caf/expected.hpp>

#include <string>
#include <vector>

namespace kbrl::episode {

/// An inclusive range of problem numbers, parsed from "1-20" or "7".
struct number_range {
  int32_t first = 0, last = 0;
};

/// Parses "1-20,25,30-32" (empty: every number). Errors name the bad part.
caf::expected<std::vector<number_range>> parse_number_ranges(const std::string& text);

struct problem_selection {
  std::string root;                   ///< a KernelBench checkout or folder with levelN/ folders
  std::vector<int32_t> levels{1, 2};
  std::vector<number_range> numbers;  ///< empty: all
  kernel_backend backend = kernel_backend::cuda;
  kernel_precision precision = kernel_precision::fp32;
};

/// The selected problems, ordered by level then number. Fails naming the root and level when a
/// level folder is missing, and when the selection is empty.
caf::expected<std::vector<problem>> load_problem_set(const problem_selection& selection);

struct problem_split {
  std::vector<problem> train, eval;
};

/// Each problem goes to eval with probability `eval_fraction`, decided by a hash of its id and
/// `seed`; at least one problem stays in train.
problem_split split_problems(const std::vector<problem>& problems, double eval_fraction,
                             uint64_t seed);

/// The order training problems are handed out in.
class problem_order {
public:
  problem_order(std::vector<problem> problems, uint64_t seed);

  /// The next `n` problems (passes wrap around, each pass reshuffled).
  std::vector<problem> next(size_t n);

  /// How many problems were handed out so far: what a checkpoint stores.
  uint64_t cursor() const { return cursor_; }
  /// Continues as if `cursor` problems had been handed out.
  void seek(uint64_t cursor);
  size_t size() const { return problems_.size(); }

private:
  const problem& at(uint64_t index) const;
  std::vector<problem> problems_;
  uint64_t seed_;
  uint64_t cursor_ = 0;
  mutable uint64_t shuffled_pass_ = UINT64_MAX;
  mutable std::vector<size_t> permutation_;
};

/// Levels trained on in stages: stage i uses `levels[i]`; it ends after `steps` steps (when > 0)
/// or when the correct rate over its last `window` turns reaches `correct_rate` (when > 0).
struct curriculum_stage {
  std::vector<int32_t> levels;
  uint64_t steps = 0;
  double correct_rate = 0;
  size_t window = 64;
};

class curriculum {
public:
  explicit curriculum(std::vector<curriculum_stage> stages);

  /// The current stage's levels (all levels when there are no stages).
  const std::vector<int32_t>& levels() const;
  size_t stage() const { return stage_; }

  /// Records one step's turns (whether each was correct); returns true if the stage advanced.
  bool record_step(const std::vector<bool>& correct);

private:
  std::vector<curriculum_stage> stages_;
  size_t stage_ = 0;
  uint64_t steps_in_stage_ = 0;
  std::vector<bool> recent_;
};

} // namespace kbrl::episode
