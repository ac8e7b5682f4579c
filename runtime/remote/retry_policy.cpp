#include "runtime/remote/retry_policy.hpp"

#include "runtime/io/backoff.hpp"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>

namespace kbrl::remote {

bool retryable_status(long status) {
  return status == 429 || (status >= 500 && status <= 599);
}

double backoff_delay_s(const retry_options& opts, int retry, double unit) {
  return io::backoff_s(opts.initial_backoff_s, opts.max_backoff_s, retry,
                       0.5 + std::clamp(unit, 0.0, 1.0) / 2);
}

std::optional<double> parse_retry_after(std::string_view value, std::time_t now) {
  while (!value.empty() && std::isspace(static_cast<unsigned char>(value.front())))
    value.remove_prefix(1);
  while (!value.empty() && std::isspace(static_cast<unsigned char>(value.back())))
    value.remove_suffix(1);
  if (value.empty())
    return std::nullopt;
  if (std::isdigit(static_cast<unsigned char>(value.front()))) {
    const std::string text{value};
    char* end = nullptr;
    const double seconds = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size() || !std::isfinite(seconds) || seconds < 0)
      return std::nullopt;
    return seconds;
  }
  // curl_getdate reads the date formats HTTP allows (RFC 1123, RFC 850, asctime).
  const std::string text{value};
  const std::time_t when = curl_getdate(text.c_str(), nullptr);
  if (when == -1)
    return std::nullopt;
  return std::max(0.0, std::difftime(when, now));
}

double retry_delay_s(const retry_options& opts, int retry, std::optional<double> retry_after,
                     double unit) {
  if (retry_after)
    return std::min(*retry_after, opts.max_retry_after_s);
  return backoff_delay_s(opts, retry, unit);
}

} // namespace kbrl::remote
