#pragma once
// The phases an episode and the coordinator show in their status (and the coordinator's log),
// as enums: the actors switch on them, and to_string() gives the words the status shows.
//
//   episode:      waiting -> [retrieving] -> sampling <-> evaluating -> done
//   coordinator:  starting -> episodes -> training -> publishing -> episodes ... -> finished
//                 (evaluating: a held-out round; paused, idle between; failed: stopped by
//                 rl.max_failed_steps)

#include <cstdint>

namespace kbrl::episode {

enum class episode_phase : uint8_t { waiting, retrieving, sampling, evaluating, done };

enum class coordinator_phase : uint8_t {
  starting,
  episodes,
  training,
  publishing,
  evaluating,
  paused,
  idle,
  finished,
  failed,
};

inline const char* to_string(episode_phase p) {
  switch (p) {
    case episode_phase::waiting:
      return "waiting";
    case episode_phase::retrieving:
      return "retrieving";
    case episode_phase::sampling:
      return "sampling";
    case episode_phase::evaluating:
      return "evaluating";
    case episode_phase::done:
      return "done";
  }
  return "unknown";
}

inline const char* to_string(coordinator_phase p) {
  switch (p) {
    case coordinator_phase::starting:
      return "starting";
    case coordinator_phase::episodes:
      return "episodes";
    case coordinator_phase::training:
      return "training";
    case coordinator_phase::publishing:
      return "publishing";
    case coordinator_phase::evaluating:
      return "evaluating";
    case coordinator_phase::paused:
      return "paused";
    case coordinator_phase::idle:
      return "idle";
    case coordinator_phase::finished:
      return "finished";
    case coordinator_phase::failed:
      return "failed";
  }
  return "unknown";
}

} // namespace kbrl::episode
