#pragma once
// Helpers for reading TOML documents with errors a person can act on. Private to
// runtime/config/*.cpp: it includes toml++, which the public headers keep out.

#include "runtime/config/config_error.hpp"

#include <toml++/toml.h>

#include <string>

namespace kbrl::config {

/// The 1-based line where a node or key starts in its file.
inline int line_of(const toml::node& n) {
  return static_cast<int>(n.source().begin.line);
}

inline int line_of(const toml::key& k) {
  return static_cast<int>(k.source().begin.line);
}

/// A value as shown after "got" in an error: TOML literals for scalars, words for the rest.
inline std::string got(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string: return toml_quote(n.as_string()->get());
    case toml::node_type::integer: return std::to_string(n.as_integer()->get());
    case toml::node_type::floating_point: return toml_real(n.as_floating_point()->get());
    case toml::node_type::boolean: return n.as_boolean()->get() ? "true" : "false";
    case toml::node_type::array: return "an array";
    case toml::node_type::table: return "a table";
    default: return "a date or time";
  }
}

} // namespace kbrl::config
