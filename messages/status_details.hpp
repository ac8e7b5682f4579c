#pragma once
// Reading an actor_status's details back by key (the shell, the RL run, tests).

#include "messages/data.hpp"

#include <string>
#include <vector>

namespace kbrl {

/// The value of detail `key`, or `fallback` when there is none.
inline std::string detail_of(const std::vector<status_detail>& details, const std::string& key,
                             const std::string& fallback = "") {
  for (auto& d : details)
    if (d.key == key)
      return d.value;
  return fallback;
}

inline std::string detail_of(const actor_status& status, const std::string& key,
                             const std::string& fallback = "") {
  return detail_of(status.details, key, fallback);
}

} // namespace kbrl
