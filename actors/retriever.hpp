#pragma once
// The retriever actor: serves example kernels for problems (RA-ICL) from a retrieval index to
// any node.
//
// Protocol (interface: kbrl::retriever_actor):
//   on start          open the index and its query embedder; if that fails the actor stays up,
//                     shows the error in its status and answers every request with it
//   retrieve(p, k)    the k nearest examples of p's backend, never p itself (k <= 0: the
//                     configured retrieval.k); errc::invalid_argument for k above 32
//   control reload    opens the index again (after a rebuild); on failure the old one stays
//   status            index, embedder, entries, queries, mean latency, failures
// Blocking (opening the index, embedding through a server or a model): spawn it detached, on
// its own thread; queries are answered one at a time.

#include "actors/actor_stats.hpp"
#include "messages/type_ids.hpp"
#include "runtime/retrieval/retrieval_settings.hpp"
#include "runtime/retrieval/retriever.hpp"

#include <caf/typed_event_based_actor.hpp>

#include <memory>

namespace kbrl {

struct retriever_state {
  static inline const char* name = "retriever";
  actor_stats stats;
  retrieval::retrieval_settings settings;
  retrieval::retriever_options options;
  std::unique_ptr<retrieval::retriever> retriever;
  caf::error open_failure;   ///< why there is no index
  uint64_t queries = 0;      ///< retrieve requests answered with examples
  uint64_t failures = 0;     ///< retrieve requests answered with an error
  double total_seconds = 0;  ///< time spent answering successful requests
};

using retriever_pointer = retriever_actor::stateful_pointer<retriever_state>;

/// Largest k a request may ask for.
constexpr int32_t max_retrieved_examples = 32;

/// Spawn with sys.spawn<caf::detached>(retriever, stats, settings, options); `options` carries
/// the index directory and embedder (retrieval::retriever_options_from(settings), plus embedder
/// settings).
retriever_actor::behavior_type retriever(retriever_pointer self, actor_stats stats,
                                         retrieval::retrieval_settings settings,
                                         retrieval::retriever_options options);

} // namespace kbrl
