#pragma once
// Adding where-it-happened to an error without losing its code.

#include "messages/errors.hpp"

#include <caf/error.hpp>

#include <string>

namespace kbrl::retrieval {

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

} // namespace kbrl::retrieval
