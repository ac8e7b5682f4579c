#include "runtime/warmstart/solutions.hpp"

#include "messages/errors.hpp"
#include "runtime/io/file_io.hpp"
#include "runtime/io/text.hpp"

#include <simdjson.h>

#include <algorithm>
#include <set>

namespace kbrl::warmstart {

const std::vector<std::string>& solution_labels() {
  static const std::vector<std::string> labels{"correct", "incorrect", "compile", "runtime",
                                               "format"};
  return labels;
}

namespace {

caf::error line_error(const std::string& path, size_t line, const std::string& what) {
  return make_error(errc::invalid_config, path + ":" + std::to_string(line) + ": " + what);
}

} // namespace

caf::expected<std::vector<solution>> parse_solutions(std::string_view text,
                                                     const std::string& path) {
  std::vector<solution> out;
  simdjson::dom::parser parser;
  size_t line_no = 0, pos = 0;
  while (pos < text.size()) {
    auto end = text.find('\n', pos);
    auto line = text.substr(pos, end == std::string_view::npos ? std::string_view::npos : end - pos);
    pos = end == std::string_view::npos ? text.size() : end + 1;
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos)
      continue;
    simdjson::dom::element doc;
    if (auto err = parser.parse(line.data(), line.size()).get(doc))
      return line_error(path, line_no, std::string("not valid JSON: ") + simdjson::error_message(err));
    simdjson::dom::object obj;
    if (doc.get(obj))
      return line_error(path, line_no, "expected a JSON object with problem, label, completion");
    solution s;
    s.line = line_no;
    for (auto [key, field] : {std::pair<const char*, std::string*>{"problem", &s.problem},
                              {"label", &s.label},
                              {"completion", &s.completion}}) {
      std::string_view value;
      auto e = obj[key];
      if (e.error())
        return line_error(path, line_no, std::string("the key \"") + key + "\" is missing");
      if (e.get(value))
        return line_error(path, line_no, std::string("\"") + key + "\" must be a string");
      *field = std::string(value);
    }
    auto& labels = solution_labels();
    if (std::find(labels.begin(), labels.end(), s.label) == labels.end())
      return line_error(path, line_no, "unknown label \"" + s.label + "\" (expected one of "
                                         + join(labels) + ")");
    if (s.completion.empty())
      return line_error(path, line_no, "the completion is empty");
    if (s.problem.empty())
      return line_error(path, line_no, "the problem is empty");
    out.push_back(std::move(s));
  }
  if (out.empty())
    return make_error(errc::invalid_config, path + ": no examples (one JSON object per line)");
  return out;
}

caf::expected<std::vector<solution>> load_solutions(const std::string& path) {
  auto text = io::read_text_file(path);
  if (!text)
    return text.error();
  return parse_solutions(*text, path);
}

caf::expected<void> check_problems_exist(const std::vector<solution>& solutions,
                                         const std::vector<problem>& problems,
                                         const std::string& path, const std::string& root) {
  std::set<std::string> ids;
  for (auto& p : problems)
    ids.insert(p.id);
  for (auto& s : solutions)
    if (ids.count(s.problem) == 0)
      return line_error(path, s.line, "problem \"" + s.problem + "\" is not among the "
                                        + std::to_string(problems.size()) + " problems under "
                                        + root + " (ids look like \"" + *ids.begin() + "\")");
  return {};
}

} // namespace kbrl::warmstart
