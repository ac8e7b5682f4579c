#pragma once
// The episode actor: one trajectory on one problem, single- or multi-turn.
//
//              start(problem, group)
//                      |
//                      v  (first turn, when a retriever is set: [retrieving] examples first;
//                      |   without an answer the prompt goes without them)
//                      v
//   +--------> [sampling] --(sampler answers)--> parse --(no program)----------+
//   |              |  ^                            |                          |
//   |   error:     |  | retry on the next sampler  | program                  |
//   |   retry -----+--+ (up to max_retries)        v                          |
//   |                                         [evaluating] --(error: retry on |
//   |                                              |          the next        |
//   |                                              |          evaluator)      |
//   |                                              v                          v
//   +------- turns left and not yet a success -- score the turn <-------------+
//                                                  |
//                               success or max_turns reached, or out of retries
//                                                  v
//                          [done]: returns computed, trajectory -> coordinator, quit
//
// Each turn's prompt is the conversation of runtime/episode/prompts.hpp rendered with the
// policy's chat format and tokenized here, so the learner gets exactly the token ids sampled
// from. A sampler or evaluator that fails (node lost, queue busy, evaluator restarted) does not
// lose the episode: the step goes to the next one in the list and the turn counts the retry.
// A sampler or evaluator whose node is lost while it holds the request (the episode monitors
// whom it asked: the down message comes at once, the answer never) is not a failure either: it
// is not asked again and the request goes to another one at once, without spending a retry.
// With a worker board (RL runs) the lists are the board's of the moment, so a node that joins
// or comes back is used by the next request; when the board has no sampler or evaluator the
// episode waits for one (checking every second) instead of failing.
// A busy answer (a full queue: errc::busy) is not a failure: the episode waits with an
// exponential back-off (busy_backoff_first doubling up to busy_backoff_max) and asks the next
// one in the list again, for up to busy_wait_limit in all, without spending its retries; in
// asynchronous runs many episodes reach the evaluators' bounded queues at once.
// Requests are labelled "<problem id> trajectory <id> turn <n>": the problem id comes first (a
// sampler replaying recorded completions finds the problem by it, runtime/sampler/replay_backend).

#include "actors/actor_stats.hpp"
#include "messages/type_ids.hpp"
#include "runtime/episode/episode_settings.hpp"
#include "runtime/episode/phases.hpp"
#include "runtime/episode/prompts.hpp"
#include "runtime/episode/rewards.hpp"
#include "runtime/episode/stage_clock.hpp"
#include "runtime/episode/worker_board.hpp"
#include "runtime/tokenizer/chat_format.hpp"
#include "runtime/tokenizer/tokenizer.hpp"

#include <caf/typed_event_based_actor.hpp>

#include <memory>
#include <set>

namespace kbrl {

/// What an episode works with; shared, read-only.
struct episode_resources {
  std::vector<sampler_actor> samplers;
  std::vector<evaluator_supervisor_actor> evaluators;
  /// When set, its lists replace the two above before each request (newer revisions only).
  std::shared_ptr<const worker_board> board;
  coordinator_actor coordinator;
  std::shared_ptr<const tok::tokenizer> tokenizer;
  std::shared_ptr<const tok::chat_format> chat;
  /// RA-ICL: when set, the first prompt shows up to retrieval_k retrieved examples within
  /// retrieval_token_budget tokens (a failed retrieval only leaves them out).
  retriever_actor retriever;
  int32_t retrieval_k = 3;
  int64_t retrieval_token_budget = 3000;
  /// When set, each generation and evaluation request is timed under settings.round (the
  /// coordinator's per-step timeline).
  std::shared_ptr<episode::stage_clock> stages;
};

struct episode_state {
  static inline const char* name = "episode";
  actor_stats stats;
  episode_settings settings;
  std::shared_ptr<const episode_resources> res;
  problem task;
  trajectory traj;
  std::vector<episode::previous_turn> history;
  episode::episode_phase phase = episode::episode_phase::waiting;
  std::vector<sampler_actor> samplers;                ///< resources' lists, or the board's
  std::vector<evaluator_supervisor_actor> evaluators; ///< as last read
  uint64_t board_seen = 0;       ///< revision of res->board last read
  std::set<caf::actor_addr> lost; ///< samplers and evaluators lost while asked: not asked again
  caf::actor_addr asked;         ///< whom the request under way went to (monitored)
  bool in_flight = false;        ///< a request is under way
  std::string waiting;           ///< set while no sampler or evaluator can be asked
  uint64_t attempt = 0;          ///< bumped per request: an answer to an older one is dropped
  size_t next_sampler = 0;
  size_t next_evaluator = 0;
  int32_t retries = 0;           ///< of the current step (spent of max_retries)
  int32_t resent = 0;            ///< of the current step, after its target was lost (free)
  int32_t busy_answers = 0;      ///< of the current step
  std::chrono::milliseconds busy_waited{0}; ///< of the current step
  bool examples_fetched = false; ///< retrieval done (or not wanted) for the first prompt
};

/// The episode's own behaviour: its public interface and the tick it sends itself when a sampler
/// or evaluator answered busy and the back-off has passed. Handles are passed on as
/// episode_actor.
using episode_behavior = episode_actor::extend<caf::reacts_to<tick_atom>>;

using episode_pointer = episode_behavior::stateful_pointer<episode_state>;

/// Spawn with sys.spawn(run_episode, stats, settings, resources, trajectory id); then send
/// (start, problem, group id).
episode_behavior::behavior_type run_episode(episode_pointer self, actor_stats stats,
                                            episode_settings settings,
                                            std::shared_ptr<const episode_resources> resources,
                                            uint64_t trajectory_id);

} // namespace kbrl
