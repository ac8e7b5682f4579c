#include "runtime/eval/static_checks.hpp"

#include "messages/errors.hpp"

#include <pcre2.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace kbrl::eval {

namespace {

// -- text helpers ---------------------------------------------------------------------------------

bool is_newline(char c) {
  return c == '\n' || c == '\r';
}

/// Python identifier bytes: ASCII letters, digits, '_' and every non-ASCII byte (CPython
/// accepts Unicode identifiers; treating all of them as identifier bytes keeps a lookalike
/// letter from splitting a name in two).
bool is_ident_byte(char c) {
  auto u = static_cast<unsigned char>(c);
  return (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || (u >= '0' && u <= '9') || u == '_'
         || u >= 0x80;
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

bool is_ident_start(char c) {
  return is_ident_byte(c) && !is_digit(c);
}

/// Length of the line break at `p` (\r\n counts as one), 0 if there is none.
size_t newline_length(std::string_view s, size_t p) {
  if (p >= s.size())
    return 0;
  if (s[p] == '\r')
    return p + 1 < s.size() && s[p + 1] == '\n' ? 2 : 1;
  return s[p] == '\n' ? 1 : 0;
}

/// Line starts of a text, for offset -> 1-based line number.
class line_table {
public:
  explicit line_table(std::string_view s) {
    starts_.push_back(0);
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n')
        continue; // the \n ends this line
      if (is_newline(s[i]))
        starts_.push_back(i + 1);
    }
  }

  int line_of(size_t offset) const {
    auto it = std::upper_bound(starts_.begin(), starts_.end(), offset);
    return static_cast<int>(it - starts_.begin());
  }

  /// The text of a 1-based line, without its line break.
  std::string_view text(std::string_view s, int line) const {
    if (line < 1 || static_cast<size_t>(line) > starts_.size())
      return {};
    size_t b = starts_[line - 1];
    size_t e = b;
    while (e < s.size() && !is_newline(s[e]))
      ++e;
    return s.substr(b, e - b);
  }

  size_t start_of(int line) const {
    return starts_[static_cast<size_t>(line - 1)];
  }

private:
  std::vector<size_t> starts_;
};

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

// -- the Python lexer -----------------------------------------------------------------------------

/// One pass over Python source. Code stays in `code_`; comments and the literal text of strings
/// are blanked there. Tracks bracket depth and whether a logical line has had a token yet, to
/// tell string statements (docstrings) from strings used as values.
class py_lexer {
public:
  explicit py_lexer(std::string_view source) : s_(source), code_(source) {
    // nop
  }

  lexed_source run() {
    while (i_ < s_.size())
      scan_code(false);
    end_statement();
    line_table lines(s_);
    for (auto& lit : strings_)
      lit.line = lines.line_of(lit.begin);
    return {std::move(code_), std::move(strings_), too_deep_};
  }

private:
  bool at(size_t p, char c) const {
    return p < s_.size() && s_[p] == c;
  }

  void blank(size_t p) {
    if (p < s_.size() && !is_newline(s_[p]))
      code_[p] = ' ';
  }

  void blank_range(size_t b, size_t e) {
    for (size_t k = b; k < e; ++k)
      blank(k);
  }

  /// The logical line ended: strings that made up a whole statement are string statements.
  void end_statement() {
    for (auto k : pending_)
      strings_[k].is_statement = true;
    pending_.clear();
    line_has_token_ = false;
  }

  /// A token other than a string: the strings before it on this line are values.
  void token() {
    line_has_token_ = true;
    pending_.clear();
  }

  /// r, u, b, f, t and the two-letter combinations CPython accepts, in any case.
  static bool is_string_prefix(std::string_view id) {
    if (id.empty() || id.size() > 2)
      return false;
    bool r = false, b = false, f = false, u = false, t = false;
    for (char ch : id) {
      switch (ch | 0x20) {
        case 'r': if (r) return false; r = true; break;
        case 'b': if (b) return false; b = true; break;
        case 'f': if (f) return false; f = true; break;
        case 't': if (t) return false; t = true; break;
        case 'u': if (u) return false; u = true; break;
        default: return false;
      }
    }
    if (u && id.size() > 1)
      return false;
    return (b ? 1 : 0) + (f ? 1 : 0) + (t ? 1 : 0) <= 1;
  }

  /// Scans code from i_. At top level it runs to the end of the source. Inside an f-string
  /// replacement field (`in_field`) it stops, without consuming it, at a '}', ':' or '!' (not
  /// '!=') outside brackets and returns that character; 0 at the end of the source.
  char scan_code(bool in_field) {
    int local = 0;
    size_t n = s_.size();
    while (i_ < n) {
      char c = s_[i_];
      if (c == '#') {
        while (i_ < n && !is_newline(s_[i_]))
          blank(i_++);
        continue;
      }
      if (c == '\\' && newline_length(s_, i_ + 1) > 0) {
        i_ += 1 + newline_length(s_, i_ + 1);
        continue;
      }
      if (is_newline(c)) {
        i_ += newline_length(s_, i_);
        if (!in_field && depth_ == 0)
          end_statement();
        continue;
      }
      if (c == ' ' || c == '\t' || c == '\f') {
        ++i_;
        continue;
      }
      if (c == '\'' || c == '"') {
        scan_string(i_, i_, in_field);
        continue;
      }
      if (is_ident_start(c)) {
        size_t start = i_;
        while (i_ < n && is_ident_byte(s_[i_]))
          ++i_;
        if (i_ < n && (s_[i_] == '\'' || s_[i_] == '"')
            && is_string_prefix(s_.substr(start, i_ - start))) {
          scan_string(start, i_, in_field);
          continue;
        }
        if (!in_field)
          token();
        continue;
      }
      if (is_digit(c)) {
        while (i_ < n && (is_ident_byte(s_[i_]) || s_[i_] == '.'))
          ++i_;
        if (!in_field)
          token();
        continue;
      }
      if (in_field && local == 0) {
        if (c == '}' || c == ':')
          return c;
        if (c == '!' && !at(i_ + 1, '='))
          return c;
      }
      if (c == '(' || c == '[' || c == '{') {
        if (in_field)
          ++local;
        else
          ++depth_;
      } else if (c == ')' || c == ']' || c == '}') {
        if (in_field) {
          if (local > 0)
            --local;
        } else if (depth_ > 0) {
          --depth_;
        }
      }
      if (!in_field && depth_ == 0 && c == ';') {
        ++i_;
        end_statement();
        continue;
      }
      if (!in_field)
        token();
      ++i_;
    }
    return 0;
  }

  /// Decodes the escape sequence at p (a backslash in a non-raw literal), appends its value to
  /// `lit` and returns the offset after it.
  size_t decode_escape(size_t p, string_literal& lit) {
    size_t n = s_.size();
    auto emit = [&lit, p](char ch) {
      lit.value.push_back(ch);
      lit.value_offsets.push_back(static_cast<uint32_t>(p));
    };
    auto emit_cp = [&](uint32_t cp) {
      if (lit.is_bytes)
        lit.value.push_back(static_cast<char>(cp & 0xFF));
      else
        append_utf8(lit.value, cp);
      lit.value_offsets.resize(lit.value.size(), static_cast<uint32_t>(p));
    };
    char d = s_[p + 1];
    size_t e = p + 2;
    if (size_t nl = newline_length(s_, p + 1); nl > 0) {
      e = p + 1 + nl; // line continuation inside the literal: no character
    } else {
      switch (d) {
        case '\\': case '\'': case '"': emit(d); break;
        case 'a': emit('\a'); break;
        case 'b': emit('\b'); break;
        case 'f': emit('\f'); break;
        case 'n': emit('\n'); break;
        case 'r': emit('\r'); break;
        case 't': emit('\t'); break;
        case 'v': emit('\v'); break;
        case 'x': {
          int h1 = p + 2 < n ? hex_value(s_[p + 2]) : -1;
          int h2 = p + 3 < n ? hex_value(s_[p + 3]) : -1;
          if (h1 >= 0 && h2 >= 0) {
            emit_cp(static_cast<uint32_t>(h1 * 16 + h2));
            e = p + 4;
          } else {
            emit('\\');
            emit('x');
          }
          break;
        }
        case 'u':
        case 'U': {
          size_t len = d == 'u' ? 4 : 8;
          uint32_t cp = 0;
          bool ok = !lit.is_bytes && p + 2 + len <= n;
          for (size_t k = 0; ok && k < len; ++k) {
            int h = hex_value(s_[p + 2 + k]);
            ok = h >= 0;
            cp = cp * 16 + static_cast<uint32_t>(h < 0 ? 0 : h);
          }
          if (ok) {
            emit_cp(cp);
            e = p + 2 + len;
          } else {
            emit('\\');
            emit(d);
          }
          break;
        }
        case 'N': {
          // \N{NAME}: the name is not decoded (kept as written; encoding_trick reports it).
          emit('\\');
          emit('N');
          if (!lit.is_bytes && at(p + 2, '{')) {
            size_t k = p + 2;
            while (k < n && s_[k] != '}' && !is_newline(s_[k]))
              emit(s_[k++]);
            if (k < n && s_[k] == '}')
              emit(s_[k++]);
            e = k;
          }
          break;
        }
        default:
          if (d >= '0' && d <= '7') {
            uint32_t cp = 0;
            size_t k = p + 1;
            while (k < n && k < p + 4 && s_[k] >= '0' && s_[k] <= '7')
              cp = cp * 8 + static_cast<uint32_t>(s_[k++] - '0');
            emit_cp(cp);
            e = k;
          } else {
            emit('\\'); // an unknown escape keeps its backslash
            emit(d);
          }
      }
    }
    blank_range(p, e);
    return e;
  }

  /// Scans a string literal whose prefix starts at `prefix_begin` and whose opening quote is at
  /// `quote`; leaves i_ after it.
  void scan_string(size_t prefix_begin, size_t quote, bool in_field) {
    size_t n = s_.size();
    if (nesting_ >= max_nesting) {
      // Deeper than CPython accepts: the quote stays visible as code (nothing is hidden) and
      // the source is reported (encoding_trick).
      too_deep_ = true;
      i_ = quote + 1;
      return;
    }
    ++nesting_;
    string_literal lit;
    for (size_t p = prefix_begin; p < quote; ++p) {
      switch (s_[p] | 0x20) {
        case 'r': lit.is_raw = true; break;
        case 'b': lit.is_bytes = true; break;
        case 'f': case 't': lit.is_formatted = true; break;
        default: break;
      }
    }
    lit.begin = prefix_begin;
    char q = s_[quote];
    bool triple = at(quote + 1, q) && at(quote + 2, q);
    size_t qlen = triple ? 3 : 1;
    bool candidate = !in_field && depth_ == 0 && (!line_has_token_ || !pending_.empty());
    size_t index = strings_.size();
    strings_.emplace_back(); // keeps source order: literals nested in fields come after
    auto emit = [&lit](char ch, size_t at_pos) {
      lit.value.push_back(ch);
      lit.value_offsets.push_back(static_cast<uint32_t>(at_pos));
    };
    size_t p = quote + qlen;
    size_t content_begin = std::min(p, n);
    size_t content_end = std::string_view::npos;
    while (p < n) {
      char c = s_[p];
      if (c == q && (!triple || (at(p + 1, q) && at(p + 2, q)))) {
        content_end = p;
        p += qlen;
        break;
      }
      if (!triple && is_newline(c)) { // unterminated: CPython refuses it; stop at the line break
        content_end = p;
        break;
      }
      if (c == '\\' && p + 1 < n) {
        char d = s_[p + 1];
        if (lit.is_formatted && (d == '{' || d == '}')) {
          // not an escape: the brace keeps its meaning (a field still opens)
          emit('\\', p);
          blank(p);
          ++p;
          continue;
        }
        if (lit.is_raw) {
          // the backslash keeps the next character (a quote or a line break too) in the string
          size_t len = 1 + std::max<size_t>(1, newline_length(s_, p + 1));
          for (size_t k = 0; k < len; ++k) {
            emit(s_[p + k], p + k);
            blank(p + k);
          }
          p += len;
          continue;
        }
        p = decode_escape(p, lit);
        continue;
      }
      if (lit.is_formatted && c == '{') {
        if (at(p + 1, '{')) {
          emit('{', p);
          blank(p);
          blank(p + 1);
          p += 2;
          continue;
        }
        p = scan_field(p + 1);
        continue;
      }
      if (lit.is_formatted && c == '}') {
        emit('}', p);
        blank(p);
        if (at(p + 1, '}'))
          blank(++p);
        ++p;
        continue;
      }
      emit(c, p);
      blank(p);
      ++p;
    }
    if (content_end == std::string_view::npos) {
      p = std::min(p, n);
      content_end = p;
    }
    lit.end = p;
    lit.raw.assign(s_.substr(content_begin, content_end - content_begin));
    strings_[index] = std::move(lit);
    i_ = p;
    --nesting_;
    if (!in_field) {
      line_has_token_ = true;
      if (candidate)
        pending_.push_back(index);
      else
        pending_.clear();
    }
  }

  /// Scans an f-string replacement field starting after its '{'; returns the offset after its
  /// closing '}'. The expression stays visible as code; a format spec is literal text with
  /// nested fields.
  size_t scan_field(size_t p) {
    i_ = p;
    char stop = scan_code(true);
    while (stop == '!') { // conversion: !r, !s, !a
      ++i_;
      while (i_ < s_.size() && is_ident_byte(s_[i_]))
        ++i_;
      stop = scan_code(true);
    }
    if (stop == ':') {
      ++i_;
      while (i_ < s_.size()) {
        char c = s_[i_];
        if (c == '{') {
          i_ = scan_field(i_ + 1);
          continue;
        }
        if (c == '}') {
          ++i_;
          break;
        }
        blank(i_);
        ++i_;
      }
    } else if (stop == '}') {
      ++i_;
    }
    return i_;
  }

  std::string_view s_;
  std::string code_;
  std::vector<string_literal> strings_;
  size_t i_ = 0;
  int depth_ = 0;               // bracket depth of top-level code
  bool line_has_token_ = false; // the logical line had a non-string token
  std::vector<size_t> pending_; // strings that so far make up the whole logical line
  static constexpr int max_nesting = 32; // string literals nested in f-string fields
  int nesting_ = 0;
  bool too_deep_ = false;
};

// -- C/C++ lexing helpers ------------------------------------------------------------------------

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

lexed_source lex_python(std::string_view source) {
  return py_lexer{source}.run();
}

// -- rules ----------------------------------------------------------------------------------------

namespace {

/// When a rule is evaluated at all.
enum class applies_to : uint8_t {
  always,
  kernel_backends, ///< every backend but torch
  fp32,            ///< fp32 problems only
  cuda,
  hip,
  triton,
  thunderkittens,
  cute,
  tilelang,
  launched, ///< cuda, hip and triton: backends whose kernels kbrl can follow from forward
};

struct rule_def {
  const char* id;
  severity level;
  applies_to when;
  const char* description;
};

// The order is the order of all_rules(): KernelBench's rules first, then kbrl's.
constexpr rule_def rule_defs[] = {
  // KernelBench (src/kernelbench/kernel_static_checker.py)
  {"code_bypass", severity::error, applies_to::always,
   "try/except or pass: a failing kernel falls back to PyTorch, or a body does nothing"},
  {"timing_event_patch", severity::error, applies_to::always,
   "reassigns timing functions (torch.cuda.Event, synchronize, time.*, elapsed_time)"},
  {"thread_injection", severity::error, applies_to::always,
   "threads, processes or async tasks: work escapes the timed region"},
  {"lazy_eval", severity::error, applies_to::always,
   "Tensor subclasses, __torch_function__/__torch_dispatch__: lazy or fake results"},
  {"stream_injection", severity::error, applies_to::always,
   "non-default CUDA streams: work escapes the timed stream (KernelBench: warning)"},
  {"precision_downgrade", severity::error, applies_to::fp32,
   "computes in half/bfloat16/TF32 in an fp32 problem (KernelBench: warning)"},
  {"pytorch_wrap", severity::warning, applies_to::kernel_backends,
   "uses torch.nn compute layers (nn.Linear, nn.Conv2d, ...) instead of kernels"},
  {"torch_computation_ops", severity::warning, applies_to::kernel_backends,
   "calls PyTorch/library compute ops (torch.matmul, F.relu, at::mm, cuBLAS) instead of kernels"},
  {"cuda_impl", severity::error, applies_to::cuda,
   "cuda backend: needs a __global__ kernel in the source strings, compiled with load_inline"
   " and launched"},
  {"triton_impl", severity::error, applies_to::triton,
   "triton backend: needs an @triton.jit (or autotune) kernel using tl.* operations"},
  {"tk_impl", severity::error, applies_to::thunderkittens,
   "thunderkittens backend: needs kittens warp/warpgroup code and st_/rt_ tiles"},
  {"cute_impl", severity::error, applies_to::cute,
   "cute backend: needs cute::/cutlass:: code (or the CUTLASS Python DSL)"},
  {"tilelang_impl", severity::error, applies_to::tilelang,
   "tilelang backend: needs an @T.prim_func kernel"},
  // kbrl
  {"hip_impl", severity::error, applies_to::hip,
   "hip backend: needs a __global__ kernel in the source strings, compiled with load_inline"
   " and launched"},
  {"model_new_missing", severity::error, applies_to::always,
   "the program defines no class ModelNew"},
  {"kernel_not_called", severity::error, applies_to::launched,
   "ModelNew.forward never reaches the candidate's own kernel: PyTorch does the work"},
  {"reference_access", severity::error, applies_to::always,
   "reaches the reference: Model, get_inputs, its module, globals(), module hooks"},
  {"output_cache", severity::error, applies_to::always,
   "keeps outputs across calls (memoisation, identity/data_ptr keys, returning stored state)"},
  {"sys_modules", severity::error, applies_to::always,
   "touches sys.modules, sys.path or the import machinery"},
  {"import_evasion", severity::error, applies_to::always,
   "imports os/sys/time under another name or imports their functions: hides what they call"},
  {"builtins_access", severity::error, applies_to::always,
   "touches builtins/__builtins__"},
  {"dunder_escape", severity::error, applies_to::always,
   "walks the object graph (__class__, __subclasses__, __globals__, __dict__, __call__, ...)"},
  {"gc_access", severity::error, applies_to::always,
   "uses the garbage collector (gc.get_objects finds the reference and its outputs)"},
  {"frame_inspection", severity::error, applies_to::always,
   "inspects frames or tracebacks (inspect, sys._getframe, f_back, f_locals, settrace)"},
  {"file_access", severity::error, applies_to::always,
   "touches files or descriptors (open, os.*, pathlib, shutil, np/torch save and load)"},
  {"network_access", severity::error, applies_to::always,
   "uses the network (socket, urllib, requests, http)"},
  {"subprocess_spawn", severity::error, applies_to::always,
   "runs other programs (subprocess, os.system, os.popen, pty, exec*)"},
  {"ctypes_ffi", severity::error, applies_to::always,
   "loads native code outside the build (ctypes, cffi, dlopen, load_library)"},
  {"precision_flags", severity::error, applies_to::always,
   "changes global math settings (TF32, matmul precision, cuDNN flags, default dtype)"},
  {"rng_state", severity::error, applies_to::always,
   "reads or seeds random number generators (predicts the test inputs)"},
  {"dynamic_code", severity::error, applies_to::always,
   "runs code built at run time (eval, exec, compile, __import__, importlib, Python from C++)"},
  {"env_write", severity::error, applies_to::always,
   "writes environment variables (os.environ, putenv, setenv)"},
  {"signal_use", severity::error, applies_to::always,
   "uses signals (signal, os.kill, faulthandler)"},
  {"process_exit", severity::error, applies_to::always,
   "ends the process (sys.exit, os._exit, exit, abort, atexit)"},
  {"torch_monkey_patch", severity::error, applies_to::always,
   "reassigns attributes of torch, torch.Tensor, F, nn, numpy or triton"},
  {"torch_internals", severity::error, applies_to::always,
   "uses PyTorch internals (torch._C, torch.library, operator registration, dynamo config)"},
  {"encoding_trick", severity::error, applies_to::always,
   "hides code from readers: non-ASCII in code, a source encoding declaration, \\N{} escapes"},
  {"cuda_graph", severity::warning, applies_to::always,
   "captures or replays CUDA graphs (replays can return stale results)"},
  {"token_pasting", severity::warning, applies_to::always,
   "token pasting (##) in kernel source can assemble names the checks cannot see"},
};

constexpr size_t rule_count = sizeof rule_defs / sizeof rule_defs[0];

size_t rule_index(std::string_view id) {
  for (size_t i = 0; i < rule_count; ++i)
    if (id == rule_defs[i].id)
      return i;
  return rule_count;
}

/// Where a pattern looks: Python code (strings and comments blanked) or kernel source (string
/// contents, C comments removed).
enum class scope : uint8_t { code, kernel };

/// `forbid`: every match is a finding. `require`: the rule fires when no pattern of the group
/// matches (patterns of one rule and group are alternatives; groups are checked in order and
/// the first unmet one is reported).
enum class pattern_kind : uint8_t { forbid, require };

struct pattern_def {
  const char* rule;
  scope where;
  pattern_kind kind;
  const char* hints; ///< '|'-separated literals, one of which every match contains ("": none)
  const char* regex; ///< PCRE2, byte mode, multiline, any of \r \n \r\n as line break
  const char* message; ///< "{m}" is replaced by the matched text
  int group = 0;       ///< for `require` patterns
};

constexpr auto forbid = pattern_kind::forbid;
constexpr auto require = pattern_kind::require;
constexpr auto in_code = scope::code;
constexpr auto in_kernel = scope::kernel;

// Names of PyTorch compute ops (KernelBench's list, plus reductions and a few more).
#define KBRL_TORCH_OPS                                                                            \
  "mm|bmm|matmul|einsum|addmm|addbmm|baddbmm|addmv|mv|dot|vdot|tensordot|inner|outer|kron|"     \
  "conv1d|conv2d|conv3d|conv_transpose1d|conv_transpose2d|conv_transpose3d|convolution|conv|"    \
  "avg_pool1d|avg_pool2d|avg_pool3d|max_pool1d|max_pool2d|max_pool3d|"                           \
  "adaptive_avg_pool1d|adaptive_avg_pool2d|adaptive_avg_pool3d|"                                 \
  "adaptive_max_pool1d|adaptive_max_pool2d|adaptive_max_pool3d|"                                 \
  "relu|relu_|hardtanh|elu|selu|celu|leaky_relu|prelu|rrelu|gelu|softsign|softplus|softmax|"     \
  "log_softmax|tanh|sigmoid|hardsigmoid|hardswish|silu|mish|logsigmoid|"                         \
  "batch_norm|group_norm|layer_norm|instance_norm|rms_norm|normalize|linear|bilinear|"           \
  "cross_entropy|nll_loss|kl_div|mse_loss|l1_loss|smooth_l1_loss|huber_loss|"                    \
  "triplet_margin_loss|margin_ranking_loss|hinge_embedding_loss|cosine_similarity|"              \
  "cosine_embedding_loss|pairwise_distance|cdist|logsumexp|clamp|clip|dropout|cumsum|cumprod|"   \
  "sum|mean|amax|amin|argmax|argmin|max|min|prod|std|var|norm|sort|topk|"                        \
  "scaled_dot_product_attention"

const pattern_def pattern_defs[] = {
  // -- code_bypass (KernelBench) --
  {"code_bypass", in_code, forbid, "try", R"re(\btry\s*:)re",
   "try block: a failing kernel can silently fall back to PyTorch"},
  {"code_bypass", in_code, forbid, "except", R"re(\bexcept\b)re",
   "except clause: errors are swallowed (fallback bypass)"},
  {"code_bypass", in_code, forbid, "pass", R"re(\bpass\b)re",
   "pass statement: an empty body (inheritance bypass)"},
  {"code_bypass", in_code, forbid, "suppress", R"re(\bsuppress\s*\()re",
   "contextlib.suppress swallows errors like try/except"},
  {"code_bypass", in_code, forbid, "__exit__", R"re(\bdef\s+__exit__\b)re",
   "a context manager's __exit__ can swallow errors"},

  // -- timing_event_patch (KernelBench) --
  {"timing_event_patch", in_code, forbid, "cuda.",
   R"re((?<![\w.])(?:torch\.)?cuda\.(?:Event|synchronize|current_stream|default_stream|)re"
   R"re(Stream)\b(?:\.\w+)*\s*=(?!=))re",
   "reassigns {m}: a patched CUDA timer fakes the speed-up"},
  {"timing_event_patch", in_code, forbid, "time.", R"re((?<![\w.])time\.\w+\s*=(?!=))re",
   "reassigns {m} of the time module"},
  {"timing_event_patch", in_code, forbid,
   "elapsed_time|synchronize|perf_counter|monotonic|time_ns|process_time|record|query|Event",
   R"re(\.(?:elapsed_time|synchronize|perf_counter(?:_ns)?|monotonic(?:_ns)?|time_ns|)re"
   R"re(process_time(?:_ns)?|record|query|Event)\s*=(?!=))re",
   "reassigns the timing method {m}"},
  {"timing_event_patch", in_code, forbid, "testing.|timeit.|benchmark.",
   R"re((?<![\w.])(?:triton\.testing|timeit|torch\.utils\.benchmark)(?:\.\w+)+\s*=(?!=))re",
   "reassigns the benchmarking function {m}"},
  {"timing_event_patch", in_code, forbid, "setattr",
   R"re(\bsetattr\s*\(\s*(?:torch\.cuda(?:\.Event)?|cuda(?:\.Event)?|time|triton\.testing|)re"
   R"re(timeit)\s*,)re",
   "setattr on a timing module: {m}"},
  {"timing_event_patch", in_kernel, forbid, "EventElapsedTime|EventRecord",
   R"re(\b(?:cu|cuda|hip)Event(?:ElapsedTime|Record)\w*)re",
   "uses CUDA event timing ({m}) in the kernel source"},

  // -- thread_injection (KernelBench) --
  {"thread_injection", in_code, forbid, "threading|_thread|multiprocessing|asyncio",
   R"re(\b(?:threading|_thread|multiprocessing|asyncio)\b)re",
   "uses {m}: work can run outside the timed region"},
  {"thread_injection", in_code, forbid, "concurrent|PoolExecutor",
   R"re(\bconcurrent\.futures\b|\b\w*PoolExecutor\b)re",
   "uses {m}: work can run outside the timed region"},
  {"thread_injection", in_code, forbid, "os.", R"re(\bos\.(?:fork|forkpty|register_at_fork)\b)re",
   "forks the process ({m})"},
  {"thread_injection", in_kernel, forbid, "std::|pthread_create|fork|include",
   R"re(\bstd::(?:thread|jthread|async)\b|\bpthread_create\b|(?<![\w.>:])v?fork\s*\(|)re"
   R"re(#\s*include\s*[<"](?:thread|future|pthread\.h)[>"])re",
   "starts host threads or processes in the kernel source ({m})"},

  // -- lazy_eval (KernelBench) --
  {"lazy_eval", in_code, forbid, "_make_", R"re(\b_make_(?:wrapper_)?subclass\b)re",
   "creates a tensor subclass instance ({m}): lazy or fake results"},
  {"lazy_eval", in_code, forbid, "Tensor",
   R"re(\bclass\s+\w+\s*\([^:]*?\bTensor\b)re",
   "subclasses torch.Tensor: lazy or fake results"},
  {"lazy_eval", in_code, forbid, "__torch_", R"re(__torch_(?:function|dispatch)__)re",
   "overrides {m}: tensor operations can be faked"},
  {"lazy_eval", in_code, forbid,
   "__new__|TorchFunctionMode|TorchDispatchMode|overrides|_python_dispatch|FakeTensor|"
   "fake_tensor|as_subclass",
   R"re(\bTensor\.__new__\b|\b(?:TorchFunctionMode|TorchDispatchMode)\b|\btorch\.overrides\b|)re"
   R"re(\b_python_dispatch\b|\bFakeTensor\w*|\bfake_tensor\b|\.as_subclass\s*\()re",
   "uses {m}: lazy or fake tensors"},

  // -- stream_injection (KernelBench) --
  {"stream_injection", in_code, forbid, "cuda.",
   R"re(\bcuda\.(?:Stream|ExternalStream|stream|set_stream|StreamContext)\b)re",
   "uses {m}: work on another stream escapes the timing"},
  {"stream_injection", in_code, forbid, "Stream",
   R"re(\b(?:Stream|ExternalStream|StreamContext)\s*\()re",
   "creates a stream ({m}): work on another stream escapes the timing"},
  {"stream_injection", in_code, forbid, "wait_stream|record_stream|wait_event|set_stream",
   R"re(\.(?:wait_stream|record_stream|wait_event|set_stream)\s*\()re",
   "synchronises across streams ({m})"},
  {"stream_injection", in_kernel, forbid, "Stream|STREAM",
   R"re(\b(?:cu|cuda|hip)Stream(?:Create\w*|PerThread)\b|\b(?:cuda|hip)StreamNonBlocking\b|)re"
   R"re(\bCU_STREAM_NON_BLOCKING\b|\bgetStreamFromPool\b|\bsetCurrent(?:CUDA|HIP)Stream\b|)re"
   R"re(\bgetStreamFromExternal\b)re",
   "uses a non-default stream in the kernel source ({m})"},

  // -- precision_downgrade (KernelBench) --
  {"precision_downgrade", in_code, forbid, ".half|.bfloat16", R"re(\.(?:half|bfloat16)\s*\()re",
   "casts with {m} in an fp32 problem"},
  {"precision_downgrade", in_code, forbid,
   "float16|half|bfloat16|float8|chalf|HalfTensor|BFloat16Tensor",
   R"re(\btorch\.(?:float16|half|bfloat16|float8_\w+|chalf)\b|\b(?:Half|BFloat16)Tensor\b)re",
   "uses {m} in an fp32 problem"},
  {"precision_downgrade", in_code, forbid, "tl.", R"re(\btl\.(?:float16|bfloat16|float8\w*)\b)re",
   "uses {m} in an fp32 problem"},
  {"precision_downgrade", in_code, forbid, "autocast|GradScaler|amp",
   R"re(\b(?:autocast|GradScaler)\b|\b(?:cuda|torch)\.amp\b)re",
   "uses mixed precision ({m}) in an fp32 problem"},
  {"precision_downgrade", in_code, forbid, "allow_tf32", R"re((?<![\w.])allow_tf32\s*=\s*True\b)re",
   "asks for TF32 ({m}) in an fp32 problem"},
  {"precision_downgrade", in_kernel, forbid, "half|bfloat16|fp8",
   R"re(\b__half2?\b|\bhalf2\b|\b__nv_bfloat16\w*|\bnv_bfloat16\b|\b__nv_fp8\w*|)re"
   R"re(\b__floats?2(?:half|bfloat16)\w*|\b(?:static_cast|)re"
   R"re(reinterpret_cast)\s*<\s*(?:const\s+)?(?:__)?half\b|\bhalf\s+[A-Za-z_]\w*\s*(?:=|;|\[))re",
   "uses half/bfloat16 types ({m}) in an fp32 problem"},
  {"precision_downgrade", in_kernel, forbid,
   "Half|BFloat16|Float16|half_t|bfloat16_t|tk::half|tf32|__h",
   R"re(\b(?:at|c10|torch)::(?:Half|BFloat16|kHalf|kBFloat16|kFloat16)\b|\bk(?:Half|BFloat16|)re"
   R"re(Float16)\b|\b(?:half_t|bfloat16_t)\b|\btk::half\b|\bwmma::precision::tf32\b|)re"
   R"re(\b__float_to_tf32\b|\btf32\b|\b__h(?:add|sub|mul|fma|div)2?\w*)re",
   "computes in reduced precision ({m}) in an fp32 problem"},

  // -- pytorch_wrap (KernelBench) --
  {"pytorch_wrap", in_code, forbid, "nn.",
   R"re((?<![\w.])(?:torch\.)?nn\.(?!(?:Module|Parameter|ParameterList|ParameterDict|ModuleList|)re"
   R"re(ModuleDict|init|parameter|functional|Buffer)\b)[A-Za-z_]\w*)re",
   "uses the torch.nn layer {m} instead of a kernel"},

  // -- torch_computation_ops (KernelBench) --
  {"torch_computation_ops", in_code, forbid, "torch.",
   "(?<![\\w.])torch\\.(?:" KBRL_TORCH_OPS ")\\b(?!\\s*=)",
   "uses the PyTorch op {m} instead of a kernel"},
  {"torch_computation_ops", in_code, forbid, "functional.|F.",
   R"re((?<![\w.])(?:torch\.nn\.functional|nn\.functional|F)\.\w+\s*\()re",
   "uses the PyTorch op {m} instead of a kernel"},
  {"torch_computation_ops", in_code, forbid, "torch.",
   R"re((?<![\w.])torch\.(?:linalg|fft|special)\.\w+|(?<![\w.])torch\.ops\.aten\b|)re"
   R"re((?<![\w.])torch\.compile\b)re",
   "uses the PyTorch op {m} instead of a kernel"},
  {"torch_computation_ops", in_code, forbid, "matmul|mm|einsum|softmax|relu|gelu|sigmoid|tanh|conv",
   R"re(\btorch\s*\.\s*ops(?:\s*\.\s*\w+)+\s*\((*SKIP)(*F)|\.(?:matmul|mm|bmm|addmm|baddbmm|)re"
   R"re(einsum|softmax|log_softmax|relu|gelu|sigmoid|tanh|conv2d)\s*\()re",
   "uses the PyTorch tensor method {m} instead of a kernel"},
  {"torch_computation_ops", in_code, forbid, "@", R"re((?<=[\w)\]])[ \t]*@[ \t]*[\w(])re",
   "uses the @ matrix product instead of a kernel"},
  {"torch_computation_ops", in_kernel, forbid, "torch::|at::",
   "\\b(?:torch|at)::(?:" KBRL_TORCH_OPS ")\\s*\\(|\\bat::native::\\w+|\\bat::cuda::blas::\\w+",
   "the kernel source calls the library op {m} instead of a kernel"},
  {"torch_computation_ops", in_kernel, forbid, "blas|BLAS|cudnn|miopen",
   R"re(\b(?:cublas|cublasLt|cudnn|hipblas|hipblasLt|rocblas|miopen)\w*\s*\()re",
   "the kernel source calls the library function {m} instead of a kernel"},
  {"torch_computation_ops", in_kernel, forbid, "matmul|mm|softmax|relu|conv",
   R"re(\.(?:matmul|mm|bmm|addmm|baddbmm|softmax|relu|conv2d)\s*\()re",
   "the kernel source calls the tensor method {m} instead of a kernel"},

  // -- backend requirements (KernelBench's *_impl, kbrl's hip_impl) --
  {"cuda_impl", in_kernel, require, "__global__", R"re(\b__global__\b)re",
   "no __global__ kernel in the C++/CUDA source strings", 0},
  {"cuda_impl", in_code, require, "load",
   R"re((?:(?<![\w.])|(?<=cpp_extension\.))load(?:_inline)?\s*\()re",
   "the CUDA source is never compiled with torch.utils.cpp_extension.load_inline/load", 1},
  {"cuda_impl", in_kernel, require, "<<<|LaunchKernel|LaunchCooperativeKernel",
   R"re(<<<|\bcu(?:da)?Launch(?:Cooperative)?Kernel\w*\s*\()re",
   "no kernel launch (<<<...>>> or cudaLaunchKernel) in the C++/CUDA source strings", 2},
  {"hip_impl", in_kernel, require, "__global__", R"re(\b__global__\b)re",
   "no __global__ kernel in the C++/HIP source strings", 0},
  {"hip_impl", in_code, require, "load",
   R"re((?:(?<![\w.])|(?<=cpp_extension\.))load(?:_inline)?\s*\()re",
   "the HIP source is never compiled with torch.utils.cpp_extension.load_inline/load", 1},
  {"hip_impl", in_kernel, require, "<<<|LaunchKernel",
   R"re(<<<|\bhip(?:Module)?LaunchKernel\w*\s*\()re",
   "no kernel launch (<<<...>>> or hipLaunchKernelGGL) in the C++/HIP source strings", 2},
  {"triton_impl", in_code, require, "triton.", R"re(@\s*triton\.(?:jit|autotune)\b)re",
   "no @triton.jit or @triton.autotune kernel", 0},
  {"triton_impl", in_code, require, "tl.",
   R"re(\btl\.\w+)re", "no tl.* operations in the Triton code", 1},
  {"tk_impl", in_kernel, require, "warp",
   R"re(\bkittens::warp(?:group)?\b|::warpgroup::|::warp::|\bwarpgroup::|\bwarp::)re",
   "no ThunderKittens warp/warpgroup code (kittens::warp, warpgroup::)", 0},
  {"tk_impl", in_kernel, require, "st_|rt_", R"re((?:kittens::)?\b(?:st|rt)_\w+\s*<[^>]+>)re",
   "no ThunderKittens tile declarations (st_*<...>, rt_*<...>)", 1},
  {"cute_impl", in_kernel, require, "cute::|cutlass::", R"re(\bcute::|\bcutlass::)re",
   "no cute:: or cutlass:: code", 0},
  {"cute_impl", in_code, require, "cutlass", R"re(\b(?:from|import)\s+cutlass\b)re",
   "no cute:: or cutlass:: code", 0},
  {"tilelang_impl", in_code, require, "T.prim_func", R"re(@\s*T\.prim_func\b)re",
   "no @T.prim_func kernel", 0},

  // -- reference_access --
  {"reference_access", in_code, forbid, "Model", R"re(\bclass\s+Model\b(*SKIP)(*F)|\bModel\b)re",
   "refers to the reference class Model"},
  {"reference_access", in_code, forbid, "get_",
   R"re(\bdef\s+get_(?:init_)?inputs\b(*SKIP)(*F)|\bget_(?:init_)?inputs\b)re",
   "uses the problem's input generator {m}"},
  {"reference_access", in_code, forbid, "__main__", R"re(\b__main__\b)re",
   "reaches the __main__ module, where the reference may live"},
  {"reference_access", in_code, forbid, "ref|problem|kernelbench|kbrl|src",
   R"re(\b(?:from|import)\s+(?:reference|ref|problem|kernelbench|kbrl\w*|src)\b)re",
   "imports the reference or the evaluation harness ({m})"},
  {"reference_access", in_code, forbid, "globals", R"re(\bglobals\s*\()re",
   "reads globals(), where the reference may live"},
  {"reference_access", in_code, forbid, "hook", R"re(\bregister_\w*hook\b)re",
   "registers a module hook ({m}): can capture the reference's outputs"},

  // -- output_cache (plus the structural check in check_output_cache) --
  {"output_cache", in_code, forbid, "lru_cache|cached_property|cache",
   R"re(\b(?:lru_cache|cached_property)\b|\bfunctools\.cache\b|@\s*cache\b)re",
   "memoises results across calls ({m})"},
  {"output_cache", in_code, forbid, "data_ptr|storage|_version|_cdata",
   R"re(\.data_ptr\s*\(|\.(?:untyped_)?storage\s*\(\s*\)|\._version\b|\b_cdata\b)re",
   "keys on tensor identity ({m}): outputs can be reused across calls"},
  {"output_cache", in_code, forbid, "id|hash", R"re((?<![\w.])(?:id|hash)\s*\()re",
   "keys on object identity ({m}): outputs can be reused across calls"},
  {"output_cache", in_kernel, forbid, "static|map",
   R"re(\bstatic\s+(?:const\s+)?(?:at|torch)::Tensor\b|)re"
   R"re(\bstd::(?:unordered_)?map\s*<[^;{]*\bTensor\b)re",
   "the kernel source keeps tensors across calls ({m})"},
  {"output_cache", in_code, forbid, "weakref|Weak",
   R"re(\bweakref\b|\bWeak(?:Key|Value)Dictionary\b)re",
   "keeps objects across calls through {m}"},

  // -- sys_modules --
  {"sys_modules", in_code, forbid, "sys.",
   R"re(\bsys\.(?:modules|meta_path|path_hooks|path_importer_cache|path)\b)re",
   "touches {m} (the import system)"},

  // -- import_evasion --
  {"import_evasion", in_code, forbid, "os|sys|time",
   R"re((?<![\w.])(?:os|sys|time)(?:\.\w+)*\s+as\s+\w+|\bfrom\s+(?:os|sys|)re"
   R"re(time)(?:\.\w+)*\s+import\b)re",
   "imports {m}: names and aliases hide the calls the checks look for"},
  {"import_evasion", in_code, forbid, "os|sys|time",
   R"re((?<![=!<>])=\s*(?:os|sys|time)\s*(?=$|[;,)\]}]))re",
   "aliases a module ({m}): hides the calls the checks look for"},

  // -- builtins_access --
  {"builtins_access", in_code, forbid, "builtins", R"re(\b__builtins__\b|\bbuiltins\b)re",
   "touches {m}"},

  // -- dunder_escape --
  {"dunder_escape", in_code, forbid, "__",
   R"re(\b__(?:subclasses|globals|code|closure|mro|bases|base|dict|class|getattribute|setattr|)re"
   R"re(delattr|getattr|reduce|reduce_ex|doc|loader|spec|self|func|wrapped|init_subclass|)re"
   R"re(set_name|del|defaults|kwdefaults|call|new|instancecheck|subclasscheck|)re"
   R"re(class_getitem)__\b)re",
   "reaches into the object graph through {m}"},

  // -- gc_access --
  {"gc_access", in_code, forbid, "gc|tracemalloc|objgraph",
   R"re((?<![\w.])gc\b|\btracemalloc\b|\bobjgraph\b)re",
   "uses the garbage collector ({m}): it finds the reference and its outputs"},

  // -- frame_inspection --
  {"frame_inspection", in_code, forbid, "inspect", R"re((?<![\w.])inspect\b)re",
   "uses inspect (frames, callers, source)"},
  {"frame_inspection", in_code, forbid,
   "_getframe|_current_frames|f_|tb_|gi_|cr_|ag_|__traceback__",
   R"re(\b_getframe\b|\b_current_frames\b|\bf_(?:back|locals|globals|code|builtins|lineno|lasti|)re"
   R"re(trace)\b|\b(?:tb_frame|tb_next|gi_frame|cr_frame|ag_frame|gi_code|cr_code)\b|)re"
   R"re(\b__traceback__\b)re",
   "inspects interpreter frames ({m})"},
  {"frame_inspection", in_code, forbid, "traceback|sys.",
   R"re((?<![\w.])traceback\b|\bsys\.(?:settrace|setprofile|gettrace|getprofile|exc_info|)re"
   R"re(exception|last_\w+|call_tracing|addaudithook|audit|monitoring)\b)re",
   "inspects or traces execution ({m})"},
  {"frame_inspection", in_code, forbid, "locals|vars", R"re((?<![\w.])(?:locals|vars)\s*\()re",
   "reads variables through {m}"},

  // -- file_access --
  {"file_access", in_code, forbid, "open", R"re((?<![\w.])open\s*\()re", "opens a file"},
  {"file_access", in_code, forbid, "io.|codecs.",
   R"re(\b(?:io|codecs)\.(?:open|open_code|FileIO)\b)re",
   "opens a file ({m})"},
  {"file_access", in_code, forbid,
   "gzip|bz2|lzma|tarfile|zipfile|zipimport|fileinput|shutil|tempfile|glob|mmap|fcntl|pickle|"
   "shelve|dbm|sqlite3|linecache|pathlib",
   R"re((?<![\w.])(?:gzip|bz2|lzma|tarfile|zipfile|fileinput|shutil|tempfile|glob|mmap|fcntl|)re"
   R"re(pickle|shelve|dbm|sqlite3|linecache|pathlib)\b)re",
   "uses the file module {m}"},
  {"file_access", in_code, forbid, "Path",
   R"re((?<![\w.])Path\s*\()re", "builds a filesystem path"},
  {"file_access", in_code, forbid, "os.",
   R"re(\bos\.(?:open|fdopen|remove|unlink|rename|renames|replace|makedirs|mkdir|rmdir|)re"
   R"re(removedirs|listdir|scandir|walk|fwalk|chmod|fchmod|chown|lchown|chdir|fchdir|chroot|)re"
   R"re(stat|lstat|fstat|truncate|ftruncate|write|read|pread|pwrite|readv|writev|symlink|link|)re"
   R"re(readlink|utime|mkfifo|mknod|sendfile|memfd_create|pipe|pipe2|dup|dup2|access|lseek|)re"
   R"re(fsync|fdatasync|close|closerange|copy_file_range|splice|posix_fallocate|statvfs|getcwd|)re"
   R"re(getcwdb|path|listxattr|getxattr|setxattr|removexattr|umask|set_inheritable|)re"
   R"re(get_inheritable|set_blocking|openpty|fspath)\b)re",
   "uses the file function {m}"},
  {"file_access", in_code, forbid, "__file__",
   R"re(\b__file__\b)re", "locates its own source file"},
  {"file_access", in_code, forbid, "np.|numpy.|tofile",
   R"re(\b(?:np|numpy)\.(?:save|savez\w*|savetxt|load|loadtxt|genfromtxt|fromfile|memmap)\b|)re"
   R"re(\.tofile\s*\()re",
   "reads or writes files through {m}"},
  {"file_access", in_code, forbid, "torch.|safetensors|huggingface_hub",
   R"re(\btorch\.(?:save|load|from_file|hub)\b|\btorch\.jit\.(?:save|load)\b|\bsafetensors\b|)re"
   R"re(\bhuggingface_hub\b)re",
   "reads or writes files through {m}"},
  {"file_access", in_code, forbid, "build_directory", R"re(\bbuild_directory\s*=)re",
   "chooses its own extension build directory (kbrl owns the build cache)"},
  {"file_access", in_kernel, forbid,
   "open|fstream|filesystem|opendir|readdir|unlink|rmdir|mkdir|creat|mmap",
   R"re((?<![\w.>])(?:fopen|fdopen|freopen|open|openat|open64|opendir|readdir|unlink|unlinkat|)re"
   R"re(rmdir|mkdir|creat|mmap|truncate|rename)\s*\(|\b(?:std::)?[io]?fstream\b|)re"
   R"re(\bstd::filesystem\b)re",
   "the kernel source touches files ({m})"},
  {"file_access", in_kernel, forbid, "remove", R"re((?<![\w.>:])remove\s*\()re",
   "the kernel source deletes files ({m})"},
  {"file_access", in_kernel, forbid, "write|dup|ioctl|sendfile|syscall|fsync|lseek",
   R"re((?<![\w.>])(?:write|pwrite|writev|dup|dup2|dup3|ioctl|sendfile|syscall|fsync|)re"
   R"re(lseek)\s*\()re",
   "the kernel source uses file descriptors ({m})"},
  {"file_access", in_kernel, forbid, "include|incbin|embed",
   R"re(#\s*include\s*[<"]\s*(?:/|\.\.|~)|#\s*include\s*[<"](?:fstream|filesystem|dirent\.h|)re"
   R"re(fcntl\.h|unistd\.h|sys/(?:stat|mman|syscall|uio|ioctl|sendfile)\.h)[>"]|\.incbin\b|)re"
   R"re(#\s*embed\b|__has_embed)re",
   "the kernel source includes files from disk ({m})"},

