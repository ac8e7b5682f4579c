#include "runtime/eval/static/regex.hpp"

#include <stdexcept>
#include <string>

namespace kbrl::eval::static_impl {

namespace {

void free_code(pcre2_code* c) {
  pcre2_code_free(c);
}

/// Bounds the work of a pathological input; a match that hits the limit is reported as failed.
pcre2_match_context* match_context() {
  static const std::unique_ptr<pcre2_match_context, void (*)(pcre2_match_context*)> ctx = [] {
    std::unique_ptr<pcre2_match_context, void (*)(pcre2_match_context*)> c{
      pcre2_match_context_create(nullptr), pcre2_match_context_free};
    pcre2_set_match_limit(c.get(), 1'000'000);
    pcre2_set_depth_limit(c.get(), 10'000);
    return c;
  }();
  return ctx.get();
}

} // namespace

code_ptr no_regex() {
  return code_ptr{nullptr, free_code};
}

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

matcher::matcher() : md_(pcre2_match_data_create(20, nullptr), pcre2_match_data_free) {
  // nop
}

bool matcher::find(const pcre2_code* re, std::string_view text, size_t from) {
  if (from > text.size())
    return false;
  int rc = pcre2_match(re, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), from, 0,
                       md_.get(), match_context());
  failed_ = rc < 0 && rc != PCRE2_ERROR_NOMATCH; // match or JIT stack limit: undecided
  if (rc <= 0)
    return false;
  ov_ = pcre2_get_ovector_pointer(md_.get());
  count_ = static_cast<uint32_t>(rc);
  return true;
}

} // namespace kbrl::eval::static_impl
