#pragma once
// The sampler actor: answers generation requests from any node with a generation backend (the
// built-in libtorch engine or a remote OpenAI-compatible server), and takes policy updates.
//
// Protocol (interface: kbrl::sampler_actor):
//   on start            make the backend (load the model / reach the server); if that fails the
//                       actor stays up, shows the error in its status and answers every request
//                       with it
//   generate(req)       held until the backend answers; errc::busy when queue_capacity requests
//                       are held already; a request whose min_policy_version is newer than the
//                       weights in use waits for that policy update before it starts
//   policy(update)      the backend switches weights; later requests are sampled from them
//   status              backend, model, queue, batch occupancy, tokens per second, policy version
// Blocking (model loading, adapter swaps): spawned detached, on its own thread. Backends answer
// on their own threads; answers come back to the actor as internal messages.

#include "actors/actor_stats.hpp"
#include "messages/type_ids.hpp"
#include "runtime/sampler/generation_backend.hpp"
#include "runtime/sampler/sampler_settings.hpp"

#include <caf/typed_event_based_actor.hpp>

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <tuple>

namespace kbrl {

/// A request the backend is working on.
struct held_generation {
  caf::typed_response_promise<generation_result> promise;
  uint64_t request_id = 0;  ///< the requester's id, restored on the answer
  std::chrono::steady_clock::time_point since;
};

struct sampler_state {
  static inline const char* name = "sampler";
  actor_stats stats;
  sampling::sampler_settings settings;
  std::unique_ptr<sampling::generation_backend> backend;
  caf::error backend_failure;     ///< why there is no backend
  std::string backend_error;      ///< the same, rendered
  std::map<uint64_t, held_generation> held;
  /// Held requests that wait for a newer policy (key -> request, id already replaced by key).
  std::map<uint64_t, generation_request> waiting_for_policy;
  uint64_t next_key = 1;
  uint64_t refused_busy = 0;
  /// What identifies the policy update applied last (version, learner step, adapter dir, hash
  /// of the adapter bytes): in an RL run the same update arrives from the learner and from the
  /// coordinator, and applying it twice would reload the adapter for nothing.
  std::optional<std::tuple<uint64_t, uint64_t, std::string, size_t>> applied_policy;
  /// (time, tokens) of recent answers, for tokens per second over the last minute.
  std::deque<std::pair<std::chrono::steady_clock::time_point, size_t>> recent_tokens;

  ~sampler_state();
};

/// The sampler's own behaviour: its public interface and the backend's answers, which come back
/// as (generate, key, result) for the request it holds under that key. Handles are passed on
/// as sampler_actor.
using sampler_behavior =
  sampler_actor::extend<caf::reacts_to<generate_atom, uint64_t, generation_result>>;

using sampler_pointer = sampler_behavior::stateful_pointer<sampler_state>;

/// A generation backend as the settings say (errors name the sampler.* key at fault), wrapped
/// to replay recorded completions when sampler.replay_completions is set.
caf::expected<std::unique_ptr<sampling::generation_backend>>
make_generation_backend(const sampling::sampler_settings& settings);

/// Spawn with sys.spawn<caf::detached>(sampler, stats, settings).
sampler_behavior::behavior_type sampler(sampler_pointer self, actor_stats stats,
                                        sampling::sampler_settings settings);

} // namespace kbrl