  // -- network_access --
  {"network_access", in_code, forbid,
   "socket|urllib|requests|httpx|aiohttp|http|ftplib|smtplib|poplib|imaplib|nntplib|telnetlib|"
   "xmlrpc|websocket|paramiko|ssl|zmq|grpc|asyncssh|pycurl",
   R"re((?<![\w.])(?:socket|socketserver|urllib|urllib2|urllib3|requests|httpx|aiohttp|http|)re"
   R"re(ftplib|smtplib|poplib|imaplib|nntplib|telnetlib|xmlrpc|websocket|websockets|paramiko|)re"
   R"re(ssl|zmq|grpc|asyncssh|pycurl)\b)re",
   "uses the network ({m})"},
  {"network_access", in_kernel, forbid,
   "socket|connect|getaddrinfo|gethostbyname|inet_|sendto|recvfrom|curl_|include",
   R"re(\b(?:socket|connect|getaddrinfo|gethostbyname|inet_pton|inet_addr|sendto|recvfrom)\s*\(|)re"
   R"re(\bcurl_\w+|#\s*include\s*[<"](?:sys/socket\.h|netinet/\w+\.h|arpa/inet\.h|netdb\.h|)re"
   R"re(curl/curl\.h)[>"])re",
   "the kernel source uses the network ({m})"},

  // -- subprocess_spawn --
  {"subprocess_spawn", in_code, forbid, "subprocess|pty|pexpect|popen2",
   R"re((?<![\w.])(?:subprocess|pty|pexpect|popen2)\b)re", "runs other programs ({m})"},
  {"subprocess_spawn", in_code, forbid, "os.",
   R"re(\bos\.(?:system|popen|exec\w*|spawn\w*|posix_spawn\w*|startfile|wait\w*)\b)re",
   "runs other programs ({m})"},
  {"subprocess_spawn", in_kernel, forbid, "system|popen|exec|posix_spawn",
   R"re((?<![\w.>])(?:system|popen|execv\w*|execl\w*|execve|posix_spawn\w*)\s*\()re",
   "the kernel source runs other programs ({m})"},

  // -- ctypes_ffi --
  {"ctypes_ffi", in_code, forbid, "ctypes|cffi|cppyy|pythonnet|DLL|LoadLibrary|load_library|dlopen",
   R"re((?<![\w.])(?:ctypes|_ctypes|cffi|cppyy|pythonnet)\b|\b(?:CDLL|PyDLL|WinDLL|LoadLibrary|)re"
   R"re(load_library|dlopen)\b)re",
   "loads native code outside the build ({m})"},
  {"ctypes_ffi", in_kernel, forbid, "dlopen|dlsym|dlmopen|dlfcn",
   R"re(\b(?:dlopen|dlsym|dlmopen|dlvsym)\s*\(|#\s*include\s*[<"]dlfcn\.h)re",
   "the kernel source loads native code at run time ({m})"},

  {"ctypes_ffi", in_kernel, forbid, "--wrap|--defsym|-init|-fini|LD_PRELOAD|LD_LIBRARY_PATH",
   R"re(--wrap\b|--defsym\b|-Wl,-(?:init|fini)\b|\bLD_PRELOAD\b|\bLD_LIBRARY_PATH\b)re",
   "interposes native symbols at link or load time ({m})"},

  // -- precision_flags --
  {"precision_flags", in_code, forbid, "torch.backends",
   R"re(\btorch\.backends\.[\w.]+\s*=(?!=))re",
   "changes {m}: global math settings affect the reference too"},
  {"precision_flags", in_code, forbid, "allow_|fp32_precision",
   R"re(\.(?:allow_tf32|allow_fp16_reduced_precision_reduction|)re"
   R"re(allow_bf16_reduced_precision_reduction|fp32_precision)\s*=(?!=))re",
   "changes {m}: global math settings affect the reference too"},
  {"precision_flags", in_code, forbid, "set_|use_deterministic",
   R"re(\b(?:set_float32_matmul_precision|set_default_dtype|set_default_tensor_type|)re"
   R"re(set_flush_denormal|use_deterministic_algorithms|set_deterministic_debug_mode)\b)re",
   "changes global math settings ({m})"},
  {"precision_flags", in_code, forbid, "torch.backends",
   R"re(\bsetattr\s*\(\s*torch\.backends\b|\btorch\.backends\.\w+\.flags\s*\()re",
   "changes torch.backends settings ({m})"},
  {"precision_flags", in_kernel, forbid,
   "setAllow|setFloat32|setBenchmark|setDeterministic|TF32|cublasSetMathMode|FAST_",
   R"re(\bsetAllow\w*|\bsetFloat32MatmulPrecision\b|\bsetBenchmarkCuDNN\b|)re"
   R"re(\bsetDeterministicCuDNN\b|\bCUBLAS_TF32_TENSOR_OP_MATH\b|\bcublasSetMathMode\b|)re"
   R"re(\bCUBLAS_COMPUTE_32F_FAST_\w+)re",
   "the kernel source changes global math settings ({m})"},

  // -- rng_state --
  {"rng_state", in_code, forbid, "seed|rng_state|fork_rng|default_generator|graphsafe",
   R"re(\b(?:manual_seed\w*|initial_seed|get_rng_state\w*|set_rng_state\w*|fork_rng|)re"
   R"re(default_generator|graphsafe_[gs]et_state)\b)re",
   "touches the random number generator ({m}): the test inputs become predictable"},
  {"rng_state", in_code, forbid, "random.",
   R"re(\b(?:random|np\.random|numpy\.random)\.(?:seed|getstate|setstate|get_state|set_state)\b)re",
   "touches the random number generator ({m}): the test inputs become predictable"},

  // -- dynamic_code --
  {"dynamic_code", in_code, forbid, "eval|exec|compile|breakpoint",
   R"re((?<![\w.])(?:eval|exec|compile|execfile|breakpoint)\s*\()re",
   "runs code built at run time ({m})"},
  {"dynamic_code", in_code, forbid, "__import__",
   R"re(\b__import__\b)re", "imports by name (__import__)"},
  {"dynamic_code", in_code, forbid, "importlib|runpy|marshal|codeop|pkgutil|imp|zipimport",
   R"re(\bimportlib\b|(?<![\w.])(?:runpy|marshal|codeop|pkgutil|imp|zipimport)\b)re",
   "loads code dynamically ({m})"},
  {"dynamic_code", in_code, forbid, "Type",
   R"re(\btypes\.(?:FunctionType|CodeType|ModuleType|LambdaType|MethodType)\b|\b(?:FunctionType|)re"
   R"re(CodeType)\b)re",
   "builds code or modules at run time ({m})"},
  {"dynamic_code", in_code, forbid, "attr",
   R"re((?<![\w.])(?:getattr|setattr|delattr|hasattr)\s*\(\s*(?:os|sys|builtins|__builtins__|)re"
   R"re(time|subprocess|importlib|gc|inspect|socket|ctypes|shutil|io|signal|threading|)re"
   R"re(multiprocessing)\s*,)re",
   "reaches a sensitive module attribute by name ({m})"},
  {"dynamic_code", in_code, forbid, "operator.",
   R"re(\boperator\.(?:attrgetter|methodcaller)\b)re",
   "reaches attributes by name ({m})"},
  {"dynamic_code", in_kernel, forbid,
   "py::|PyRun_|PyImport_|PyEval_|Py_Compile|PyObject_CallMethod",
   R"re(\bpy::(?:exec|eval|eval_file|module_?::import|globals)\b|\bPyRun_\w+|\bPyImport_\w+|)re"
   R"re(\bPyEval_\w+|\bPy_CompileString\w*|\bPyObject_CallMethod\b)re",
   "the kernel source runs Python ({m})"},

  // -- env_write --
  {"env_write", in_code, forbid, "environ", R"re(\bos\.environ\s*\[[^\]\r\n]*\]\s*=(?!=))re",
   "writes os.environ"},
  {"env_write", in_code, forbid, "environ|putenv|unsetenv",
   R"re(\bos\.environ\s*\.\s*(?:update|setdefault|pop|popitem|clear|__setitem__|__delitem__)\b|)re"
   R"re(\bos\.environ\s*(?:\|=|=(?!=))|\bdel\s+os\.environ\b|\bos\.(?:putenv|unsetenv)\b)re",
   "writes the environment ({m})"},
  {"env_write", in_code, forbid, "environ", R"re(\bfrom\s+os\s+import\b[^\r\n]*\benviron\b)re",
   "imports os.environ by name"},
  {"env_write", in_kernel, forbid, "env",
   R"re((?<![\w.>])(?:setenv|putenv|unsetenv|clearenv)\s*\()re",
   "the kernel source writes the environment ({m})"},

  // -- signal_use --
  {"signal_use", in_code, forbid, "signal|faulthandler|os.",
   R"re((?<![\w.])(?:signal|faulthandler)\b|\bos\.(?:kill|killpg|pidfd_send_signal)\b)re",
   "uses signals ({m})"},
  {"signal_use", in_kernel, forbid, "signal|sigaction|raise|kill|alarm|setitimer|sigqueue",
   R"re((?<![\w.>])(?:signal|sigaction|raise|kill|killpg|alarm|setitimer|pthread_kill|)re"
   R"re(sigqueue)\s*\()re",
   "the kernel source uses signals ({m})"},

  // -- process_exit --
  {"process_exit", in_code, forbid, "exit|abort|quit|SystemExit",
   R"re(\bsys\.exit\b|\bos\.(?:_exit|abort)\b|(?<![\w.])(?:exit|quit)\s*\(|\batexit\b|)re"
   R"re(\bSystemExit\b)re",
   "ends the process ({m})"},
  {"process_exit", in_kernel, forbid, "exit|Exit|abort|terminate",
   R"re((?<![\w.>])(?:exit|_exit|_Exit|quick_exit|abort|terminate)\s*\()re",
   "the kernel source ends the process ({m})"},

  // -- torch_monkey_patch --
  {"torch_monkey_patch", in_code, forbid, "torch.|F.|nn.|np.|numpy.|triton.|tl.|Tensor.|math.",
   R"re(:\s*(?:torch|F|nn|np|numpy|triton|tl|Tensor|math)(?:\.\w+)+\s*=(*SKIP)(*F)|)re"
   R"re((?<![\w.])(?!torch\.backends\b|torch\.cuda\.(?:Event|synchronize|current_stream|)re"
   R"re(default_stream|Stream)\b)(?:torch|F|nn|np|numpy|triton|tl|Tensor|)re"
   R"re(math)(?:\.\w+)+\s*=(?!=))re",
   "monkey-patches {m}"},
  {"torch_monkey_patch", in_code, forbid, "setattr",
   R"re(\bsetattr\s*\(\s*(?!torch\.backends\b)(?:torch|F|nn|np|numpy|triton|tl|Tensor|math)\b)re",
   "monkey-patches through {m}"},

  // -- torch_internals --
  {"torch_internals", in_code, forbid, "torch.|Library",
   R"re(\btorch\.(?:_C|library|_library|_ops|_dynamo|_inductor|_functorch|_subclasses|_prims|)re"
   R"re(_refs|_decomp|_guards)\b|(?<![\w.])Library\s*\()re",
   "uses PyTorch internals ({m})"},
  {"torch_internals", in_kernel, forbid,
   "TORCH_LIBRARY|Dispatcher|RegisterOperators|registerFallback|c10::impl",
   R"re(\bTORCH_LIBRARY(?:_IMPL|_FRAGMENT)?\s*\(\s*(?:aten|prim|_)\b|\bc10::Dispatcher\b|)re"
   R"re(\bRegisterOperators\b|\bregisterFallback\b|\bc10::impl::)re",
   "the kernel source overrides PyTorch operators ({m})"},

  // -- encoding_trick (plus the declaration and \N{} checks in code) --
  {"encoding_trick", in_code, forbid, "", R"re([\x80-\xff]+)re",
   "non-ASCII characters in Python code: identifiers are NFKC-normalised, lookalikes can spell"
   " any name"},

  // -- cuda_graph --
  {"cuda_graph", in_code, forbid, "CUDAGraph|graph",
   R"re(\bCUDAGraph\b|\bcuda\.graphs?\b|\bmake_graphed_callables\b|\bgraph_pool_handle\b)re",
   "captures or replays CUDA graphs ({m})"},
  {"cuda_graph", in_kernel, forbid, "Graph|BeginCapture",
   R"re(\b(?:cuda|hip|cu)Graph\w*|\b(?:cuda|hip|cu)StreamBeginCapture\w*|\bCUDAGraph\b)re",
   "the kernel source captures or replays CUDA graphs ({m})"},

  // -- token_pasting --
  {"token_pasting", in_kernel, forbid, "##",
   R"re(##)re", "token pasting (##) in the kernel source"},
};

