// strip_c_comments (declared in static_checks.hpp): C/C++/CUDA comments removed from kernel
// source without touching string, character and raw-string literals.

#include "runtime/eval/static/source_text.hpp"
#include "runtime/eval/static_checks.hpp"

namespace kbrl::eval {

using namespace static_impl;

namespace {

bool is_c_ident(char c) {
  return is_ident_byte(c) || c == '$';
}

/// Skips a "..." or '...' literal starting at its quote; stops at an unescaped line break.
size_t skip_c_quoted(std::string_view s, size_t k) {
  char q = s[k++];
  while (k < s.size()) {
    if (s[k] == '\\' && k + 1 < s.size()) {
      k += 2;
      continue;
    }
    if (s[k] == q)
      return k + 1;
    if (is_newline(s[k]))
      return k;
    ++k;
  }
  return k;
}

/// Skips R"delim( ... )delim" starting at its quote.
size_t skip_c_raw_string(std::string_view s, size_t k) {
  size_t open = k + 1;
  while (open < s.size() && open - k - 1 <= 16 && s[open] != '(') {
    char c = s[open];
    if (c == ' ' || c == ')' || c == '\\' || c == '\t' || is_newline(c) || c == '"')
      return skip_c_quoted(s, k);
    ++open;
  }
  if (open >= s.size() || s[open] != '(')
    return skip_c_quoted(s, k);
  std::string close = ")";
  close.append(s.substr(k + 1, open - k - 1));
  close.push_back('"');
  size_t e = s.find(close, open + 1);
  return e == std::string_view::npos ? s.size() : e + close.size();
}

/// Skips a preprocessing number (digits, letters, '.', digit separators, exponents' signs).
size_t skip_pp_number(std::string_view s, size_t k) {
  ++k;
  while (k < s.size()) {
    char c = s[k];
    if (is_c_ident(c) || c == '.') {
      ++k;
    } else if (c == '\'' && k + 1 < s.size() && is_c_ident(s[k + 1])) {
      k += 2;
    } else if ((c == '+' || c == '-') && (s[k - 1] | 0x20) == 'e') {
      ++k;
    } else if ((c == '+' || c == '-') && (s[k - 1] | 0x20) == 'p') {
      ++k;
    } else {
      break;
    }
  }
  return k;
}

} // namespace

std::string strip_c_comments(std::string_view in, std::vector<uint32_t>* offsets) {
  // Phase 2 of translation: backslash + line break joins lines (GCC also accepts blanks between
  // the backslash and the line break).
  std::string s;
  s.reserve(in.size());
  std::vector<uint32_t> off;
  bool track = offsets != nullptr && offsets->size() == in.size();
  for (size_t k = 0; k < in.size(); ++k) {
    if (in[k] == '\\') {
      size_t j = k + 1;
      while (j < in.size() && (in[j] == ' ' || in[j] == '\t'))
        ++j;
      if (size_t nl = newline_length(in, j); nl > 0) {
        k = j + nl - 1;
        continue;
      }
    }
    s.push_back(in[k]);
    if (track)
      off.push_back((*offsets)[k]);
  }
  std::string out = s;
  auto blank = [&out](size_t k) {
    if (!is_newline(out[k]))
      out[k] = ' ';
  };
  size_t n = s.size();
  size_t k = 0;
  std::string_view sv = s;
  while (k < n) {
    char c = s[k];
    if (c == '/' && k + 1 < n && s[k + 1] == '/') {
      while (k < n && !is_newline(s[k]))
        blank(k++);
      continue;
    }
    if (c == '/' && k + 1 < n && s[k + 1] == '*') {
      size_t e = s.find("*/", k + 2);
      size_t stop = e == std::string::npos ? n : e + 2;
      for (; k < stop; ++k)
        blank(k);
      continue;
    }
    if (is_c_ident(c) && !is_digit(c)) {
      size_t b = k;
      while (k < n && is_c_ident(s[k]))
        ++k;
      auto id = sv.substr(b, k - b);
      bool raw_prefix = id == "R" || id == "u8R" || id == "uR" || id == "UR" || id == "LR";
      if (k < n && s[k] == '"' && raw_prefix) {
        k = skip_c_raw_string(sv, k);
      } else if (k < n && (s[k] == '"' || s[k] == '\'')
                 && (id == "u8" || id == "u" || id == "U" || id == "L")) {
        k = skip_c_quoted(sv, k);
      }
      continue;
    }
    if (is_digit(c) || (c == '.' && k + 1 < n && is_digit(s[k + 1]))) {
      k = skip_pp_number(sv, k);
      continue;
    }
    if (c == '"' || c == '\'') {
      k = skip_c_quoted(sv, k);
      continue;
    }
    ++k;
  }
  if (offsets != nullptr) {
    if (track)
      *offsets = std::move(off);
    else
      offsets->assign(out.size(), 0);
  }
  return out;
}
} // namespace kbrl::eval
