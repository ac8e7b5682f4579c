#include "runtime/io/clock.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>

namespace kbrl {

std::string format_time_of_day(int64_t unix_ms) {
  std::time_t secs = static_cast<std::time_t>(unix_ms / 1000);
  std::tm local{};
  localtime_r(&secs, &local);
  char buf[16];
  std::strftime(buf, sizeof buf, "%H:%M:%S", &local);
  return buf;
}

std::string format_duration_ms(int64_t ms) {
  char buf[48];
  if (ms < 0)
    ms = 0;
  if (ms < 1000)
    std::snprintf(buf, sizeof buf, "%lld ms", static_cast<long long>(ms));
  else if (ms < 60'000)
    std::snprintf(buf, sizeof buf, "%.1f s", ms / 1000.0);
  else if (ms < 3'600'000)
    std::snprintf(buf, sizeof buf, "%lld min %lld s", static_cast<long long>(ms / 60'000),
                  static_cast<long long>(ms % 60'000 / 1000));
  else
    std::snprintf(buf, sizeof buf, "%lld h %lld min", static_cast<long long>(ms / 3'600'000),
                  static_cast<long long>(ms % 3'600'000 / 60'000));
  return buf;
}

std::string human_duration(double seconds) {
  auto s = static_cast<int64_t>(std::llround(std::max(0.0, seconds)));
  if (s < 60)
    return fmt::format("{} s", s);
  if (s < 3600)
    return fmt::format("{} min {} s", s / 60, s % 60);
  return fmt::format("{} h {} min", s / 3600, (s % 3600) / 60);
}

} // namespace kbrl
