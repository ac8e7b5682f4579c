#pragma once
// A trajectory for a person (kbrl-shell's `trajectory COORDINATOR PROBLEM`): per turn, an
// excerpt of the prompt, the completion, the kernel parsed out of it (or why none was), the
// verdict and the reward.

#include "messages/data.hpp"
#include "runtime/episode/answer_format.hpp"

#include <caf/expected.hpp>

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace kbrl::episode {

struct trajectory_view_options {
  size_t prompt_excerpt_chars = 400;   ///< of the prompt's start and as much of its end
  size_t completion_chars = 4000;      ///< longer completions are cut in the middle
  size_t kernel_chars = 4000;
  answer_format format;
};

/// `decode` turns prompt token ids back into text (the run's tokenizer); `step` is the step
/// the trajectory was trained in (0: unknown).
std::string render_trajectory(const trajectory& t, uint64_t step,
                              const std::function<std::string(const std::vector<int32_t>&)>& decode,
                              const trajectory_view_options& options = {});

/// `text` cut to at most `head` + `tail` characters, with "[... N characters ...]" between.
std::string excerpt(const std::string& text, size_t head, size_t tail);

/// The newest trajectory of each problem, with the step it belongs to: what the coordinator's
/// `trajectory PROBLEM` view shows. Token ids of completions and log-probabilities are not kept.
class latest_trajectories {
public:
  void record(const trajectory& t, uint64_t step);

  /// The view of problem `want` (an id such as level1/19_ReLU, or its name 19_ReLU); an
  /// errc::invalid_argument naming up to ten problems seen when there is none.
  caf::expected<std::string> render(
    const std::string& want, const std::function<std::string(const std::vector<int32_t>&)>& decode,
    const trajectory_view_options& options) const;

private:
  std::map<std::string, std::pair<uint64_t, trajectory>> by_problem_;
};

} // namespace kbrl::episode
