#pragma once
// The actor that drives a kbrl-eval run: draws completions (a bounded number in flight), takes
// the programs out of them, sends them to the evaluator supervisor and files every verdict with
// the run's ledger (which writes each problem's file when its last record is in).
//
// A multi-turn item (work_item::turns > 1) is one episode, run turn after turn:
//
//   [logged turns] --replayed into the history, their records filed--+
//                                                                    v
//   +----> turn t: completion on disk (a continued run) or drawn from prompt_maker::make_turn()
//   |        |  parse_answer (the episode's answer format)
//   |        |  no program: a format turn         program: evaluated
//   |        v
//   |      record filed, turn logged (turn_log.hpp), history += (answer, verdict)
//   +----- t + 1 < turns
//
// Every turn runs, whatever the verdicts (the metrics take the best turn so far: eval_metrics.hpp);
// unlike a training episode, a correct and fast turn does not end it. A turn that fails through
// kbrl (the sampler, or the evaluator's infrastructure) ends the episode: its remaining turns are
// filed with the same error, none of them is logged, and the problem runs again next time.
//
// Why not the RL loop's episode actor (actors/episode) with max_turns = T: it ends an episode at
// the first success, talks to a coordinator, cannot start from a history read back from disk
// (resume), needs a tokenizer and renders for the built-in sampler only, and retries across
// sampler lists kbrl-eval does not have. What must be the same - the prompts and the feedback -
// is the same code: runtime/episode/prompts.hpp and parse_answer.

#include "messages/interfaces.hpp"
#include "runtime/evalcli/run_context.hpp"

#include <caf/actor.hpp>
#include <caf/event_based_actor.hpp>

#include <memory>
#include <string>

namespace kbrl::evalcli {

/// The scheduler sends its notify actor done_atom (messages/interfaces.hpp) when every expected
/// record is filed, or ctx->failure says why the run stopped.
using kbrl::done_atom;

/// The scheduler's behaviour: spawn with sys.spawn(eval_scheduler, ctx, evaluators, sampler,
/// notify); it sends `done` to `notify` and quits when finished. `sampler` may be null when
/// nothing is to be drawn. With evaluators->cluster, evaluations go to those nodes: at most as
/// many at once per node as it has evaluators, re-sent elsewhere when a node is lost (the
/// record's `retries`); when none is left, ctx->failure says so and the run stops.
caf::behavior eval_scheduler(caf::event_based_actor* self, std::shared_ptr<run_context> ctx,
                             std::shared_ptr<lazy_evaluators> evaluators, sampler_actor sampler,
                             caf::actor notify);

/// "correct, 1.52x", "incorrect (mismatch)", "format": a verdict in a few words.
std::string verdict_line(const report::sample_record& r);

} // namespace kbrl::evalcli
