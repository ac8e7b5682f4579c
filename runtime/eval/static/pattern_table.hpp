#pragma once
// The pattern table of the static checks: for each rule, regular expressions over the Python
// code (strings and comments blanked, import aliases resolved) or over the kernel source (the
// string literals' values, C comments removed), compiled once; plus the helper patterns the
// structural checks use.

#include "runtime/eval/static/regex.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kbrl::eval::static_impl {

/// Where a pattern looks: Python code (strings and comments blanked, names resolved through the
/// import table), the code as written (for rules about the spelling itself), or kernel source
/// (string contents, C comments removed).
enum class scope : uint8_t { code, written, kernel };

/// `forbid`: every match is a finding at the rule's level. `suspect`: every match is a finding
/// of at most `warning` while the rule runs at its default (a spelling with honest uses; an
/// override of the rule sets the level of all its patterns). `require`: the rule fires when no
/// pattern of the group matches (patterns of one rule and group are alternatives; groups are
/// checked in order and the first unmet one is reported).
enum class pattern_kind : uint8_t { forbid, suspect, require };

struct pattern_def {
  const char* rule;
  scope where;
  pattern_kind kind;
  const char* hints; ///< '|'-separated literals, one of which every match contains ("": none)
  const char* regex; ///< PCRE2, byte mode, multiline, any of \r \n \r\n as line break
  const char* message; ///< "{m}" is replaced by the matched text
  int group = 0;       ///< for `require` patterns
};

using pattern_list = std::pair<const pattern_def*, size_t>;

/// KernelBench's rules and the backend requirements (patterns_kernelbench.cpp).
pattern_list kernelbench_patterns();

/// kbrl's rules against escaping the sandbox and reaching the reference (patterns_sandbox.cpp).
pattern_list sandbox_patterns();

struct compiled_pattern {
  size_t rule;
  scope where;
  pattern_kind kind;
  int group;
  std::vector<std::string> hints;
  code_ptr re;
  std::string message;
};

/// Patterns of the structural checks (not tied to one rule's table entry).
struct helper_patterns {
  code_ptr load_assign = no_regex();  // NAME = ...load_inline(  /  self.NAME = ...
  code_ptr load_call = no_regex();    // load_inline( / load(
  code_ptr triton_deco = no_regex();  // @triton.jit / autotune / heuristics
  code_ptr self_assign = no_regex();  // self.X = / self.X[...] = / self.X += / mutators
  code_ptr name_mutate = no_regex();  // NAME[...] = / NAME.update( ...
  code_ptr global_decl = no_regex();  // global a, b
  code_ptr top_assign = no_regex();   // NAME = (at the start of a statement)
  code_ptr returned = no_regex();     // a returned element that is stored state
  code_ptr coding = no_regex();       // # -*- coding: NAME -*-
  code_ptr import_stmt = no_regex();  // import a.b as c, d
  code_ptr from_import = no_regex();  // from a import (b as c, d)
  code_ptr attr_assign = no_regex();  // NAME.attr... = (not an annotation)
  code_ptr setattr_call = no_regex(); // setattr(NAME,
  code_ptr custom_op = no_regex();    // torch.ops.<own namespace>.<op>
  code_ptr dispatch = no_regex();     // AT_DISPATCH_...( in kernel source
};

struct pattern_table {
  std::vector<compiled_pattern> patterns;
  helper_patterns helpers;
};

/// The table, built on first use (thread-safe; throws std::logic_error only on a kbrl bug).
const pattern_table& table();

} // namespace kbrl::eval::static_impl
