// The shape of the program: a ModelNew class exists; nothing is hidden by the source encoding.

#include "runtime/eval/static/checker.hpp"

#include <cctype>
#include <set>

namespace kbrl::eval::static_impl {

/// A `# coding:` declaration other than UTF-8/ASCII/Latin-1 on line 1 or 2, and \N{...}
/// escapes the lexer does not decode.
void checker::check_encoding() {
  size_t r = rule("encoding_trick");
  if (!on(r))
    return;
  if (lexed_.too_deep)
    add_whole(r, "f-strings nested deeper than CPython accepts: the checks read the rest as"
                 " code");
  for (int line = 1; line <= 2; ++line) {
    auto text = lines_.text(src_, line);
    if (!m_.find(table().helpers.coding.get(), text, 0))
      continue;
    std::string name{m_.group(text, 1)};
    for (auto& c : name)
      c = c == '_' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    static const std::set<std::string> plain{"utf-8", "utf8", "ascii", "us-ascii", "latin-1",
                                             "latin1", "iso-8859-1", "iso8859-1", "utf-8-sig"};
    if (plain.count(name) == 0)
      add(r, lines_.start_of(line) + m_.begin(1),
          "declares the source encoding '" + name + "': the interpreter decodes it, the checks"
          " do not");
  }
  for (const auto& lit : lexed_.strings) {
    if (lit.is_raw || lit.is_bytes)
      continue;
    auto pos = lit.value.find("\\N{");
    if (pos != std::string::npos)
      add(r, lit.value_offsets[pos], "\\N{...} escape in a string: named characters are not"
                                     " decoded by the checks");
  }
}

void checker::check_model_new() {
  size_t r = rule("model_new_missing");
  if (!on(r))
    return;
  if (top_level_class(outline_, "ModelNew") < 0)
    add_whole(r, "the program defines no class ModelNew");
}

} // namespace kbrl::eval::static_impl
