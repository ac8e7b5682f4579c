#include "runtime/episode/trajectory_view.hpp"

#include "messages/errors.hpp"
#include "runtime/episode/rewards.hpp"

#include <algorithm>
#include <cstdio>

namespace kbrl::episode {

namespace {

std::string number(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", x);
  return buf;
}

std::string indent(const std::string& text) {
  std::string out = "    ";
  for (char c : text) {
    out += c;
    if (c == '\n')
      out += "    ";
  }
  while (!out.empty() && (out.back() == ' ' || out.back() == '\n'))
    out.pop_back();
  return out + "\n";
}

std::string verdict_line(const turn& u, bool evaluated) {
  if (!evaluated)
    return "not evaluated (no program in the answer)";
  const auto& v = u.verdict;
  std::string s = v.correct ? "correct" : v.compiled ? "compiled, not correct" : "did not compile";
  if (v.error != eval_error::none)
    s += ", error " + std::string(to_string(v.error));
  if (v.trials_total > 0)
    s += ", trials " + std::to_string(v.trials_passed) + "/" + std::to_string(v.trials_total);
  if (v.speedup > 0)
    s += ", speedup " + number(v.speedup) + "x";
  if (!v.evaluator.empty())
    s += " (" + v.evaluator + ")";
  return s;
}

} // namespace

std::string excerpt(const std::string& text, size_t head, size_t tail) {
  if (text.size() <= head + tail)
    return text;
  return text.substr(0, head) + "\n[... " + std::to_string(text.size() - head - tail)
         + " characters ...]\n" + text.substr(text.size() - tail);
}

std::string render_trajectory(const trajectory& t, uint64_t step,
                              const std::function<std::string(const std::vector<int32_t>&)>& decode,
                              const trajectory_view_options& o) {
  std::string out = "trajectory " + std::to_string(t.id) + " of " + t.problem_id + ", group "
                    + std::to_string(t.group_id)
                    + (step > 0 ? ", step " + std::to_string(step) : std::string{}) + ": "
                    + std::to_string(t.turns.size()) + " turn(s), ended: " + t.end_reason + "\n";
  for (const auto& u : t.turns) {
    out += "\n-- turn " + std::to_string(u.index + 1) + " (policy v"
           + std::to_string(u.policy_version) + ", " + std::to_string(u.prompt_tokens.size())
           + " prompt tokens, " + std::to_string(u.completion_tokens.size())
           + " completion tokens" + (u.retries > 0 ? ", " + std::to_string(u.retries) + " retries" : "")
           + ")\n";
    auto half = o.prompt_excerpt_chars;
    out += "  prompt (excerpt):\n"
           + indent(decode ? excerpt(decode(u.prompt_tokens), half, half) : "(no tokenizer)");
    out += "  completion:\n"
           + indent(excerpt(u.completion_text, o.completion_chars / 2, o.completion_chars / 2));
    auto parsed = parse_answer(u.completion_text, o.format);
    if (parsed.ok())
      out += "  parsed kernel:\n"
             + indent(excerpt(parsed.code, o.kernel_chars / 2, o.kernel_chars / 2));
    else
      out += "  parsed kernel: none (" + std::string(to_string(parsed.failure)) + ")\n";
    const auto& v = u.verdict;
    const bool evaluated = was_evaluated(v);
    out += "  verdict: " + verdict_line(u, evaluated) + "\n";
    if (!v.error_excerpt.empty())
      out += "  error excerpt:\n" + indent(excerpt(v.error_excerpt, 600, 600));
    out += "  reward: score " + number(u.score) + ", return " + number(u.return_value) + "\n";
  }
  return out;
}

void latest_trajectories::record(const trajectory& t, uint64_t step) {
  auto view = t;
  for (auto& u : view.turns) { // the view shows text; token ids of prompts stay for it
    u.completion_tokens.clear();
    u.logprobs.clear();
  }
  by_problem_[t.problem_id] = {step, std::move(view)};
}

caf::expected<std::string> latest_trajectories::render(
  const std::string& want, const std::function<std::string(const std::vector<int32_t>&)>& decode,
  const trajectory_view_options& options) const {
  auto it = by_problem_.find(want);
  if (it == by_problem_.end())
    it = std::find_if(by_problem_.begin(), by_problem_.end(), [&](const auto& kv) {
      auto slash = kv.first.rfind('/');
      return kv.first.substr(slash == std::string::npos ? 0 : slash + 1) == want;
    });
  if (it != by_problem_.end())
    return render_trajectory(it->second.second, it->second.first, decode, options);
  std::string seen;
  size_t listed = 0;
  for (auto& kv : by_problem_) {
    if (listed == 10) {
      seen += ", ...";
      break;
    }
    seen += (listed++ ? ", " : "") + kv.first;
  }
  return make_error(errc::invalid_argument, "no trajectory of problem '" + want
                                              + "' yet; problems seen: "
                                              + (seen.empty() ? std::string("none") : seen));
}

} // namespace kbrl::episode
