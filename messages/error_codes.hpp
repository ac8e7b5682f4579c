#pragma once
// Reading a kbrl error back (messages/errors.hpp makes them): its code, whether it has a given
// code, its explanation, and the same error with more said around it. The one place that knows
// how a kbrl error is laid out in a caf::error.

#include "messages/errors.hpp"

#include <caf/error.hpp>

#include <string>

namespace kbrl {

/// The kbrl code of `err`; errc::none for no error or an error of another category (CAF's own).
inline errc code_of(const caf::error& err) {
  return err && err.category() == caf::atom("kbrl") ? static_cast<errc>(err.code()) : errc::none;
}

/// Whether `err` is the kbrl error `code`.
inline bool has_code(const caf::error& err, errc code) {
  return err && code_of(err) == code;
}

/// The explanation of a kbrl error (its context text), or describe() of any other error.
inline std::string error_text(const caf::error& err) {
  const auto& ctx = err.context();
  if (err.category() == caf::atom("kbrl") && ctx.size() == 1 && ctx.match_element<std::string>(0))
    return ctx.get_as<std::string>(0);
  return describe(err);
}

/// `err` with `before` put in front of its text and `after` behind it; a kbrl error keeps its
/// code, any other becomes errc::internal.
inline caf::error reworded(const caf::error& err, const std::string& before,
                           const std::string& after = "") {
  const auto code = err.category() == caf::atom("kbrl") ? static_cast<errc>(err.code())
                                                         : errc::internal;
  return make_error(code, before + error_text(err) + after);
}

} // namespace kbrl
