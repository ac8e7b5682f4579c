#include "runtime/episode/trace_log.hpp"

#include "messages/errors.hpp"
#include "runtime/io/json_writer.hpp"

#include <algorithm>
#include <filesystem>

namespace kbrl::episode {

namespace fs = std::filesystem;

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
trace_log::trace_log(std::string run_dir, uint64_t max_bytes)
  : run_dir_(std::move(run_dir)), path_(run_dir_ + "/traces.jsonl"), max_bytes_(max_bytes) {}

caf::expected<void> trace_log::append(std::vector<trajectory> round, uint64_t step, bool eval) {
  if (out_.is_open() && static_cast<uint64_t>(out_.tellp()) > max_bytes_) {
    out_.close();
    std::error_code ec;
    fs::rename(path_, run_dir_ + "/traces.1.jsonl", ec); // keep one older file
  }
  if (!out_.is_open()) {
    out_.clear();
    out_.open(path_, std::ios::app);
  }
  std::sort(round.begin(), round.end(),
            [](const trajectory& a, const trajectory& b) { return a.id < b.id; });
  for (auto& t : round)
    out_ << trace_line(t, step, eval) << "\n";
  out_.flush();
  if (!out_) {
    out_.close(); // reopened (and the error state cleared) by the next append
    return make_error(errc::io_failure, "could not write " + path_);
  }
  return {};
}

} // namespace kbrl::episode
