#pragma once
// The one back-off of kbrl, for everything that asks again after a refusal or a failure: an
// episode turned away by a busy evaluator, a node that cannot reach its coordinator yet, an HTTP
// request to a remote sampler. The wait before retry n (1 for the first) is
//
//   min(cap, first * 2^(n-1)) * spread
//
// where `spread` (>= 0.5 by the callers' choice) keeps clients that failed together from asking
// again together. Pure, so tests pass fixed values (test backoff in test_remote_sampler.cpp and
// test_episode_scoring.cpp).

#include <algorithm>
#include <chrono>
#include <cmath>

namespace kbrl::io {

inline double backoff_s(double first_s, double cap_s, int retry, double spread = 1.0) {
  // 2^(retry-1) overflows nothing: the exponent is clamped long before double runs out.
  const int exponent = std::clamp(retry - 1, 0, 60);
  return std::min(cap_s, first_s * std::ldexp(1.0, exponent)) * spread;
}

inline std::chrono::milliseconds backoff(std::chrono::milliseconds first,
                                         std::chrono::milliseconds cap, int retry,
                                         double spread = 1.0) {
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(
    1000 * backoff_s(first.count() / 1000.0, cap.count() / 1000.0, retry, spread))));
}

} // namespace kbrl::io
