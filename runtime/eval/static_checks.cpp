// check_candidate: the entry point of the static checks. The pieces live in runtime/eval/static/
// (lexers, rule and pattern tables, import table and name resolution, the checker and its
// structural checks, one file each); runtime/eval/STATIC_RULES.md documents every rule.

#include "runtime/eval/static_checks.hpp"

#include "runtime/eval/static/checker.hpp"
#include "runtime/eval/static/pattern_table.hpp"

namespace kbrl::eval {

static_check_result check_candidate(std::string_view source, const static_check_options& opts) {
  static_impl::table(); // builds the pattern table before the first check (throws only on a bug)
  return static_impl::checker{source, opts}.run();
}

} // namespace kbrl::eval
