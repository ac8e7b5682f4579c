#pragma once
// A builder node's build service, "<node>/builds" (kbrl-node --role builder): CPU builders for
// the whole cluster. Evaluator nodes send it the load_inline candidates they would have built
// themselves; it builds each source once, however many nodes and copies ask, and answers with
// the verdict and the built library's files, which the evaluator node installs into its own
// build folder (runtime/eval/build_artifact.hpp) so its GPU worker loads instead of building.
//
// Protocol (interface: kbrl::build_service_actor):
//   build(req)  source built before here      -> compiled, with its files (read from disk)
//               its build failed before       -> that compile / static-check verdict, no files
//               being built                   -> waits for that build
//               new                           -> queued for the next free builder
//   A builder that dies or hangs costs the waiting requests nothing but time: they are answered
//   with its failure (not a compile verdict), and the evaluator node builds them itself.
// The decisions are runtime/eval/build_book.hpp's; this actor only sends.

#include "actors/actor_stats.hpp"
#include "actors/builder.hpp"
#include "messages/type_ids.hpp"
#include "runtime/eval/build_book.hpp"
#include "runtime/eval/eval_engine.hpp"

#include <caf/typed_event_based_actor.hpp>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <vector>

namespace kbrl {

struct pending_build {
  eval_request request;
  caf::typed_response_promise<build_output> promise;
};

struct build_service_state {
  static inline const char* name = "build-service";
  actor_stats stats;
  eval::engine_options engine; ///< template for the builders (gpu -1)
  std::chrono::milliseconds request_margin{30000};
  std::function<builder_actor(caf::local_actor*, const actor_stats&, const eval::engine_options&)>
    spawn_builder;
  std::vector<builder_slot> builders;
  eval::build_book<pending_build> builds;
  uint64_t answered = 0;
  uint64_t bytes_sent = 0;
  /// Each builder's current incarnation, for the clean-up that stops them when the service
  /// ends (weak addresses; see evaluator_supervisor_state::live_workers).
  std::shared_ptr<std::map<std::string, caf::actor_addr>> live_builders =
    std::make_shared<std::map<std::string, caf::actor_addr>>();
};

using build_service_pointer = build_service_actor::stateful_pointer<build_service_state>;

/// Spawn with sys.spawn(build_service, stats, builder engine options, builders (>= 1)).
build_service_actor::behavior_type build_service(build_service_pointer self, actor_stats stats,
                                                 eval::engine_options engine, size_t builders);

} // namespace kbrl
