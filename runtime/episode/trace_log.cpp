#include "runtime/episode/trace_log.hpp"

#include "messages/errors.hpp"
#include "runtime/io/json_writer.hpp"

#include <algorithm>

namespace kbrl::episode {

std::string trace_line(const trajectory& t, uint64_t step, bool eval) {
  json_writer w;
  w.begin_object()
    .field("step", step)
    .field("eval", eval)
    .field("trajectory", t.id)
    .field("group", t.group_id)
    .field("problem", t.problem_id)
    .field("end", t.end_reason);
  w.key("turns").begin_array();
  for (auto& u : t.turns) {
    w.begin_object()
      .field("index", u.index)
      .field("policy_version", u.policy_version)
      .field("prompt_tokens", static_cast<uint64_t>(u.prompt_tokens.size()))
      .field("completion", u.completion_text)
      .field("compiled", u.verdict.compiled)
      .field("correct", u.verdict.correct)
      .field("kernelbench_correct", u.verdict.kernelbench_correct)
      .field("time_coverage", u.verdict.time_coverage)
      .field("error", to_string(u.verdict.error))
      .field("error_excerpt", u.verdict.error_excerpt)
      .field("speedup", u.verdict.speedup)
      .field("score", u.score)
      .field("return", u.return_value)
      .field("retries", u.retries)
      .end_object();
  }
  w.end_array().end_object();
  return w.str();
}
trace_log::trace_log(std::shared_ptr<io::file_store> files, uint64_t max_bytes)
  : files_(std::move(files)), max_bytes_(max_bytes) {}

trace_log::trace_log(const std::string& run_dir, uint64_t max_bytes)
  : trace_log(io::directory_store(run_dir), max_bytes) {}

caf::expected<void> trace_log::append(std::vector<trajectory> round, uint64_t step, bool eval) {
  if (files_->size(file_name) > max_bytes_) {
    // keep one older file; a failed rename leaves the log growing, which is no reason to stop
    (void)files_->rename(file_name, older_file_name);
  }
  std::sort(round.begin(), round.end(),
            [](const trajectory& a, const trajectory& b) { return a.id < b.id; });
  std::string lines;
  for (auto& t : round)
    lines += trace_line(t, step, eval) + "\n";
  return files_->append(file_name, lines);
}

} // namespace kbrl::episode
