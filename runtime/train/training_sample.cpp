#include "runtime/train/training_sample.hpp"

#include "messages/errors.hpp"
#include "runtime/io/text.hpp"

#include <cmath>
#include <string>

namespace kbrl::train {

caf::expected<std::vector<training_sample>>
training_samples_from(const std::vector<trajectory>& trajectories, bool need_logprobs) {
  std::vector<training_sample> out;
  std::vector<std::string> problems;
  for (const auto& t : trajectories)
    for (const auto& u : t.turns) {
      if (u.completion_tokens.empty())
        continue;
      const std::string where = "trajectory " + std::to_string(t.id) + " turn "
                                + std::to_string(u.index);
      if (u.prompt_tokens.empty())
        problems.push_back(where + ": no prompt tokens (the learner needs the tokens the sampler "
                                   "saw; was the prompt sent as text only?)");
      if (need_logprobs && u.logprobs.size() != u.completion_tokens.size())
        problems.push_back(where + ": " + std::to_string(u.logprobs.size())
                           + " sampler logprobs for " + std::to_string(u.completion_tokens.size())
                           + " completion tokens");
      training_sample s;
      s.prompt_tokens = u.prompt_tokens;
      s.completion_tokens = u.completion_tokens;
      s.sampler_logprobs = u.logprobs;
      s.advantage = u.advantage;
      s.policy_version = u.policy_version;
      out.push_back(std::move(s));
    }
  if (!problems.empty())
    return make_error(errc::invalid_argument, join(problems, "\n"));
  return out;
}

caf::expected<void> check_training_samples(const std::vector<training_sample>& samples,
                                           int64_t vocab_size, bool need_logprobs) {
  std::vector<std::size_t> all(samples.size());
  for (std::size_t k = 0; k < all.size(); ++k)
    all[k] = k;
  return check_training_samples(samples, all, vocab_size, need_logprobs);
}

caf::expected<void> check_training_samples(const std::vector<training_sample>& samples,
                                           const std::vector<std::size_t>& which,
                                           int64_t vocab_size, bool need_logprobs) {
  std::vector<std::string> problems;
  auto check_tokens = [&](const std::vector<int32_t>& tokens, const std::string& where) {
    for (std::size_t i = 0; i < tokens.size(); ++i)
      if (tokens[i] < 0 || tokens[i] >= vocab_size) {
        problems.push_back(where + "[" + std::to_string(i) + "] = " + std::to_string(tokens[i])
                           + " is outside the vocabulary [0, " + std::to_string(vocab_size) + ")");
        return;
      }
  };
  for (std::size_t j = 0; j < which.size() && problems.size() < 20; ++j) {
    const std::size_t k = which[j];
    if (k >= samples.size()) {
      problems.push_back("sample " + std::to_string(k) + ": no such sample (the step has "
                         + std::to_string(samples.size()) + ")");
      continue;
    }
    const auto& s = samples[k];
    const std::string name = "sample " + std::to_string(k);
    if (s.prompt_tokens.empty())
      problems.push_back(name + ": empty prompt (the first completion token needs context)");
    check_tokens(s.prompt_tokens, name + ": prompt token");
    check_tokens(s.completion_tokens, name + ": completion token");
    if (!std::isfinite(s.advantage))
      problems.push_back(name + ": advantage is not finite");
    if (!need_logprobs)
      continue;
    if (s.sampler_logprobs.size() != s.completion_tokens.size()) {
      problems.push_back(name + ": " + std::to_string(s.sampler_logprobs.size())
                         + " sampler logprobs for " + std::to_string(s.completion_tokens.size())
                         + " completion tokens");
      continue;
    }
    for (std::size_t i = 0; i < s.sampler_logprobs.size(); ++i) {
      const float lp = s.sampler_logprobs[i];
      if (!std::isfinite(lp) || lp > 1e-4f) {
        problems.push_back(name + ": sampler logprob[" + std::to_string(i) + "] = "
                           + std::to_string(lp) + " is not a log-probability (finite, <= 0)");
        break;
      }
    }
  }
  if (!problems.empty())
    return make_error(errc::invalid_argument, join(problems, "\n"));
  return {};
}

} // namespace kbrl::train
