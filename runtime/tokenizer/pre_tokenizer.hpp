#pragma once
// The pre-tokenizer: cuts a normalized text section into the pieces BPE sees, as the
// tokenizer.json's "pre_tokenizer" says. Supported layouts are those of byte-level BPE files:
//   Split{pattern: {Regex|String}, behavior: Isolated|Removed, invert: false}
//   ByteLevel{add_prefix_space, use_regex}   (use_regex: GPT-2's own pattern)
//   Sequence{pretokenizers: [...]}           (each step cuts every piece of the one before)
// ByteLevel's byte-to-character mapping itself is not a step here: BPE works on raw bytes and
// tokenizer.json's byte-level strings are translated once, when the vocabulary is loaded.
//
// Patterns are written for Python/Rust (Oniguruma) and were checked by their authors there; the
// reference encoders kbrl is tested against run them as JavaScript RegExps with the "u" flag.
// js_regex compiles a pattern with PCRE2 so that it matches exactly what that RegExp matches:
// `\s` is JavaScript's white-space set (it includes U+FEFF, PCRE2's does not), `\d`, `\w` and
// `\b` stay ASCII, `.` excludes the four JavaScript line terminators, and a `(?i:...)` group of
// ASCII letters becomes explicit [xX] classes, as transformers.js rewrites it (PCRE2 would let
// 's' match U+017F under (?i)).

#include <caf/expected.hpp>

#include <cstddef>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kbrl::tok {

/// `pattern` (JavaScript/Oniguruma syntax) rewritten as a PCRE2 pattern with JavaScript's
/// meaning, as described above. Fails with errc::not_supported for constructs whose JavaScript
/// meaning it cannot express (`\S` inside a character class, a character class under `(?i:`
/// holding a letter range that is not all lower or all upper case).
caf::expected<std::string> translate_js_regex(std::string_view pattern);

/// A compiled pattern. Copies share the compiled code; matching is thread-safe.
class js_regex {
public:
  /// Compiles `pattern` (see translate_js_regex). `where` names it in errors, e.g.
  /// "tokenizer.json: pre_tokenizer.pretokenizers[0].pattern.Regex".
  static caf::expected<js_regex> compile(std::string_view pattern, const std::string& where);

  /// A pattern matching `literal` exactly.
  static caf::expected<js_regex> literal(std::string_view literal, const std::string& where);

  /// Appends to `spans` the [begin, end) byte ranges of `text` (well-formed UTF-8) cut at every
  /// match: matches and the text between them alternate, none is empty (transformers.js
  /// regexSplit). With `keep_matches` false the matches are left out (behavior "Removed").
  void split(std::string_view text, bool keep_matches,
             std::vector<std::pair<std::size_t, std::size_t>>& spans) const;

private:
  struct code;
  std::shared_ptr<const code> code_;
};

/// The pre-tokenizer of one tokenizer.json.
class pre_tokenizer {
public:
  /// One step of the sequence.
  struct step {
    enum class kind { split, prefix_space } what = kind::split;
    js_regex regex;           ///< the pattern of a split step
    bool keep_matches = true; ///< false for behavior "Removed"
  };

  pre_tokenizer() = default;
  explicit pre_tokenizer(std::vector<step> steps) : steps_(std::move(steps)) {}

  /// GPT-2's pattern, which ByteLevel{use_regex: true} splits with.
  static const char* gpt2_pattern();

  /// Appends the pieces of `text` to `pieces`. Pieces point into `text` or, where a step had
  /// to build a new string (a prefix space), into `storage`, which must outlive them.
  void run(std::string_view text, std::vector<std::string_view>& pieces,
           std::deque<std::string>& storage) const;

  /// True if it has no steps (the whole section is one piece).
  bool empty() const { return steps_.empty(); }

private:
  std::vector<step> steps_;
};

} // namespace kbrl::tok
