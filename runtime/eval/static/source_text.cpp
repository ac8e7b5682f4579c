#include "runtime/eval/static/source_text.hpp"

#include <algorithm>

namespace kbrl::eval::static_impl {

size_t newline_length(std::string_view s, size_t p) {
  if (p >= s.size())
    return 0;
  if (s[p] == '\r')
    return p + 1 < s.size() && s[p + 1] == '\n' ? 2 : 1;
  return s[p] == '\n' ? 1 : 0;
}

line_table::line_table(std::string_view s) {
  starts_.push_back(0);
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n')
      continue; // the \n ends this line
    if (is_newline(s[i]))
      starts_.push_back(i + 1);
  }
}

int line_table::line_of(size_t offset) const {
  auto it = std::upper_bound(starts_.begin(), starts_.end(), offset);
  return static_cast<int>(it - starts_.begin());
}

std::string_view line_table::text(std::string_view s, int line) const {
  if (line < 1 || static_cast<size_t>(line) > starts_.size())
    return {};
  size_t b = starts_[line - 1];
  size_t e = b;
  while (e < s.size() && !is_newline(s[e]))
    ++e;
  return s.substr(b, e - b);
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp > 0x10FFFF)
    cp = 0xFFFD;
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

/// Text safe to show and to put in JSON: control characters become blanks, bytes that are not
/// part of a valid UTF-8 sequence become '?'.
std::string printable(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  size_t k = 0;
  while (k < in.size()) {
    auto c = static_cast<unsigned char>(in[k]);
    if (c < 0x80) {
      out.push_back(c < 0x20 || c == 0x7f ? ' ' : static_cast<char>(c));
      ++k;
      continue;
    }
    size_t len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    bool ok = len > 0 && c >= 0xC2 && c <= 0xF4 && k + len <= in.size();
    for (size_t j = 1; ok && j < len; ++j)
      ok = (static_cast<unsigned char>(in[k + j]) & 0xC0) == 0x80;
    if (ok) {
      out.append(in.substr(k, len));
      k += len;
    } else {
      out.push_back('?');
      ++k;
    }
  }
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}
} // namespace kbrl::eval::static_impl
