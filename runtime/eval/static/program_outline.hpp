#pragma once
// The outline of a Python program for the static checks: def and class blocks nested by
// indentation, module-level statements, and walks over the names of a code range. Works on code
// text whose strings and comments are blanked (lex_python's `code`).

#include "runtime/eval/static/source_text.hpp"

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace kbrl::eval::static_impl {

/// A def or class and the range of code text it covers (header to the end of its body).
struct block {
  bool is_class = false;
  std::string name;
  size_t indent = 0;
  size_t begin = 0; ///< start of the header's line
  size_t end = 0;   ///< start of the first line after the body
  int parent = -1;  ///< enclosing block, -1 at module level
  std::vector<std::string> decorators;
};

/// A logical line at module level that is not a def, class or decorator.
struct statement {
  size_t begin = 0;
  size_t end = 0;
};

struct outline {
  std::vector<block> blocks;
  std::vector<statement> top_level;
};

/// Splits code text (strings and comments already blanked) into logical lines and nests def
/// and class blocks by indentation.
outline make_outline(std::string_view code);

/// Identifiers in [b, e) of code text that are not attributes (not preceded by '.').
template <class Fn>
void for_each_name(std::string_view code, size_t b, size_t e, Fn&& f) {
  size_t k = b;
  while (k < e) {
    if (is_ident_start(code[k]) && (k == 0 || !is_ident_byte(code[k - 1]))) {
      size_t s = k;
      while (k < e && is_ident_byte(code[k]))
        ++k;
      size_t before = s;
      while (before > 0 && (code[before - 1] == ' ' || code[before - 1] == '\t'))
        --before;
      bool attribute = before > 0 && code[before - 1] == '.';
      f(code.substr(s, k - s), attribute, k);
      continue;
    }
    ++k;
  }
}

/// The attribute after `self.` at offset `k` (just past "self"), or "".
std::string_view self_attribute(std::string_view code, size_t k, size_t e);

/// The index of the top-level class with this name, or -1.
int top_level_class(const outline& ol, std::string_view name);

} // namespace kbrl::eval::static_impl
