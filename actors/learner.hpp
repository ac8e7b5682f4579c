#pragma once
// The learner actor: trains the policy on trajectory batches from any node and publishes each
// new version to the samplers that subscribed.
//
// Protocol (interface: kbrl::learner_actor):
//   on start            load the model, create the trainer, resume from the newest checkpoint,
//                       write the current policy (train::learner_core::start); if that fails the
//                       actor stays up, shows the error in its status and answers train with it
//   train(batch)        refused when stale or malformed (errc::invalid_argument); otherwise one
//                       optimisation step, the new version written under <run>/learner/policy/
//                       and sent to every subscriber as policy(update), then answered
//   policy              the newest policy_update
//   subscribe(handle)   the handle gets the current policy now and every new one; monitored, and
//                       forgotten when it goes down
//   control checkpoint  writes a checkpoint now; answers its directory
//   status              step, policy version, loss, gradient norm, learning rate, tokens per
//                       second, memory, staleness of the data trained on, checkpoints
// Blocking (model loading, training steps): spawned detached, on its own thread.

#include "actors/actor_stats.hpp"
#include "messages/type_ids.hpp"
#include "runtime/train/learner_settings.hpp"

#include <caf/typed_event_based_actor.hpp>

#include <memory>
#include <vector>

namespace kbrl::train {
class learner_core;
}

namespace kbrl {

struct learner_state {
  // Out of line (learner.cpp), where learner_core is complete: spawning sites need no torch.
  learner_state();
  ~learner_state();

  static inline const char* name = "learner";
  actor_stats stats;
  train::learner_settings settings;
  std::unique_ptr<train::learner_core> core;
  caf::error core_failure;        ///< why there is no core
  std::vector<policy_listener_actor> subscribers;
  metrics_actor metrics;          ///< where each step's training scalars go (none: nowhere)
};

using learner_pointer = learner_actor::stateful_pointer<learner_state>;

/// Spawn with sys.spawn<caf::detached>(learner, stats, settings, metrics sink). After every step
/// it sends the sink, at the batch's coordinator step, learner/loss, learner/policy_loss,
/// learner/kl, learner/clip_fraction, learner/mean_ratio, learner/max_ratio, learner/grad_norm,
/// learner/lr, learner/tokens_per_second, learner/tokens, learner/sequences, learner/seconds,
/// learner/version and the distribution hist/advantage (one value per turn).
learner_actor::behavior_type learner(learner_pointer self, actor_stats stats,
                                     train::learner_settings settings, metrics_actor metrics);

} // namespace kbrl
