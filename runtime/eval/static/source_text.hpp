#pragma once
// Byte-level helpers shared by the static checks' lexers and rules: character classes, line
// breaks, offset -> line numbers, and text made safe to show.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kbrl::eval::static_impl {

inline bool is_newline(char c) {
  return c == '\n' || c == '\r';
}

/// Python identifier bytes: ASCII letters, digits, '_' and every non-ASCII byte (CPython
/// accepts Unicode identifiers; treating all of them as identifier bytes keeps a lookalike
/// letter from splitting a name in two).
inline bool is_ident_byte(char c) {
  auto u = static_cast<unsigned char>(c);
  return (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || (u >= '0' && u <= '9') || u == '_'
         || u >= 0x80;
}

inline bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

inline bool is_ident_start(char c) {
  return is_ident_byte(c) && !is_digit(c);
}

inline bool is_blank(char c) {
  return c == ' ' || c == '\t' || c == '\f';
}

/// Length of the line break at `p` (\r\n counts as one), 0 if there is none.
size_t newline_length(std::string_view s, size_t p);

/// Line starts of a text, for offset -> 1-based line number.
class line_table {
public:
  explicit line_table(std::string_view s);

  int line_of(size_t offset) const;

  /// The text of a 1-based line, without its line break.
  std::string_view text(std::string_view s, int line) const;

  size_t start_of(int line) const {
    return starts_[static_cast<size_t>(line - 1)];
  }

private:
  std::vector<size_t> starts_;
};

void append_utf8(std::string& out, uint32_t cp);

/// Text safe to show and to put in JSON: control characters become blanks, bytes that are not
/// part of a valid UTF-8 sequence become '?'.
std::string printable(std::string_view in);

/// 0-15 for a hex digit, -1 otherwise.
int hex_value(char c);

} // namespace kbrl::eval::static_impl