#undef KBRL_TORCH_OPS

using code_ptr = std::unique_ptr<pcre2_code, void (*)(pcre2_code*)>;

void free_code(pcre2_code* c) {
  pcre2_code_free(c);
}

/// Compiles a pattern once; a pattern that does not compile is a bug in kbrl.
code_ptr compile_regex(const char* pattern) {
  std::unique_ptr<pcre2_compile_context, void (*)(pcre2_compile_context*)> ctx{
    pcre2_compile_context_create(nullptr), pcre2_compile_context_free};
  pcre2_set_newline(ctx.get(), PCRE2_NEWLINE_ANYCRLF);
  int err = 0;
  PCRE2_SIZE where = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED,
                                   PCRE2_MULTILINE, &err, &where, ctx.get());
  if (code == nullptr) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(err, buf, sizeof buf);
    throw std::logic_error("static_checks: pattern does not compile at " + std::to_string(where)
                           + ": " + reinterpret_cast<const char*>(buf) + ": " + pattern);
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE); // falls back to the interpreter if unavailable
  return code_ptr{code, free_code};
}

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
  code_ptr load_assign{nullptr, free_code};  // NAME = ...load_inline(  /  self.NAME = ...
  code_ptr load_call{nullptr, free_code};    // load_inline( / load(
  code_ptr triton_deco{nullptr, free_code};  // @triton.jit / autotune / heuristics
  code_ptr self_assign{nullptr, free_code};  // self.X = / self.X[...] = / self.X += / mutators
  code_ptr name_mutate{nullptr, free_code};  // NAME[...] = / NAME.update( ...
  code_ptr global_decl{nullptr, free_code};  // global a, b
  code_ptr top_assign{nullptr, free_code};   // NAME = (at the start of a statement)
  code_ptr returned{nullptr, free_code};     // a returned element that is stored state
  code_ptr coding{nullptr, free_code};       // # -*- coding: NAME -*-
  code_ptr import_stmt{nullptr, free_code};  // import a.b as c, d
  code_ptr from_import{nullptr, free_code};  // from a import (b as c, d)
  code_ptr attr_assign{nullptr, free_code};  // NAME.attr... = (not an annotation)
  code_ptr setattr_call{nullptr, free_code}; // setattr(NAME,
  code_ptr custom_op{nullptr, free_code};    // torch.ops.<own namespace>.<op>
};

