#pragma once
// Which learners and samplers of the cluster an RL run (actors/rl_run.hpp) may use: each one
// found in the membership is asked once whether it can work (it answers only after its model
// loaded). Without actors; tests drive it directly (test rl_run_logic).
//
//   unchecked --ask--> checking --answer: fine--> ready
//       ^                 |     --answer: failed--> failed
//       '-- no answer ----'     (a new handle under the same name: unchecked again)

#include "messages/data.hpp"

#include <caf/actor.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kbrl {

enum class worker_check : uint8_t { unchecked, checking, ready, failed };
const char* to_string(worker_check c);

/// The RL run's own phase: waiting for workers, running the coordinator, finishing (final
/// checkpoint, then the node stops).
enum class run_phase : uint8_t { waiting, running, finishing };
const char* to_string(run_phase p);

class worker_checks {
public:
  struct worker {
    std::string role;
    caf::actor handle;
    worker_check state = worker_check::unchecked;
    std::string error; ///< why it failed, or "loading its model" while it does not answer
  };

  /// Records `name` of `role` seen in the membership with `handle`; a new name or a new handle
  /// (the node came back) starts unchecked. True when it should be asked now (it is marked
  /// checking).
  bool seen(const std::string& name, const std::string& role, const caf::actor& handle);
  /// Its status answered: failed when its health is failed (then `last_error` says why).
  /// The worker, or nullptr when it is not known (any more).
  const worker* answered(const std::string& name, actor_health health,
                         const std::string& last_error);
  /// It did not answer in time: most likely still loading its model; asked again next time.
  void no_answer(const std::string& name);

  bool ready(const std::string& name) const;
  /// `what` ("a sampler") with the notes of the workers of `role` that are not ready:
  /// "a sampler (n/sampler.0 is loading its model; n/sampler.1 failed: no CUDA)".
  std::string missing(const std::string& role, const std::string& what) const;

private:
  std::map<std::string, worker> workers_;
};

} // namespace kbrl
