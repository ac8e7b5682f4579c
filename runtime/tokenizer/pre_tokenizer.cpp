#include "runtime/tokenizer/pre_tokenizer.hpp"

#include "messages/errors.hpp"
#include "runtime/tokenizer/unicode.hpp"

#include <pcre2.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <stdexcept>

namespace kbrl::tok {

namespace {

/// JavaScript's white space, as the body of a character class (see is_js_whitespace).
const char* const js_space_class =
  "\\t\\n\\x{0B}\\f\\r \\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}"
  "\\x{205F}\\x{3000}\\x{FEFF}";

bool is_ascii_letter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

char swap_case(char c) {
  return std::islower(static_cast<unsigned char>(c))
           ? static_cast<char>(std::toupper(static_cast<unsigned char>(c)))
           : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
}

bool is_hex(char c) {
  return std::isxdigit(static_cast<unsigned char>(c)) != 0;
}

caf::error unsupported(std::string_view pattern, std::size_t at, const std::string& what) {
  return make_error(errc::not_supported, "regular expression \"" + std::string{pattern}
                                           + "\": " + what + " (at offset "
                                           + std::to_string(at) + ")");
}

/// Per-thread PCRE2 match state: a JIT stack large enough for long runs of white space, the
/// match context that hands it to the JIT, and match data with room for the captures.
struct match_state {
  pcre2_jit_stack* stack = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_match_data* data = nullptr;