struct pattern_table {
  std::vector<compiled_pattern> patterns;
  helper_patterns helpers;
  std::unique_ptr<pcre2_match_context, void (*)(pcre2_match_context*)> match_ctx{
    nullptr, pcre2_match_context_free};
};

std::vector<std::string> split_hints(const char* hints) {
  std::vector<std::string> out;
  std::string_view sv = hints;
  while (!sv.empty()) {
    auto bar = sv.find('|');
    out.emplace_back(sv.substr(0, bar));
    if (bar == std::string_view::npos)
      break;
    sv.remove_prefix(bar + 1);
  }
  return out;
}

const pattern_table& table() {
  static const pattern_table instance = [] {
    pattern_table t;
    for (const auto& p : pattern_defs) {
      auto idx = rule_index(p.rule);
      if (idx == rule_count)
        throw std::logic_error(std::string{"static_checks: pattern for unknown rule "} + p.rule);
      t.patterns.push_back(compiled_pattern{idx, p.where, p.kind, p.group, split_hints(p.hints),
                                            compile_regex(p.regex), p.message});
    }
    auto& h = t.helpers;
    h.load_assign = compile_regex(
      R"re((\bself\s*\.\s*)?\b(\w+)\s*=\s*(?:[\w.]+\.)?load(?:_inline)?\s*\()re");
    h.load_call = compile_regex(R"re((?:(?<![\w.])|(?<=cpp_extension\.))load(?:_inline)?\s*\()re");
    h.triton_deco = compile_regex(R"re(^@\s*triton\.(?:jit|autotune|heuristics)\b)re");
    h.self_assign = compile_regex(
      R"re(\bself\s*\.\s*(\w+)(?:\s*\[[^\]\r\n]*\])?\s*(?:=(?!=)|[-+*/|&]=)|)re"
      R"re(\bself\s*\.\s*(\w+)\s*\.\s*(?:update|setdefault|append|extend|insert|add|)re"
      R"re(__setitem__)\s*\(|\bsetattr\s*\(\s*self\b())re");
    h.name_mutate = compile_regex(
      R"re((?<![\w.])(\w+)\s*\[[^\]\r\n]*\]\s*=(?!=)|(?<![\w.])(\w+)\s*\.\s*(?:update|)re"
      R"re(setdefault|append|extend|insert|add|__setitem__)\s*\()re");
    h.global_decl = compile_regex(R"re(\bglobal\s+(\w+(?:\s*,\s*\w+)*))re");
    h.top_assign = compile_regex(R"re(^(\w+)\s*(?::[^=\r\n]*)?=(?!=))re");
    h.returned = compile_regex(
      R"re(^\s*(?:self\s*\.\s*(\w+)|(\w+))(?:\s*\[[^\]]*\])?(?:\s*\.\s*(?:clone|detach|)re"
      R"re(contiguous|view|view_as|reshape|reshape_as|expand|expand_as|to|float|cuda|cpu|)re"
      R"re(squeeze|unsqueeze|flatten|t|permute|transpose|type_as|)re"
      R"re(requires_grad_)\s*\([^()]*\))*\s*$)re");
    h.coding = compile_regex(R"re(^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+))re");
    h.import_stmt = compile_regex(R"re(^[ \t]*import[ \t]+([^\r\n;]+))re");
    h.from_import = compile_regex(
      R"re(^[ \t]*from[ \t]+[\w.]+[ \t]+import[ \t]+(\([^)]*\)|[^\r\n;]+))re");
    h.attr_assign = compile_regex(
      R"re(:\s*\w+(?:\s*\.\s*\w+)+\s*=(*SKIP)(*F)|(?<![\w.])(\w+)((?:\s*\.\s*\w+)+)\s*=(?!=))re");
    h.setattr_call = compile_regex(R"re(\bsetattr\s*\(\s*(\w+)\s*[,.])re");
    h.custom_op = compile_regex(
    R"re(\btorch\s*\.\s*ops\s*\.\s*(?!aten\b|prims?\b)\w+\s*\.\s*\w+)re");
    t.match_ctx.reset(pcre2_match_context_create(nullptr));
    // Bounds the work of a pathological input; a match that hits the limit counts as no match.
    pcre2_set_match_limit(t.match_ctx.get(), 1'000'000);
    pcre2_set_depth_limit(t.match_ctx.get(), 10'000);
    return t;
  }();
  return instance;
}

/// A reusable match buffer for one check.
class matcher {
public:
  matcher() : md_(pcre2_match_data_create(20, nullptr), pcre2_match_data_free) {
    // nop
  }

  /// Finds the next match of `re` in `text` at or after `from`.
  bool find(const pcre2_code* re, std::string_view text, size_t from) {
    if (from > text.size())
      return false;
    int rc = pcre2_match(re, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), from, 0,
                         md_.get(), table().match_ctx.get());
    failed_ = rc < 0 && rc != PCRE2_ERROR_NOMATCH; // match or JIT stack limit: undecided
    if (rc <= 0)
      return false;
    ov_ = pcre2_get_ovector_pointer(md_.get());
    count_ = static_cast<uint32_t>(rc);
    return true;
  }

  /// The last find() gave up (a resource limit) instead of answering.
  bool failed() const {
    return failed_;
  }

  size_t begin(uint32_t g = 0) const {
    return g < count_ ? ov_[2 * g] : PCRE2_UNSET;
  }

  size_t end(uint32_t g = 0) const {
    return g < count_ ? ov_[2 * g + 1] : PCRE2_UNSET;
  }

  bool matched(uint32_t g) const {
    return g < count_ && ov_[2 * g] != PCRE2_UNSET;
  }

  std::string_view group(std::string_view text, uint32_t g) const {
    if (!matched(g))
      return {};
    return text.substr(ov_[2 * g], ov_[2 * g + 1] - ov_[2 * g]);
  }

private:
  std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> md_;
  PCRE2_SIZE* ov_ = nullptr;
  uint32_t count_ = 0;
  bool failed_ = false;
};

