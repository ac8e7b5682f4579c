#pragma once
// When and how long to wait before an HTTP request is tried again: exponential back-off with
// jitter, Retry-After, and which failures are worth another attempt. Pure functions, so the
// arithmetic is tested without a server.

#include "runtime/remote/remote_options.hpp"

#include <ctime>
#include <optional>
#include <string_view>

namespace kbrl::remote {

/// True for the HTTP statuses that may succeed when tried again: 429 (rate limited) and every
/// 5xx (the server or a proxy in front of it failed). Other 4xx say the request itself is wrong.
bool retryable_status(long status);

/// Seconds to wait before retry number `retry` (1 for the first): the doubled delay
/// min(max_backoff_s, initial_backoff_s * 2^(retry-1)) times a jitter factor 0.5 + unit / 2.
/// The factor never drops below one half, so a retry always backs off, while many clients that
/// failed together spread out. `unit` is a uniform draw from [0, 1) (tests pass fixed values).
double backoff_delay_s(const retry_options& opts, int retry, double unit);

/// Seconds a Retry-After header value asks for: delta-seconds ("120", "1.5" read leniently) or
/// an HTTP-date ("Wed, 21 Oct 2015 07:28:00 GMT", measured from `now`; a past date gives 0).
/// nullopt when the value is empty or unreadable.
std::optional<double> parse_retry_after(std::string_view value, std::time_t now);

/// The wait before a retry: Retry-After when the server sent one (capped at max_retry_after_s),
/// else backoff_delay_s().
double retry_delay_s(const retry_options& opts, int retry, std::optional<double> retry_after,
                     double unit);

} // namespace kbrl::remote