  match_state() {
    stack = pcre2_jit_stack_create(64 * 1024, 16 * 1024 * 1024, nullptr);
    context = pcre2_match_context_create(nullptr);
    if (stack != nullptr && context != nullptr)
      pcre2_jit_stack_assign(context, nullptr, stack);
    data = pcre2_match_data_create(64, nullptr);
    if (context == nullptr || data == nullptr)
      throw std::bad_alloc{};
  }
  ~match_state() {
    pcre2_match_data_free(data);
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
  }
  match_state(const match_state&) = delete;
  match_state& operator=(const match_state&) = delete;
};

match_state& thread_match_state() {
  thread_local match_state state;
  return state;
}

} // namespace

caf::expected<std::string> translate_js_regex(std::string_view p) {
  std::string out;
  out.reserve(p.size() * 2);
  bool in_class = false;
  // One entry per open group: whether letters in it match either case.
  std::vector<bool> caseless{false};
  auto ci = [&] { return caseless.back(); };
  std::size_t i = 0;
  while (i < p.size()) {
    const char c = p[i];
    if (c == '\\') {
      if (i + 1 >= p.size())
        return unsupported(p, i, "a lone backslash at the end");
      const char e = p[i + 1];
      if (e == 's') {
        out += in_class ? std::string{js_space_class} : "[" + std::string{js_space_class} + "]";
        i += 2;
      } else if (e == 'S') {
        if (in_class)
          return unsupported(p, i, "\\S inside a character class");
        out += "[^" + std::string{js_space_class} + "]";
        i += 2;
      } else if ((e == 'p' || e == 'P') && i + 2 < p.size() && p[i + 2] == '{') {
        const std::size_t close = p.find('}', i + 3);
        if (close == std::string_view::npos)
          return unsupported(p, i, "an unterminated \\p{...}");
        out.append(p.substr(i, close + 1 - i));
        i = close + 1;
      } else if (e == 'u' && i + 2 < p.size() && p[i + 2] == '{') {
        const std::size_t close = p.find('}', i + 3);
        if (close == std::string_view::npos)
          return unsupported(p, i, "an unterminated \\u{...}");
        out += "\\x{" + std::string{p.substr(i + 3, close - i - 3)} + "}";
        i = close + 1;
      } else if (e == 'u') {
        if (i + 6 > p.size() || !is_hex(p[i + 2]) || !is_hex(p[i + 3]) || !is_hex(p[i + 4])
            || !is_hex(p[i + 5]))
          return unsupported(p, i, "\\u must be followed by four hex digits");
        out += "\\x{" + std::string{p.substr(i + 2, 4)} + "}";
        i += 6;
      } else if (is_ascii_letter(e) || std::isdigit(static_cast<unsigned char>(e))) {
        // \d \w \b \n \t \x.. and friends mean the same in PCRE2 without UCP.
        out += '\\';
        out += e;
        i += 2;
      } else {
        // An escaped punctuation character (or a multi-byte character): a literal either way.
        out += '\\';
        ++i;
        std::size_t end = i;
        next_code_point(p, end);
        out.append(p.substr(i, end - i));
        i = end;
      }
      continue;
    }
    if (in_class) {
      if (c == ']') {
        in_class = false;
        out += c;
        ++i;
      } else if (ci() && is_ascii_letter(c)) {
        if (i + 2 < p.size() && p[i + 1] == '-' && is_ascii_letter(p[i + 2])) {
          const char hi = p[i + 2];
          if (std::islower(static_cast<unsigned char>(c))
              != std::islower(static_cast<unsigned char>(hi)))
            return unsupported(p, i, "a letter range mixing cases under (?i:");
          out += c;
          out += '-';
          out += hi;
          out += swap_case(c);
          out += '-';
          out += swap_case(hi);
          i += 3;
        } else {
          out += c;
          out += swap_case(c);
          ++i;
        }
      } else {
        out += c;
        ++i;
      }
      continue;
    }
    if (c == '[') {
      in_class = true;
      out += c;
      ++i;
      if (i < p.size() && p[i] == '^') {
        out += '^';
        ++i;
      }
    } else if (c == '(') {
      if (p.substr(i, 4) == "(?i:") {
        caseless.push_back(true);
        out += "(?:";
        i += 4;
      } else {
        caseless.push_back(ci());
        out += c;
        ++i;
      }
    } else if (c == ')') {
      if (caseless.size() > 1)
        caseless.pop_back();
      out += c;
      ++i;
    } else if (c == '.') {
      out += "[^\\n\\r\\x{2028}\\x{2029}]";
      ++i;
    } else if (ci() && is_ascii_letter(c)) {
      out += '[';
      out += c;
      out += swap_case(c);
      out += ']';
      ++i;
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

struct js_regex::code {
  pcre2_code* compiled = nullptr;
  bool jit = false;
  ~code() { pcre2_code_free(compiled); }
};

caf::expected<js_regex> js_regex::compile(std::string_view pattern, const std::string& where) {
  auto translated = translate_js_regex(pattern);
  if (!translated)
    return make_error(errc::not_supported, where + ": " + describe(translated.error()));
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* compiled = pcre2_compile(
    reinterpret_cast<PCRE2_SPTR>(translated->data()), translated->size(),
    PCRE2_UTF | PCRE2_DOLLAR_ENDONLY, &error_code, &error_offset, nullptr);
  if (compiled == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof message);
    return make_error(errc::invalid_config,
                      where + ": the regular expression \"" + std::string{pattern}
                        + "\" does not compile: " + reinterpret_cast<const char*>(message)
                        + " (at offset " + std::to_string(error_offset)
                        + " of its PCRE2 form \"" + *translated + "\")");
  }
  auto owner = std::make_shared<code>();
  owner->compiled = compiled;
  uint32_t captures = 0;
  pcre2_pattern_info(compiled, PCRE2_INFO_CAPTURECOUNT, &captures);
  if (captures >= 63)
    return make_error(errc::not_supported,
                      where + ": the regular expression has more than 62 capture groups");
  // Without JIT (a platform that lacks it) the interpreter gives the same answers, slower.
  owner->jit = pcre2_jit_compile(compiled, PCRE2_JIT_COMPLETE) == 0;
  js_regex r;
  r.code_ = std::move(owner);
  return r;
}

caf::expected<js_regex> js_regex::literal(std::string_view literal, const std::string& where) {
  if (literal.empty())
    return make_error(errc::invalid_config, where + ": the split string must not be empty");
  std::string quoted;
  for (char c : literal) {
    if (std::isalnum(static_cast<unsigned char>(c)) || static_cast<unsigned char>(c) >= 0x80) {
      quoted += c;
    } else {
      // \x{..} quotes any ASCII character, space and punctuation included.
      static const char* hex = "0123456789ABCDEF";
      quoted += "\\x{";
      quoted += hex[(c >> 4) & 0xF];
      quoted += hex[c & 0xF];
      quoted += '}';
    }
  }
  return compile(quoted, where);
}

void js_regex::split(std::string_view text, bool keep_matches,
                     std::vector<std::pair<std::size_t, std::size_t>>& spans) const {
  match_state& state = thread_match_state();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const std::size_t n = text.size();
  std::size_t prev = 0;  // end of the last match
  std::size_t start = 0; // where the next search begins
  while (start <= n) {
    // PCRE2's default limit (10^7 steps) stops a match over a run of white space longer than a
    // few million characters. Tokenizer patterns match in linear time, so the limit grows with
    // the text left; a pathological pattern still cannot run unbounded.
    const std::size_t left = n - start;
    pcre2_set_match_limit(state.context,
                          static_cast<uint32_t>(std::min<std::size_t>(
                            UINT32_MAX, 10'000'000 + 64 * left)));
    int rc;
    if (code_->jit)
      rc = pcre2_jit_match(code_->compiled, subject, n, start, 0, state.data, state.context);
    else
      rc = pcre2_match(code_->compiled, subject, n, start, PCRE2_NO_UTF_CHECK, state.data,
                       state.context);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT || rc == PCRE2_ERROR_MATCHLIMIT
        || rc == PCRE2_ERROR_HEAPLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT) {
      // The JIT ran out of stack: the interpreter keeps its backtracking state on the heap.
      rc = pcre2_match(code_->compiled, subject, n, start, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT,
                       state.data, state.context);
    }
    // No further match; or, for a pattern that needs more than the limits above, the rest
    // of the text stays one piece (it still decodes to itself).
    if (rc < 0)
      break;
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.data);
    const std::size_t begin = ovector[0];
    const std::size_t end = ovector[1];
    if (prev < begin)
      spans.emplace_back(prev, begin);
    if (end > begin && keep_matches)
      spans.emplace_back(begin, end);
    prev = end;
    if (end > begin) {
      start = end;
    } else {
      // An empty match: like RegExp.prototype[Symbol.matchAll] with "u", step one character.
      if (end >= n)
        break;
      std::size_t next = end;
      next_code_point(text, next);
      start = next;
    }
  }
  if (prev < n)
    spans.emplace_back(prev, n);
}

const char* pre_tokenizer::gpt2_pattern() {
  // transformers.js's ByteLevelPreTokenizer pattern (GPT-2's, without its "(?i)").
  return "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
}

void pre_tokenizer::run(std::string_view text, std::vector<std::string_view>& pieces,
                        std::deque<std::string>& storage) const {
  if (steps_.empty()) {
    if (!text.empty())
      pieces.push_back(text);
    return;
  }
  std::vector<std::string_view> current{text};
  std::vector<std::string_view> next;
  std::vector<std::pair<std::size_t, std::size_t>> spans;
  for (const step& s : steps_) {
    next.clear();
    for (std::string_view piece : current) {
      if (s.what == step::kind::prefix_space) {
        if (!piece.empty() && piece.front() == ' ') {
          next.push_back(piece);
        } else {
          storage.push_back(" " + std::string{piece});
          next.push_back(storage.back());
        }
        continue;
      }
      spans.clear();
      s.regex.split(piece, s.keep_matches, spans);
      for (auto [b, e] : spans)
        next.push_back(piece.substr(b, e - b));
    }
    current.swap(next);
  }
  for (std::string_view piece : current)
    if (!piece.empty())
      pieces.push_back(piece);
}

} // namespace kbrl::tok