// -- the outline of a Python program --------------------------------------------------------------

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
outline make_outline(std::string_view code) {
  outline out;
  std::vector<int> stack;
  std::vector<std::string> decorators;
  size_t n = code.size();
  size_t k = 0;
  int depth = 0;
  auto word_after = [](std::string_view text, std::string_view kw) -> std::string {
    if (text.substr(0, kw.size()) != kw || text.size() == kw.size()
        || !(text[kw.size()] == ' ' || text[kw.size()] == '\t'))
      return {};
    size_t p = kw.size();
    while (p < text.size() && (text[p] == ' ' || text[p] == '\t'))
      ++p;
    size_t b = p;
    while (p < text.size() && is_ident_byte(text[p]))
      ++p;
    return std::string{text.substr(b, p - b)};
  };
  while (k < n) {
    size_t line_begin = k;
    size_t col = 0;
    size_t p = k;
    while (p < n && (code[p] == ' ' || code[p] == '\t' || code[p] == '\f')) {
      col = code[p] == '\t' ? (col / 8 + 1) * 8 : col + 1;
      ++p;
    }
    size_t e = p;
    while (e < n) {
      char c = code[e];
      if (c == '(' || c == '[' || c == '{') {
        ++depth;
      } else if ((c == ')' || c == ']' || c == '}') && depth > 0) {
        --depth;
      } else if (c == '\\' && newline_length(code, e + 1) > 0) {
        e += 1 + newline_length(code, e + 1);
        continue;
      } else if (is_newline(c) && depth == 0) {
        break;
      }
      ++e;
    }
    auto text = code.substr(p, e - p);
    while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || is_newline(text.back())))
      text.remove_suffix(1);
    if (!text.empty()) {
      while (!stack.empty() && out.blocks[static_cast<size_t>(stack.back())].indent >= col) {
        out.blocks[static_cast<size_t>(stack.back())].end = line_begin;
        stack.pop_back();
      }
      auto def_text = text.substr(0, 6) == "async " ? text.substr(6) : text;
      while (!def_text.empty() && (def_text.front() == ' ' || def_text.front() == '\t'))
        def_text.remove_prefix(1);
      std::string def_name = word_after(def_text, "def");
      std::string class_name = word_after(text, "class");
      if (text.front() == '@') {
        decorators.emplace_back(text);
      } else if (!def_name.empty() || !class_name.empty()) {
        block b;
        b.is_class = def_name.empty();
        b.name = b.is_class ? class_name : def_name;
        b.indent = col;
        b.begin = line_begin;
        b.end = n;
        b.parent = stack.empty() ? -1 : stack.back();
        b.decorators = std::move(decorators);
        decorators.clear();
        out.blocks.push_back(std::move(b));
        stack.push_back(static_cast<int>(out.blocks.size() - 1));
      } else {
        decorators.clear();
        if (stack.empty())
          out.top_level.push_back({p, e});
      }
    }
    k = e + newline_length(code, e);
    if (k == e) // end of the source
      break;
  }
  for (int b : stack)
    out.blocks[static_cast<size_t>(b)].end = n;
  return out;
}

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
std::string_view self_attribute(std::string_view code, size_t k, size_t e) {
  while (k < e && (code[k] == ' ' || code[k] == '\t'))
    ++k;
  if (k >= e || code[k] != '.')
    return {};
  ++k;
  while (k < e && (code[k] == ' ' || code[k] == '\t'))
    ++k;
  size_t s = k;
  while (k < e && is_ident_byte(code[k]))
    ++k;
  return code.substr(s, k - s);
}

