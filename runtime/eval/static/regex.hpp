#pragma once
// PCRE2 for the static checks: patterns compiled once (JIT where available), and a matcher
// whose work on a pathological input is bounded (it reports that it gave up).

#include <pcre2.h>

#include <cstdint>
#include <memory>
#include <string_view>

namespace kbrl::eval::static_impl {

using code_ptr = std::unique_ptr<pcre2_code, void (*)(pcre2_code*)>;

/// An empty pattern handle.
code_ptr no_regex();

/// Compiles a pattern (byte mode, multiline, any of \r \n \r\n as line break); a pattern that
/// does not compile is a bug in kbrl and throws std::logic_error.
code_ptr compile_regex(const char* pattern);

/// A reusable match buffer for one check.
class matcher {
public:
  matcher();

  /// Finds the next match of `re` in `text` at or after `from`.
  bool find(const pcre2_code* re, std::string_view text, size_t from);

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

} // namespace kbrl::eval::static_impl
