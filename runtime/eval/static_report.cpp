#include "runtime/eval/static_report.hpp"

#include "messages/errors.hpp"
#include "runtime/io/json_writer.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace kbrl::eval {

namespace fs = std::filesystem;

caf::expected<std::vector<std::string>> candidate_files(const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  for (const auto& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      std::vector<std::string> found;
      for (auto it = fs::recursive_directory_iterator(p, ec); !ec && it != fs::end(it);
           it.increment(ec))
        if (it->is_regular_file(ec) && it->path().extension() == ".py")
          found.push_back(it->path().string());
      std::sort(found.begin(), found.end());
      out.insert(out.end(), found.begin(), found.end());
    } else if (fs::exists(p, ec)) {
      out.push_back(p);
    } else {
      return make_error(errc::invalid_argument, "no such file or directory: " + p);
    }
  }
  return out;
}

caf::expected<std::vector<screened_file>> screen_files(const std::vector<std::string>& files,
                                                       const static_check_options& opts) {
  std::vector<screened_file> out;
  for (const auto& path : files) {
    std::ifstream in(path, std::ios::binary);
    if (!in)
      return make_error(errc::io_failure, "cannot read " + path);
    std::ostringstream text;
    text << in.rdbuf();
    out.push_back({path, check_candidate(text.str(), opts)});
  }
  return out;
}

std::string screen_text(const std::vector<screened_file>& files) {
  std::string out;
  for (const auto& f : files) {
    size_t errors = 0;
    for (const auto& x : f.result.findings)
      errors += x.level == severity::error ? 1 : 0;
    out += f.path + ": " + (f.result.rejected() ? "refused" : "passed") + " ("
           + std::to_string(errors) + " errors, "
           + std::to_string(f.result.findings.size() - errors) + " warnings)\n";
    for (const auto& x : f.result.findings) {
      out += std::string{"  "} + to_string(x.level) + " " + x.rule + " line "
             + std::to_string(x.line) + ": " + x.message + "\n";
      if (!x.excerpt.empty())
        out += "      | " + x.excerpt + "\n";
    }
  }
  return out;
}

std::string screen_json(const std::vector<screened_file>& files) {
  json_writer w;
  int64_t rejected = 0;
  w.begin_object().key("files").begin_array();
  for (const auto& f : files) {
    rejected += f.result.rejected() ? 1 : 0;
    w.begin_object().field("path", f.path).field("rejected", f.result.rejected());
    w.key("findings").begin_array();
    for (const auto& x : f.result.findings)
      w.begin_object()
        .field("rule", x.rule)
        .field("severity", to_string(x.level))
        .field("line", static_cast<int64_t>(x.line))
        .field("message", x.message)
        .field("excerpt", x.excerpt)
        .end_object();
    w.end_array().end_object();
  }
  w.end_array().field("rejected", rejected).end_object();
  return w.str() + "\n";
}

} // namespace kbrl::eval