// -- one check ------------------------------------------------------------------------------------

/// The state of one check_candidate call.
class checker {
public:
  checker(std::string_view source, const static_check_options& opts)
    : src_(source), lexed_(lex_python(source)), lines_(source), per_rule_(rule_count) {
    resolve_levels(opts);
    build_kernel_text();
  }

  static_check_result run() {
    const auto& t = table();
    std::string_view code = lexed_.code;
    std::string_view kernel = kernel_;
    // Requirement groups: rule -> (group -> satisfied), evaluated in table order.
    std::vector<std::vector<std::pair<int, bool>>> groups(rule_count);
    for (const auto& p : t.patterns) {
      if (levels_[p.rule] == severity::off)
        continue;
      std::string_view text = p.where == scope::code ? code : kernel;
      if (p.kind == pattern_kind::require) {
        auto& g = groups[p.rule];
        auto it = std::find_if(g.begin(), g.end(), [&](auto& x) { return x.first == p.group; });
        if (it == g.end()) {
          g.emplace_back(p.group, false);
          it = std::prev(g.end());
        }
        // A requirement the engine could not decide stays unmet (conservative).
        if (!it->second && hinted(p, text) && m_.find(p.re.get(), text, 0))
          it->second = true;
        continue;
      }
      if (full(p.rule) || !hinted(p, text))
        continue;
      size_t from = 0;
      for (int guard = 0; guard < 64 && !full(p.rule) && m_.find(p.re.get(), text, from); ++guard) {
        size_t b = m_.begin(), e = m_.end();
        size_t at = p.where == scope::code ? b : kernel_offset(b);
        add(p.rule, at, expand(p.message, text.substr(b, e - b)));
        from = e > b ? e : b + 1;
      }
      if (m_.failed()) // input built to exhaust the engine is refused, not waved through
        add(p.rule, p.where == scope::code ? from : kernel_offset(from),
            "the input exceeds what this check can decide (regex limits): counted as a finding");
    }
    for (size_t r = 0; r < rule_count; ++r) {
      for (auto& [group, ok] : groups[r]) {
        if (ok)
          continue;
        for (const auto& p : t.patterns)
          if (p.rule == r && p.group == group && p.kind == pattern_kind::require) {
            add_whole(r, p.message);
            break;
          }
        break; // the first unmet requirement says enough
      }
    }
    check_encoding();
    outline ol = make_outline(code);
    check_model_new(ol);
    check_kernel_called(ol);
    check_output_cache(ol);
    check_module_patching();
    return collect();
  }

private:
  void resolve_levels(const static_check_options& opts) {
    for (size_t r = 0; r < rule_count; ++r) {
      const auto& d = rule_defs[r];
      severity level = d.level;
      if (auto it = opts.overrides.find(d.id); it != opts.overrides.end())
        level = it->second;
      bool applies = true;
      auto b = opts.backend;
      switch (d.when) {
        case applies_to::always: break;
        case applies_to::kernel_backends: applies = b != kernel_backend::torch; break;
        case applies_to::fp32: applies = opts.precision == kernel_precision::fp32; break;
        case applies_to::cuda: applies = b == kernel_backend::cuda; break;
        case applies_to::hip: applies = b == kernel_backend::hip; break;
        case applies_to::triton: applies = b == kernel_backend::triton; break;
        case applies_to::thunderkittens: applies = b == kernel_backend::thunderkittens; break;
        case applies_to::cute: applies = b == kernel_backend::cute; break;
        case applies_to::tilelang: applies = b == kernel_backend::tilelang; break;
        case applies_to::launched:
          applies = b == kernel_backend::cuda || b == kernel_backend::hip
                    || b == kernel_backend::triton;
          break;
      }
      levels_[r] = applies ? level : severity::off;
    }
    backend_ = opts.backend;
  }

