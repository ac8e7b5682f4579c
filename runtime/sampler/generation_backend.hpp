#pragma once
// What a sampler actor draws completions with: the built-in libtorch engine on this node's GPU,
// or a client of a remote OpenAI-compatible server. Both take requests from any thread and
// answer each exactly once through its callback, on a thread of their own.

#include "messages/data.hpp"

#include <caf/expected.hpp>

#include <functional>
#include <memory>
#include <string>

namespace kbrl::sampling {

/// A backend's own view of its load, for status reports.
struct backend_stats {
  uint64_t waiting = 0;          ///< accepted, not yet started
  uint64_t active = 0;           ///< being generated now
  uint64_t slots = 0;            ///< how many can be generated at once (batch size)
  uint64_t completion_tokens = 0;///< sampled tokens returned so far
  uint64_t completions = 0;
  uint64_t failures = 0;
  uint64_t policy_version = 0;   ///< the weights requests are sampled from now
  std::string detail;            ///< one line of backend-specific state
};

class generation_backend {
public:
  using done_fn = std::function<void(generation_result)>;

  virtual ~generation_backend() = default;

  /// "builtin" or "remote".
  virtual std::string kind() const = 0;

  /// The model it samples from (a path, a hub id or the server's model name).
  virtual std::string model() const = 0;

  /// Starts drawing `request`; `done` is called once with the result (finish == error and
  /// `error` set when it failed). Thread-safe.
  virtual void submit(generation_request request, done_fn done) = 0;

  /// Switches to new weights: requests submitted afterwards are sampled from them. Fails
  /// without changing anything when the update cannot be applied.
  virtual caf::expected<void> apply_policy(const policy_update& update) = 0;

  virtual backend_stats stats() const = 0;
};

} // namespace kbrl::sampling
