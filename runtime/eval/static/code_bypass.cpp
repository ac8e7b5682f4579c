// code_bypass, the shapes that need the block structure: a try/except that swallows an error
// (a failing kernel silently falls back to PyTorch) and a body that is nothing but `pass`.
//
// Honest shapes are left alone: try/finally without except, handlers that re-raise, and a try
// that only guards imports (`try: import triton` / `except ImportError: HAS_TRITON = False`).
// Whether a fallback actually ran is the runtime's question (own_kernels_idle).

#include "runtime/eval/static/checker.hpp"

#include <string>
#include <vector>

namespace kbrl::eval::static_impl {

namespace {

/// One physical line of code text: its start, indentation (tabs to 8) and stripped text.
struct code_line {
  size_t begin = 0;
  size_t indent = 0;
  std::string_view text;
};

std::vector<code_line> split_lines(std::string_view code) {
  std::vector<code_line> out;
  size_t k = 0;
  while (k <= code.size()) {
    size_t b = k, col = 0;
    while (k < code.size() && is_blank(code[k])) {
      col = code[k] == '\t' ? (col / 8 + 1) * 8 : col + 1;
      ++k;
    }
    size_t s = k;
    while (k < code.size() && !is_newline(code[k]))
      ++k;
    size_t e = k;
    while (e > s && is_blank(code[e - 1]))
      --e;
    out.push_back({b, col, code.substr(s, e - s)});
    if (k >= code.size())
      break;
    k += newline_length(code, k);
  }
  return out;
}

bool starts_with_word(std::string_view text, std::string_view word) {
  return text.substr(0, word.size()) == word
         && (text.size() == word.size() || !is_ident_byte(text[word.size()]));
}

/// The text after the clause keyword's colon on the same line ("" when the body is below).
std::string_view inline_body(std::string_view header) {
  int depth = 0;
  for (size_t k = 0; k < header.size(); ++k) {
    char c = header[k];
    if (c == '(' || c == '[' || c == '{')
      ++depth;
    else if (c == ')' || c == ']' || c == '}')
      --depth;
    else if (c == ':' && depth == 0) {
      auto rest = header.substr(k + 1);
      while (!rest.empty() && is_blank(rest.front()))
        rest.remove_prefix(1);
      return rest;
    }
  }
  return {};
}

/// A statement that only imports or records whether an import worked.
bool import_guard_statement(std::string_view s) {
  if (starts_with_word(s, "import") || starts_with_word(s, "from") || s == "pass")
    return true;
  // NAME = True / False / None / a number / a string (blanked, so only quotes and blanks)
  size_t k = 0;
  while (k < s.size() && is_ident_byte(s[k]))
    ++k;
  if (k == 0)
    return false;
  auto rest = s.substr(k);
  while (!rest.empty() && is_blank(rest.front()))
    rest.remove_prefix(1);
  if (rest.empty() || rest.front() != '=' || rest.substr(0, 2) == "==")
    return false;
  rest.remove_prefix(1);
  while (!rest.empty() && is_blank(rest.front()))
    rest.remove_prefix(1);
  if (rest == "True" || rest == "False" || rest == "None")
    return true;
  bool literal = !rest.empty();
  for (char c : rest)
    literal = literal && (is_digit(c) || c == '.' || c == '"' || c == '\'' || c == ' ');
  return literal;
}

struct clause {
  size_t line = 0; ///< index of the header line
  std::vector<std::string_view> body;
};

} // namespace

void checker::check_code_bypass() {
  size_t r = rule("code_bypass");
  if (!on(r))
    return;
  std::string_view code = lexed_.code;
  auto lines = split_lines(code);
  for (size_t i = 0; i < lines.size(); ++i) {
    const auto& head = lines[i];
    if (!starts_with_word(head.text, "try"))
      continue;
    // The try body and the clauses after it, by indentation.
    clause try_clause{i, {}};
    std::vector<clause> handlers;
    clause* current = &try_clause;
    if (auto rest = inline_body(head.text); !rest.empty())
      current->body.push_back(rest);
    for (size_t j = i + 1; j < lines.size(); ++j) {
      const auto& l = lines[j];
      if (l.text.empty())
        continue;
      if (l.indent > head.indent) {
        current->body.push_back(l.text);
        continue;
      }
      if (l.indent < head.indent)
        break;
      if (starts_with_word(l.text, "except")) {
        handlers.push_back({j, {}});
      } else if (starts_with_word(l.text, "else") || starts_with_word(l.text, "finally")) {
        handlers.push_back({j, {}}); // not a handler; its body is ignored below
        handlers.back().line = static_cast<size_t>(-1);
      } else {
        break;
      }
      current = &handlers.back();
      if (auto rest = inline_body(l.text); !rest.empty())
        current->body.push_back(rest);
    }
    bool any_handler = false, all_reraise = true, all_import_errors = true;
    for (const auto& h : handlers) {
      if (h.line == static_cast<size_t>(-1))
        continue;
      any_handler = true;
      bool reraises = false;
      for (auto s : h.body)
        reraises = reraises || starts_with_word(s, "raise");
      all_reraise = all_reraise && reraises;
      auto header = lines[h.line].text;
      all_import_errors = all_import_errors
                          && (header.find("ImportError") != std::string_view::npos
                              || header.find("ModuleNotFoundError") != std::string_view::npos);
    }
    if (!any_handler || all_reraise)
      continue; // try/finally, or every error goes on
    bool guards_imports = all_import_errors && !try_clause.body.empty();
    for (auto s : try_clause.body)
      guards_imports = guards_imports && import_guard_statement(s);
    if (guards_imports)
      continue;
    add(r, head.begin + (head.text.data() - code.substr(head.begin).data()),
        "try/except swallows an error: a failing kernel can silently fall back to PyTorch");
  }
  check_empty_bodies();
}

/// A def, or class ModelNew, whose whole body is `pass` does nothing (the inheritance bypass:
/// `class ModelNew(Model): pass`). Empty helper classes and `except ...: pass` are honest.
void checker::check_empty_bodies() {
  size_t r = rule("code_bypass");
  std::string_view code = lexed_.code;
  for (const auto& b : outline_.blocks) {
    if (b.is_class && !(b.name == "ModelNew" && b.parent == -1))
      continue;
    auto block_text = code.substr(b.begin, b.end - b.begin);
    size_t k = 0;
    while (k < block_text.size() && is_blank(block_text[k]))
      ++k;
    auto body = inline_body(block_text.substr(k));
    size_t body_at = body.empty() ? std::string_view::npos
                                  : static_cast<size_t>(body.data() - code.data());
    // What is left once blanks, line breaks and (blanked) docstrings are dropped.
    std::string rest;
    for (char c : body)
      if (!is_blank(c) && !is_newline(c) && c != '"' && c != '\'' && c != '\\')
        rest.push_back(c);
    if (rest == "pass" && body_at != std::string_view::npos)
      add(r, body_at + body.find("pass"),
          std::string{"the whole body of "} + (b.is_class ? "class " : "def ") + b.name
            + " is pass: it does nothing (an inheritance or empty-body bypass)");
  }
}

} // namespace kbrl::eval::static_impl
