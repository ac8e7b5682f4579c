#pragma once
// Wall time elapsed, for logs, progress lines and measurements.

#include <chrono>

namespace kbrl {

/// Seconds from `start` to now on the steady clock.
inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

} // namespace kbrl
