// The Python lexer (lex_python, declared in static_checks.hpp): comments and string literals,
// the way CPython's tokenizer sees them, with offsets and decoded values. The static checks
// use it, and so does retrieval's token stream (runtime/retrieval/python_lexer.hpp), which adds
// names, numbers and operators around the literals found here.

#include "runtime/eval/static/source_text.hpp"
#include "runtime/eval/static_checks.hpp"

#include <algorithm>

namespace kbrl::eval {

using namespace static_impl;

namespace {

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

} // namespace

lexed_source lex_python(std::string_view source) {
  return py_lexer{source}.run();
}

} // namespace kbrl::eval
