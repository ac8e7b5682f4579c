#include "runtime/node/rl_run_dir.hpp"

#include "messages/errors.hpp"
#include "runtime/episode/coordinator_checkpoint.hpp"
#include "runtime/io/file_io.hpp"
#include "runtime/train/checkpoint_list.hpp"

#include <fmt/format.h>
#include <simdjson.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace kbrl {

namespace fs = std::filesystem;

namespace {

bool non_empty_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec) && fs::file_size(p, ec) > 0;
}

bool non_empty_dir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec) && !fs::is_empty(p, ec);
}

/// The files and folders an RL run writes (logs, config.toml and manifest.toml apart).
const std::vector<std::string>& run_outputs() {
  static const std::vector<std::string> names{"coordinator.json", "metrics.jsonl",
                                              "traces.jsonl",     "traces.1.jsonl",
                                              "tensorboard",      "learner"};
  return names;
}

} // namespace

std::vector<std::string> earlier_run_files(const std::string& run_dir) {
  std::vector<std::string> out;
  fs::path dir(run_dir);
  if (non_empty_file(dir / "coordinator.json")) {
    auto cp = read_coordinator_checkpoint(run_dir);
    out.push_back(cp ? "coordinator.json at step " + std::to_string(cp->step)
                     : std::string("coordinator.json"));
  }
  for (auto name : {"metrics.jsonl", "traces.jsonl"})
    if (non_empty_file(dir / name))
      out.push_back(name);
  if (non_empty_dir(dir / "tensorboard"))
    out.push_back("tensorboard/");
  if (non_empty_dir(dir / "learner" / "checkpoints"))
    out.push_back("learner/checkpoints/");
  return out;
}

caf::expected<void> remove_earlier_run(const std::string& run_dir) {
  for (auto& name : run_outputs()) {
    auto p = fs::path(run_dir) / name;
    std::error_code ec;
    fs::remove_all(p, ec);
    if (ec)
      return make_error(errc::io_failure, p.string() + ": cannot remove: " + ec.message());
  }
  return caf::unit;
}

caf::expected<size_t> trim_jsonl_after_step(const std::string& path, uint64_t max_step) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    return size_t{0};
  auto text = io::read_text_file(path);
  if (!text)
    return text.error();
  std::string kept;
  size_t removed = 0;
  simdjson::dom::parser parser;
  std::istringstream in(*text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty())
      continue;
    simdjson::dom::element doc;
    if (parser.parse(line).get(doc)) { // cut short by a crash
      ++removed;
      continue;
    }
    uint64_t step = 0;
    if (!doc["step"].get(step) && step > max_step) {
      ++removed;
      continue;
    }
    kept += line;
    kept += '\n';
  }
  if (removed == 0)
    return removed;
  if (auto ok = io::write_file_atomically(path, {kept}); !ok)
    return ok.error();
  return removed;
}

caf::expected<resume_point> prepare_resume(const std::string& run_dir, uint64_t problems_per_step) {
  auto cp = read_coordinator_checkpoint(run_dir);
  if (!cp)
    return cp.error();
  resume_point p{cp->step, cp->cursor, cp->policy_version, "", 0, 0};
  auto latest = train::latest_checkpoint(fs::path(run_dir) / "learner" / "checkpoints");
  if (!latest)
    return latest.error();
  uint64_t learner_version = 0, learner_step = 0;
  if (*latest) {
    learner_version = (*latest)->cursor.policy_version;
    learner_step = (*latest)->cursor.last_coordinator_step;
  }
  if (learner_version != cp->policy_version) {
    // The learner resumes from its checkpoint: the coordinator goes to the step that checkpoint
    // was trained on. Each step takes problems_per_step problems from the data order.
    p.step = learner_step;
    p.policy_version = learner_version;
    auto delta = static_cast<int64_t>(learner_step) - static_cast<int64_t>(cp->step);
    auto cursor = static_cast<int64_t>(cp->cursor)
                  + delta * static_cast<int64_t>(problems_per_step);
    p.cursor = static_cast<uint64_t>(std::max<int64_t>(0, cursor));
    p.adjusted = fmt::format(
      "coordinator.json was at step {} (policy v{}) but the learner's newest checkpoint holds "
      "policy v{} trained at step {}: the run continues after step {}",
      cp->step, cp->policy_version, learner_version, learner_step, p.step);
    const coordinator_checkpoint adjusted{p.step, p.cursor, p.policy_version};
    if (auto ok = write_coordinator_checkpoint(run_dir, adjusted); !ok)
      return ok.error();
  }
  auto metrics = trim_jsonl_after_step(run_dir + "/metrics.jsonl", p.step);
  if (!metrics)
    return metrics.error();
  p.metrics_lines_removed = *metrics;
  // Trace lines carry the step they belong to (a held-out evaluation after step n: n + 1). A
  // redone step may also have lines in the rotated file, when the rotation came after it began.
  p.trace_lines_removed = 0;
  for (auto name : {"/traces.1.jsonl", "/traces.jsonl"}) {
    auto traces = trim_jsonl_after_step(run_dir + name, p.step);
    if (!traces)
      return traces.error();
    p.trace_lines_removed += *traces;
  }
  return p;
}

} // namespace kbrl