  /// Joins the values of string literals into kernel source: literals joined by juxtaposition or
  /// `+` (with brackets and line breaks between) form one piece; each piece loses its C
  /// comments on its own; pieces are separated by a line break. String statements are skipped.
  void build_kernel_text() {
    std::string piece;
    std::vector<uint32_t> piece_offsets;
    auto flush = [&] {
      if (piece.empty())
        return;
      auto stripped = strip_c_comments(piece, &piece_offsets);
      uint32_t last = piece_offsets.empty() ? 0 : piece_offsets.back();
      kernel_ += stripped;
      kernel_offsets_.insert(kernel_offsets_.end(), piece_offsets.begin(), piece_offsets.end());
      kernel_.push_back('\n');
      kernel_offsets_.push_back(last);
      piece.clear();
      piece_offsets.clear();
    };
    const std::string& code = lexed_.code;
    size_t prev_end = std::string::npos;
    for (const auto& lit : lexed_.strings) {
      if (lit.is_statement) {
        flush();
        prev_end = std::string::npos;
        continue;
      }
      bool joined = prev_end != std::string::npos && lit.begin >= prev_end;
      for (size_t k = prev_end; joined && k < lit.begin; ++k) {
        char c = code[k];
        joined = c == ' ' || c == '\t' || c == '\f' || is_newline(c) || c == '+' || c == '('
                 || c == ')' || c == '\\';
      }
      if (!joined)
        flush();
      piece += lit.value;
      piece_offsets.insert(piece_offsets.end(), lit.value_offsets.begin(), lit.value_offsets.end());
      prev_end = lit.end;
    }
    flush();
  }

  size_t kernel_offset(size_t k) const {
    if (kernel_offsets_.empty())
      return 0;
    return kernel_offsets_[std::min(k, kernel_offsets_.size() - 1)];
  }

  bool hinted(const compiled_pattern& p, std::string_view text) const {
    if (p.hints.empty())
      return true;
    for (const auto& h : p.hints)
      if (text.find(h) != std::string_view::npos)
        return true;
    return false;
  }

  bool full(size_t rule) const {
    return per_rule_[rule].size() >= 3;
  }

  static std::string expand(const std::string& message, std::string_view matched) {
    auto pos = message.find("{m}");
    if (pos == std::string::npos)
      return message;
    std::string m;
    for (char c : matched) {
      if (c == '\n' || c == '\r' || c == '\t' || c == '\f')
        c = ' ';
      if (c == ' ' && (m.empty() || m.back() == ' '))
        continue;
      m.push_back(c);
    }
    while (!m.empty() && (m.back() == ' ' || m.back() == '=' || m.back() == '(' || m.back() == ','))
      m.pop_back();
    if (m.size() > 48) {
      size_t cut = 45;
      while (cut > 0 && (static_cast<unsigned char>(m[cut]) & 0xC0) == 0x80)
        --cut;
      m = m.substr(0, cut) + "...";
    }
    return message.substr(0, pos) + printable(m) + message.substr(pos + 3);
  }

  /// Records a finding at a source offset (one per line per rule, at most 3 per rule).
  void add(size_t rule, size_t source_offset, std::string message) {
    if (full(rule))
      return;
    int line = lines_.line_of(source_offset);
    for (const auto& f : per_rule_[rule])
      if (f.line == line)
        return;
    static_finding f;
    f.rule = rule_defs[rule].id;
    f.level = levels_[rule];
    f.line = line;
    f.message = std::move(message);
    f.excerpt = excerpt(line, source_offset);
    per_rule_[rule].push_back(std::move(f));
  }

  /// Records a finding about the whole program (line 0).
  void add_whole(size_t rule, std::string message) {
    if (levels_[rule] == severity::off || !per_rule_[rule].empty())
      return;
    static_finding f;
    f.rule = rule_defs[rule].id;
    f.level = levels_[rule];
    f.line = 0;
    f.message = std::move(message);
    per_rule_[rule].push_back(std::move(f));
  }

  /// The source line, trimmed, at most 160 bytes (a window around the finding if longer), with
  /// control characters as blanks and no UTF-8 sequence cut in half.
  std::string excerpt(int line, size_t source_offset) const {
    auto text = lines_.text(src_, line);
    size_t col = source_offset - lines_.start_of(line);
    size_t b = 0, e = text.size();
    while (b < e && (text[b] == ' ' || text[b] == '\t' || text[b] == '\f'))
      ++b;
    while (e > b && (text[e - 1] == ' ' || text[e - 1] == '\t' || text[e - 1] == '\f'))
      --e;
    constexpr size_t limit = 160;
    if (e - b > limit) {
      size_t start = col > b + 60 ? col - 60 : b;
      start = std::min(start, e - limit);
      b = start;
      e = start + limit;
      auto cont = [&](size_t k) { return (static_cast<unsigned char>(text[k]) & 0xC0) == 0x80; };
      while (b < e && cont(b))
        ++b;
      while (e > b && e < text.size() && cont(e))
        --e;
    }
    return printable(text.substr(b, e - b));
  }

  size_t rule(std::string_view id) const {
    return rule_index(id);
  }

  bool on(size_t r) const {
    return levels_[r] != severity::off;
  }

  // -- checks beyond the pattern table -----------------------------------------------------------

