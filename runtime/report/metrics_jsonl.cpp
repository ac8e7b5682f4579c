#include "runtime/report/metrics_jsonl.hpp"

#include "runtime/io/file_io.hpp"
#include "runtime/io/json_writer.hpp"

#include <simdjson.h>

#include <filesystem>
#include <sstream>

namespace kbrl::report {

metric_record commit_record(uint64_t step, uint64_t steps, int64_t unix_ms,
                            const std::string& source) {
  const double done = steps == 0 ? 0.0 : static_cast<double>(step) / static_cast<double>(steps);
  return {step, step_committed_metric, done, unix_ms, source, {}};
}

std::string metrics_line(uint64_t step, int64_t unix_ms,
                         const std::vector<metric_record>& records) {
  // Equal names: the last record wins, at the place of the first.
  std::vector<const metric_record*> order;
  std::map<std::string, size_t> at;
  for (auto& r : records) {
    if (r.name == "step" || r.name == "unix_ms")
      continue;
    if (auto it = at.find(r.name); it != at.end())
      order[it->second] = &r;
    else {
      at[r.name] = order.size();
      order.push_back(&r);
    }
  }
  json_writer w;
  w.begin_object().field("step", step).field("unix_ms", unix_ms);
  for (auto* r : order) {
    if (r->samples.empty()) {
      w.field(r->name, r->value);
      continue;
    }
    w.key(r->name).begin_array();
    for (double x : r->samples)
      w.value(x);
    w.end_array();
  }
  w.end_object();
  return w.str();
}

namespace {

/// A line of the older layout: one record.
bool read_record_line(simdjson::dom::object obj, metrics_step& out) {
  std::string_view name;
  if (obj["name"].get(name))
    return false;
  simdjson::dom::array samples;
  if (!obj["samples"].get(samples)) {
    auto& d = out.distributions[std::string{name}];
    for (auto x : samples) {
      double v = 0;
      if (!x.get(v))
        d.push_back(v);
    }
    return true;
  }
  double value = 0;
  if (!obj["value"].get(value))
    out.scalars[std::string{name}] = value;
  return true;
}

} // namespace

caf::expected<std::vector<metrics_step>> read_metrics_jsonl(const std::string& path) {
  std::vector<metrics_step> out;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return out;
  auto text = io::read_text_file(path);
  if (!text)
    return text.error();
  simdjson::dom::parser parser;
  std::istringstream in(*text);
  for (std::string line; std::getline(in, line);) {
    simdjson::dom::object obj;
    if (line.empty() || parser.parse(line).get(obj))
      continue; // a line cut short by a crash
    metrics_step s;
    if (obj["step"].get(s.step))
      continue;
    if (!read_record_line(obj, s)) {
      for (auto [key, value] : obj) {
        if (key == "step" || key == "unix_ms")
          continue;
        double v = 0;
        simdjson::dom::array list;
        if (!value.get(v)) {
          s.scalars[std::string{key}] = v;
        } else if (!value.get(list)) {
          auto& d = s.distributions[std::string{key}];
          for (auto x : list)
            if (!x.get(v))
              d.push_back(v);
        }
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::map<uint64_t, double> metric_by_step(const std::string& path, const std::string& name) {
  std::map<uint64_t, double> out;
  auto lines = read_metrics_jsonl(path);
  if (!lines)
    return out;
  for (auto& s : *lines)
    if (auto it = s.scalars.find(name); it != s.scalars.end())
      out[s.step] = it->second;
  return out;
}

} // namespace kbrl::report
