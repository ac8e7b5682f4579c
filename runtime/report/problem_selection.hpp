#pragma once
// Which problems an evaluation covers: levels ("--levels 1,2") and problem numbers
// ("--problems 1-20,25") from a problem source, which is one of
//   a KernelBench checkout           ROOT/KernelBench/level<L>/<N>_<Name>.py
//   a folder of levels               ROOT/level<L>/<N>_<Name>.py
//   a flat folder of problem files   ROOT/<N>_<Name>.py   (one level only: the one asked for)

#include "messages/data.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kbrl::report {

/// A set of problem numbers given as ranges; empty means every number.
struct number_set {
  std::vector<std::pair<int32_t, int32_t>> ranges; ///< inclusive [first, last]

  bool all() const { return ranges.empty(); }
  bool contains(int32_t n) const;
  /// "1-20,25", or "all".
  std::string to_string() const;
};

/// Parses "1,2" (levels 1..99, each once). `flag` names the option in errors.
caf::expected<std::vector<int32_t>> parse_levels(const std::string& text,
                                                 const std::string& flag = "--levels");

/// Parses "1-20,25" (numbers >= 0, first <= last); "" or "all" is every number.
caf::expected<number_set> parse_number_set(const std::string& text,
                                           const std::string& flag = "--problems");

/// The problems of `levels` under `root` whose numbers are in `numbers`, ordered by level and
/// number. A flat folder of problem files serves one level (the only one in `levels`). Fails with
/// errc::invalid_argument when a level has no folder under root, or when no problem of a level
/// is in `numbers` (the text names the level, the numbers and where it looked).
caf::expected<std::vector<problem>> select_problems(const std::string& root,
                                                    const std::vector<int32_t>& levels,
                                                    const number_set& numbers);

} // namespace kbrl::report
