#pragma once
// What the coordinator shows a person: its status details, the `timeline [N]` view and the
// debug progress line of a committed step, from the pipeline's state (no actor needed).

#include "messages/data.hpp"
#include "runtime/episode/step_pipeline.hpp"
#include "runtime/episode/step_timeline.hpp"
#include "runtime/episode/trajectory_view.hpp"
#include "runtime/tokenizer/tokenizer.hpp"

#include <caf/expected.hpp>

#include <deque>
#include <string>
#include <vector>

namespace kbrl::episode {

/// failed when the run stopped (rl.max_failed_steps), starting before the learner answered,
/// else ok.
actor_health health_of(coordinator_phase phase);

/// step, mode, episodes under way, policy version, last reward and correct rate, dropped
/// groups and trajectories, the last timeline, what steps wait for.
std::vector<status_detail> coordinator_status_details(const step_pipeline& pipeline,
                                                      const std::deque<step_timeline>& recent);

/// The last N timelines as a table (all kept when `args` is empty); errc::invalid_argument
/// when N is not a number.
caf::expected<std::string> timeline_view(coordinator_mode mode,
                                         const std::deque<step_timeline>& recent,
                                         const std::vector<std::string>& args);

/// `trajectory PROBLEM`: the newest trajectory of the problem, prompts decoded with
/// `tokenizer` (may be null); errc::invalid_argument with the usage when args is not one word.
caf::expected<std::string> trajectory_view(const latest_trajectories& latest,
                                           const std::vector<std::string>& args,
                                           const tok::tokenizer* tokenizer, answer_format format);

/// Why begin() did not go on as coordinator.json says (for kinds other than as_recorded).
std::string start_note(const start_outcome& start, const step_pipeline& pipeline);

/// "sync mode, starting after step 3 with policy v3".
std::string start_line(const step_pipeline& pipeline);

/// "step 3/10: reward 0.412 (std 0.100), correct 40%, ..., 2.1 s per step, about 15 s left"
/// for committed step `r`; `elapsed_s` since the coordinator started.
std::string progress_line(const step_round& r, const step_pipeline& pipeline, double elapsed_s);

} // namespace kbrl::episode
