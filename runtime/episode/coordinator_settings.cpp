#include "runtime/episode/coordinator_settings.hpp"

namespace kbrl {

const char* to_string(coordinator_mode m) {
  return m == coordinator_mode::async ? "async" : "sync";
}

std::optional<coordinator_mode> parse_coordinator_mode(const std::string& text) {
  if (text == "sync")
    return coordinator_mode::sync;
  if (text == "async")
    return coordinator_mode::async;
  return std::nullopt;
}

} // namespace kbrl
