#pragma once
// Small text helpers shared by messages for people (logs, errors, the shell).

#include <string>
#include <string_view>
#include <vector>

namespace kbrl {

/// The items with `separator` between them: join({"a", "b"}, ", ") == "a, b".
inline std::string join(const std::vector<std::string>& items, std::string_view separator = ", ") {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty())
      out += separator;
    out += item;
  }
  return out;
}

} // namespace kbrl
