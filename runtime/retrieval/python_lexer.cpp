#include "runtime/retrieval/python_lexer.hpp"

#include "runtime/eval/static_checks.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>

namespace kbrl::retrieval {

namespace {

bool is_name_start(unsigned char c) {
  return std::isalpha(c) || c == '_' || c >= 0x80; // UTF-8 identifiers pass as names
}

bool is_name_char(unsigned char c) {
  return is_name_start(c) || std::isdigit(c);
}

/// Operators, longest first within each length.
const char* const three_char_ops[] = {"**=", "//=", ">>=", "<<=", "...", nullptr};
const char* const two_char_ops[] = {"**", "//", "==", "!=", "<=", ">=", "->", "+=", "-=", "*=",
                                    "/=", "%=", "&=", "|=", "^=", "@=", ":=", "<<", ">>",
                                    nullptr};

size_t op_length(std::string_view s, size_t i) {
  for (auto ops : {three_char_ops, two_char_ops})
    for (size_t k = 0; ops[k] != nullptr; ++k) {
      const size_t n = std::strlen(ops[k]);
      if (s.substr(i, n) == ops[k])
        return n;
    }
  return 1;
}

} // namespace

std::vector<py_token> lex_python(std::string_view s) {
  // String literals (prefixes, escapes, f-string fields, docstrings) are found by the static
  // checks' lexer, the one that reads Python as CPython does; this adds names, numbers,
  // operators, comments and line ends around them. Literals nested in f-string fields lie
  // inside their outer literal and are skipped with it.
  std::map<size_t, const eval::string_literal*> literal_at;
  const auto lexed = eval::lex_python(s);
  size_t covered = 0;
  for (auto& lit : lexed.strings)
    if (lit.begin >= covered) {
      literal_at[lit.begin] = &lit;
      covered = lit.end;
    }
  std::vector<py_token> out;
  int depth = 0;            // open brackets: line ends inside them do not end a line
  bool line_start = true;   // nothing but whitespace and comments since the last line end
  size_t i = 0;
  auto push = [&](py_token_kind kind, size_t from, size_t to) {
    out.push_back({kind, s.substr(from, to - from), false});
  };
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\n') {
      if (depth == 0 && !line_start)
        push(py_token_kind::newline, i, i + 1);
      if (depth == 0)
        line_start = true;
      ++i;
      continue;
    }
    if (c == '\\' && i + 1 < s.size() && (s[i + 1] == '\n' || s[i + 1] == '\r')) {
      i += s[i + 1] == '\r' && i + 2 < s.size() && s[i + 2] == '\n' ? 3 : 2; // line joining
      continue;
    }
    if (std::isspace(c)) {
      ++i;
      continue;
    }
    if (c == '#') {
      size_t end = s.find('\n', i);
      if (end == std::string_view::npos)
        end = s.size();
      while (end > i && s[end - 1] == '\r')
        --end;
      push(py_token_kind::comment, i, end);
      i = end;
      continue;
    }
    line_start = false;
    if (auto lit = literal_at.find(i); lit != literal_at.end()) {
      const size_t end = std::max(lit->second->end, i + 1);
      push(py_token_kind::string, i, end);
      out.back().statement_string = lit->second->is_statement;
      i = end;
      continue;
    }
    if (is_name_start(c)) {
      size_t end = i + 1;
      while (end < s.size() && is_name_char(static_cast<unsigned char>(s[end])))
        ++end;
      push(py_token_kind::name, i, end);
      i = end;
      continue;
    }
    if (std::isdigit(c) || (c == '.' && i + 1 < s.size() && std::isdigit(
                                                           static_cast<unsigned char>(s[i + 1])))) {
      size_t end = i + 1;
      while (end < s.size()) {
        const auto d = static_cast<unsigned char>(s[end]);
        const bool exponent_sign = (d == '+' || d == '-') && (s[end - 1] == 'e' || s[end - 1] == 'E')
                                   && !(s[i] == '0' && end > i + 1 && (s[i + 1] == 'x' || s[i + 1] == 'X'));
        if (std::isalnum(d) || d == '.' || d == '_' || exponent_sign)
          ++end;
        else
          break;
      }
      push(py_token_kind::number, i, end);
      i = end;
      continue;
    }
    const size_t n = op_length(s, i);
    if (c == '(' || c == '[' || c == '{')
      ++depth;
    else if ((c == ')' || c == ']' || c == '}') && depth > 0)
      --depth;
    push(py_token_kind::op, i, i + n);
    i += n;
  }
  if (!out.empty() && out.back().kind != py_token_kind::newline && !line_start)
    out.push_back({py_token_kind::newline, s.substr(s.size()), false});
  return out;
}

} // namespace kbrl::retrieval