  /// A `# coding:` declaration other than UTF-8/ASCII/Latin-1 on line 1 or 2, and \N{...}
  /// escapes the lexer does not decode.
  void check_encoding() {
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

  static bool class_named(const block& b, std::string_view name) {
    return b.is_class && b.name == name && b.parent == -1;
  }

  void check_model_new(const outline& ol) {
    size_t r = rule("model_new_missing");
    if (!on(r))
      return;
    for (const auto& b : ol.blocks)
      if (class_named(b, "ModelNew"))
        return;
    add_whole(r, "the program defines no class ModelNew");
  }

  /// For cuda, hip and triton: the names that lead to the candidate's own kernel (the module
  /// load_inline returns, @triton.jit functions, and every module-level def, class or variable
  /// that uses one) must be used by ModelNew.forward, directly or through `self.attr` set from
  /// one, or through another method of ModelNew that does.
  void check_kernel_called(const outline& ol) {
    size_t r = rule("kernel_not_called");
    if (!on(r))
      return;
    const auto& h = table().helpers;
    std::string_view code = lexed_.code;
    using name_set = std::set<std::string, std::less<>>;
    name_set names;      // module-level names that reach a kernel
    name_set attr_seeds; // self.X = load_inline(...)
    if (backend_ == kernel_backend::triton) {
      for (const auto& b : ol.blocks)
        if (!b.is_class)
          for (const auto& d : b.decorators)
            if (m_.find(h.triton_deco.get(), d, 0))
              names.insert(b.name);
    } else {
      for (size_t from = 0; m_.find(h.load_assign.get(), code, from); from = m_.end()) {
        if (m_.matched(1))
          attr_seeds.emplace(m_.group(code, 2));
        else
          names.emplace(m_.group(code, 2));
      }
      for (const auto& b : ol.blocks) // a module-level def that builds the extension
        if (!b.is_class && b.parent == -1
            && m_.find(h.load_call.get(), code.substr(0, b.end), b.begin))
          names.insert(b.name);
    }
    if (names.empty() && attr_seeds.empty())
      return; // the backend rule already says the kernel is missing
    int model_new = -1;
    for (size_t i = 0; i < ol.blocks.size(); ++i)
      if (class_named(ol.blocks[i], "ModelNew"))
        model_new = static_cast<int>(i);
    // Module level: a def, class or assignment that mentions a kernel name is one too. Each
    // unit is read once; the closure is a walk over "name -> units that mention it".
    struct unit {
      std::string name;
      size_t begin, end;
    };
    std::vector<unit> units;
    for (size_t i = 0; i < ol.blocks.size(); ++i)
      if (ol.blocks[i].parent == -1 && static_cast<int>(i) != model_new)
        units.push_back({ol.blocks[i].name, ol.blocks[i].begin, ol.blocks[i].end});
    for (const auto& st : ol.top_level) {
      auto text = code.substr(st.begin, st.end - st.begin);
      if (m_.find(h.top_assign.get(), text, 0))
        units.push_back({std::string{m_.group(text, 1)}, st.begin + m_.end(), st.end});
    }
    std::map<std::string, std::vector<size_t>, std::less<>> mentioned_by;
    for (size_t u = 0; u < units.size(); ++u)
      for_each_name(code, units[u].begin, units[u].end,
                    [&](std::string_view id, bool attribute, size_t) {
                      if (!attribute)
                        mentioned_by[std::string{id}].push_back(u);
                    });
    auto close_over = [](name_set& reached, const auto& edges, auto&& target_of) {
      std::vector<std::string> work(reached.begin(), reached.end());
      while (!work.empty()) {
        auto name = std::move(work.back());
        work.pop_back();
        auto it = edges.find(name);
        if (it == edges.end())
          continue;
        for (const auto& next : it->second) {
          const std::string& t = target_of(next);
          if (reached.insert(t).second)
            work.push_back(t);
        }
      }
    };
    close_over(names, mentioned_by, [&](size_t u) -> const std::string& { return units[u].name; });
    if (model_new < 0)
      return; // model_new_missing says it
    const auto& cls = ol.blocks[static_cast<size_t>(model_new)];
    // ModelNew: attributes that hold a kernel (self.X = <kernel name or kernel attribute>) and
    // methods that reach one (use a kernel name, a kernel attribute, an operator of the
    // candidate's own namespace, or a method that does), each as a walk over edges.
    name_set attrs = attr_seeds;
    name_set reaching;
    std::map<std::string, std::vector<std::string>, std::less<>> attr_edges;   // rhs -> attr
    std::map<std::string, std::vector<std::string>, std::less<>> method_edges; // self.X -> method
    const block* forward = nullptr;
    auto line_end = [&](size_t k) {
      while (k < code.size() && !is_newline(code[k]))
        ++k;
      return k;
    };
    for (const auto& b : ol.blocks) {
      if (b.parent != model_new || b.is_class)
        continue;
      if (b.name == "forward")
        forward = &b;
      bool direct = m_.find(h.custom_op.get(), code.substr(0, b.end), b.begin);
      for_each_name(code, b.begin, b.end, [&](std::string_view id, bool attribute, size_t k) {
        if (attribute)
          return;
        if (names.count(id) > 0)
          direct = true;
        else if (id == "self")
          method_edges[std::string{self_attribute(code, k, b.end)}].push_back(b.name);
      });
      if (direct)
        reaching.insert(b.name);
      for (size_t from = b.begin; m_.find(h.self_assign.get(), code.substr(0, b.end), from);
           from = std::max(m_.end(), from + 1)) {
        if (!m_.matched(1))
          continue;
        std::string attr{m_.group(code, 1)};
        size_t rhs = m_.end(), eol = line_end(rhs);
        for_each_name(code, rhs, eol, [&](std::string_view id, bool attribute, size_t k) {
          if (attribute)
            return;
          if (names.count(id) > 0)
            attrs.insert(attr);
          else if (id == "self")
            attr_edges[std::string{self_attribute(code, k, eol)}].push_back(attr);
        });
      }
    }
    auto same = [](const std::string& x) -> const std::string& { return x; };
    close_over(attrs, attr_edges, same);
    for (const auto& a : attrs) // a method that mentions self.<kernel attribute>
      if (auto it = method_edges.find(a); it != method_edges.end())
        reaching.insert(it->second.begin(), it->second.end());
    close_over(reaching, method_edges, same);
    const char* what = backend_ == kernel_backend::triton ? "@triton.jit kernel"
                                                           : "load_inline module";
    if (forward == nullptr) {
      // A forward inherited from a class of this file counts if that class reaches a kernel.
      auto header = code.substr(cls.begin, std::min(cls.end, line_end(cls.begin)) - cls.begin);
      bool inherited = false;
      for_each_name(header, 0, header.size(), [&](std::string_view id, bool, size_t) {
        inherited = inherited || names.count(id) > 0;
      });
      if (!inherited)
        add(r, cls.begin, std::string{"ModelNew defines no forward that reaches the "} + what);
      return;
    }
    if (reaching.count("forward") == 0)
      add(r, forward->begin,
          std::string{"ModelNew.forward never uses the "} + what
            + ": PyTorch does the work, not the kernel");
  }

  /// forward/__call__ returning state that outlives the call: an attribute of self assigned
  /// outside __init__, a name declared global, or a module-level container filled by a
  /// function. (Memoisation decorators and identity keys are table patterns.)
  void check_output_cache(const outline& ol) {
    size_t r = rule("output_cache");
    if (!on(r))
      return;
    const auto& h = table().helpers;
    std::string_view code = lexed_.code;
    std::set<std::string, std::less<>> module_names;
    for (const auto& st : ol.top_level) {
      auto text = code.substr(st.begin, st.end - st.begin);
      if (m_.find(h.top_assign.get(), text, 0))
        module_names.emplace(m_.group(text, 1));
    }
    std::set<std::string, std::less<>> persistent; // module-level names kept across calls
    std::map<int, std::set<std::string, std::less<>>> class_attrs; // class -> attributes
    std::set<int> class_any; // classes that setattr(self, ...)
    for (size_t i = 0; i < ol.blocks.size(); ++i) {
      const auto& b = ol.blocks[i];
      if (b.is_class)
        continue;
      auto body = code.substr(0, b.end);
      for (size_t from = b.begin; m_.find(h.global_decl.get(), body, from); from = m_.end()) {
        auto list = m_.group(body, 1);
        for_each_name(list, 0, list.size(), [&](std::string_view id, bool, size_t) {
          persistent.emplace(id);
        });
      }
      for (size_t from = b.begin; m_.find(h.name_mutate.get(), body, from);
           from = std::max(m_.end(), from + 1)) {
        auto id = m_.matched(1) ? m_.group(body, 1) : m_.group(body, 2);
        if (module_names.count(id) > 0)
          persistent.emplace(id);
      }
      if (b.parent >= 0 && ol.blocks[static_cast<size_t>(b.parent)].is_class
          && b.name != "__init__") {
        for (size_t from = b.begin; m_.find(h.self_assign.get(), body, from);
             from = std::max(m_.end(), from + 1)) {
          if (m_.matched(1))
            class_attrs[b.parent].emplace(m_.group(body, 1));
          else if (m_.matched(2))
            class_attrs[b.parent].emplace(m_.group(body, 2));
          else
            class_any.insert(b.parent);
        }
      }
    }
    for (const auto& b : ol.blocks) {
      if (b.is_class || (b.name != "forward" && b.name != "__call__"))
        continue;
      const auto* attrs = b.parent >= 0 && class_attrs.count(b.parent) > 0
                            ? &class_attrs.at(b.parent)
                            : nullptr;
      bool any = b.parent >= 0 && class_any.count(b.parent) > 0;
      for_each_name(code, b.begin, b.end, [&](std::string_view id, bool attribute, size_t k) {
        if (attribute || id != "return")
          return;
        // The returned expression up to the end of its logical line, split at top-level commas.
        size_t e = k;
        int depth = 0;
        while (e < b.end && !(depth == 0 && (is_newline(code[e]) || code[e] == ';'))) {
          if (code[e] == '(' || code[e] == '[' || code[e] == '{')
            ++depth;
          else if ((code[e] == ')' || code[e] == ']' || code[e] == '}') && depth > 0)
            --depth;
          ++e;
        }
        auto expr = code.substr(k, e - k);
        while (!expr.empty() && (expr.front() == ' ' || expr.front() == '\t'))
          expr.remove_prefix(1);
        if (expr.size() >= 2 && expr.front() == '(' && expr.back() == ')')
          expr = expr.substr(1, expr.size() - 2);
        size_t start = 0;
        depth = 0;
        for (size_t j = 0; j <= expr.size(); ++j) {
          char c = j < expr.size() ? expr[j] : ',';
          if (c == '(' || c == '[' || c == '{')
            ++depth;
          else if ((c == ')' || c == ']' || c == '}') && depth > 0)
            --depth;
          if (c != ',' || depth > 0)
            continue;
          auto element = expr.substr(start, j - start);
          start = j + 1;
          if (!m_.find(h.returned.get(), element, 0))
            continue;
          if (m_.matched(1)) {
            auto attr = m_.group(element, 1);
            if (any || (attrs != nullptr && attrs->count(attr) > 0))
              add(r, k, "forward returns self." + std::string{attr}
                          + ", which is kept across calls: outputs can be cached");
          } else if (persistent.count(m_.group(element, 2)) > 0) {
            add(r, k, "forward returns " + std::string{m_.group(element, 2)}
                        + ", module state kept across calls: outputs can be cached");
          }
        }
      });
    }
  }

  /// Assignments to attributes of imported names (`import torch as T; T.allclose = f`,
  /// `from torch import cuda; cuda.Event.record = f`) and setattr on them. The usual spellings
  /// (torch., F., nn., ...) are table patterns; paths other rules own (torch.backends, timing,
  /// os.environ) are left to them.
  void check_module_patching() {
    size_t r = rule("torch_monkey_patch");
    if (!on(r))
      return;
    const auto& h = table().helpers;
    std::string_view code = lexed_.code;
    std::set<std::string, std::less<>> imported;
    auto add_names = [&](std::string_view list, bool from) {
      size_t start = 0;
      for (size_t j = 0; j <= list.size(); ++j) {
        if (j < list.size() && list[j] != ',')
          continue;
        std::vector<std::string_view> words;
        for_each_name(list, start, j, [&](std::string_view id, bool attribute, size_t) {
          if (!attribute)
            words.push_back(id);
        });
        start = j + 1;
        if (words.empty())
          continue;
        // `a.b.c` binds a (import) or c (from); `x as y` binds y.
        if (words.size() >= 3 && words[words.size() - 2] == "as")
          imported.emplace(words.back());
        else
          imported.emplace(from ? words.back() : words.front());
      }
    };
    for (size_t from = 0; m_.find(h.import_stmt.get(), code, from); from = m_.end())
      add_names(m_.group(code, 1), false);
    for (size_t from = 0; m_.find(h.from_import.get(), code, from); from = m_.end())
      add_names(m_.group(code, 1), true);
    static const std::set<std::string, std::less<>> table_names{
      "torch", "F", "nn", "np", "numpy", "triton", "tl", "Tensor", "math", "time", "self",
      // modules whose every use is refused by their own rule
      "builtins", "gc", "inspect", "ctypes", "cffi", "socket", "subprocess", "signal", "threading",
      "multiprocessing", "asyncio", "importlib", "pty", "shutil", "pickle", "traceback"};
    auto owned_elsewhere = [](const std::string& path) {
      static const char* prefixes[] = {"torch.backends", "os.environ"};
      for (const char* p : prefixes)
        if (path.compare(0, std::strlen(p), p) == 0)
          return true;
      static const char* parts[] = {"cuda.Event", "cuda.synchronize", "cuda.Stream",
                                    "cuda.current_stream", "cuda.default_stream", "backends."};
      for (const char* p : parts)
        if (path.find(p) != std::string::npos)
          return true;
      return false;
    };
    for (size_t from = 0; m_.find(h.attr_assign.get(), code, from);
         from = std::max(m_.end(), from + 1)) {
      if (!m_.matched(1))
        continue;
      auto base = m_.group(code, 1);
      if (imported.count(base) == 0 || table_names.count(base) > 0)
        continue;
      std::string path{base};
      for (char c : m_.group(code, 2))
        if (c != ' ' && c != '\t' && !is_newline(c))
          path.push_back(c);
      if (!owned_elsewhere(path))
        add(r, m_.begin(1), "monkey-patches " + path + " (an attribute of the imported "
                              + std::string{base} + ")");
    }
    for (size_t from = 0; m_.find(h.setattr_call.get(), code, from); from = m_.end()) {
      auto base = m_.group(code, 1);
      if (imported.count(base) > 0 && table_names.count(base) == 0 && base != "os")
        add(r, m_.begin(), "monkey-patches the imported " + std::string{base} + " through setattr");
    }
  }

  static_check_result collect() {
    static_check_result res;
    for (size_t r = 0; r < rule_count; ++r)
      for (auto& f : per_rule_[r])
        res.findings.push_back(std::move(f));
    std::stable_sort(res.findings.begin(), res.findings.end(),
                     [](const static_finding& a, const static_finding& b) {
                       if (a.line != b.line)
                         return a.line < b.line;
                       return rule_index(a.rule) < rule_index(b.rule);
                     });
    return res;
  }

  std::string_view src_;
  lexed_source lexed_;
  line_table lines_;
  std::string kernel_;
  std::vector<uint32_t> kernel_offsets_;
  severity levels_[rule_count] = {};
  kernel_backend backend_ = kernel_backend::cuda;
  std::vector<std::vector<static_finding>> per_rule_;
  matcher m_;
};

} // namespace

// -- public API -----------------------------------------------------------------------------------

const char* to_string(severity x) {
  switch (x) {
    case severity::error: return "error";
    case severity::warning: return "warning";
    case severity::off: return "off";
  }
  return "?";
}

bool static_check_result::rejected() const {
  return std::any_of(findings.begin(), findings.end(),
                     [](const static_finding& f) { return f.level == severity::error; });
}

std::vector<std::string> static_check_result::hack_flags() const {
  std::vector<std::string> out;
  for (const auto& f : findings)
    if (f.level != severity::off && std::find(out.begin(), out.end(), f.rule) == out.end())
      out.push_back(f.rule);
  return out;
}

const std::vector<rule_info>& all_rules() {
  static const std::vector<rule_info> rules = [] {
    std::vector<rule_info> out;
    for (const auto& d : rule_defs)
      out.push_back(rule_info{d.id, d.level, d.description});
    return out;
  }();
  return rules;
}

const rule_info* find_rule(std::string_view id) {
  for (const auto& r : all_rules())
    if (r.id == id)
      return &r;
  return nullptr;
}

caf::expected<void> validate_overrides(const std::map<std::string, severity>& overrides) {
  std::string unknown;
  for (const auto& [id, level] : overrides) {
    if (find_rule(id) != nullptr)
      continue;
    unknown += unknown.empty() ? "\"" : ", \"";
    unknown += id + "\"";
  }
  if (unknown.empty())
    return caf::unit;
  std::string valid;
  for (const auto& r : all_rules())
    valid += (valid.empty() ? "" : ", ") + r.id;
  return make_error(errc::invalid_config,
                    "static check overrides: unknown rule id " + unknown + "; valid ids: " + valid);
}

static_check_result check_candidate(std::string_view source, const static_check_options& opts) {
  table(); // builds the pattern table before the first check (throws only on a kbrl bug)
  return checker{source, opts}.run();
}

} // namespace kbrl::eval
