#pragma once
// Wall-clock time as it travels in messages: milliseconds since the Unix epoch.

#include <chrono>
#include <cstdint>
#include <string>

namespace kbrl {

/// Milliseconds since the Unix epoch, from the system clock.
inline int64_t now_unix_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

/// Local time of day for logs and the shell, "14:03:27".
std::string format_time_of_day(int64_t unix_ms);

/// A duration for a person: "850 ms", "4.2 s", "3 min 12 s", "2 h 5 min".
std::string format_duration_ms(int64_t ms);

/// The same in whole seconds, for waits and run lengths: "12 s", "3 min 12 s", "2 h 5 min"
/// (rounded to the second).
std::string human_duration(double seconds);

} // namespace kbrl
