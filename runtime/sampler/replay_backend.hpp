#pragma once
// Recorded completions in place of generated text (sampler.replay_completions): for measuring
// the RL step's timeline with random weights, which write no kernels. The wrapped backend still
// generates every request as usual (same time, same token count, same log-probabilities for the
// learner); only the answer's completion_text is replaced by a recorded completion of the
// request's problem, which the evaluators then really evaluate.
//
// The file is JSON lines, one completion each: {"problem": "level1/19_ReLU", "completion":
// "<KERNEL>...</KERNEL>"}. A problem may have several lines: its requests take them in turn
// (cycling), so a group sees different candidates. "problem" is a problem id (a trailing ".py"
// is ignored, so the evaluator benchmark's manifest names work) and also matches by its name
// alone ("19_ReLU"). The request's problem is the first word of its trace label, as episodes
// write it ("level1/19_ReLU trajectory 12 turn 1"). A request of a problem without recorded
// completions keeps its generated text (counted in the backend's detail).
//
// Note: the completion's token ids are the generated ones, not the recorded text's; what the
// learner trains on does not match the text. This is for timing runs, not for learning.

#include "runtime/sampler/generation_backend.hpp"

#include <map>
#include <string>
#include <vector>

namespace kbrl::sampling {

struct recorded_completions {
  std::map<std::string, std::vector<std::string>> by_problem; ///< normalised id -> completions
  size_t lines = 0;
};

/// Reads the file. Fails (errc::invalid_config) naming the file and line when a line is not an
/// object with string fields "problem" and "completion", or when the file holds none.
caf::expected<recorded_completions> load_recorded_completions(const std::string& path);

/// "level1/19_ReLU.py" -> "level1/19_ReLU".
std::string normalise_problem_key(std::string key);

/// The problem id at the start of a request's trace label ("" when there is none).
std::string problem_of_trace(const std::string& trace);

/// Wraps `inner` so each answer's text is replaced as described above.
std::unique_ptr<generation_backend> make_replay_backend(std::unique_ptr<generation_backend> inner,
                                                        recorded_completions completions,
                                                        std::string source_path);

} // namespace kbrl::sampling
