#pragma once
// Reading back what an RL run leaves in its run directory, for the rl_run and rl_process suites.

#include "cluster_fixture.hpp"
#include "runtime/report/metrics_jsonl.hpp"

#include <simdjson.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace kbrl::test {

/// step -> how many lines of `path` (metrics.jsonl) hold `metric` at that step.
inline std::map<uint64_t, int> steps_of(const std::string& path, const std::string& metric) {
  std::map<uint64_t, int> out;
  auto lines = report::read_metrics_jsonl(path);
  if (!lines)
    return out;
  for (auto& s : *lines)
    if (s.scalars.count(metric) || s.distributions.count(metric))
      ++out[s.step];
  return out;
}

/// step -> trajectories in traces.jsonl.
inline std::map<uint64_t, int> trace_steps(const std::string& path) {
  std::map<uint64_t, int> out;
  std::istringstream in(read_file(path));
  simdjson::dom::parser parser;
  for (std::string line; std::getline(in, line);) {
    simdjson::dom::element doc;
    uint64_t step = 0;
    if (!parser.parse(line).get(doc) && !doc["step"].get(step))
      ++out[step];
  }
  return out;
}

inline std::vector<std::string> event_files(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.path().filename().string().rfind("events.out.tfevents.", 0) == 0)
      out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

} // namespace kbrl::test
