#include "runtime/report/problem_selection.hpp"

#include "messages/errors.hpp"
#include "runtime/eval/problems.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>
#include <sstream>

namespace kbrl::report {

namespace {

namespace fs = std::filesystem;

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item, sep)) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    out.push_back(item);
  }
  return out;
}

/// A non-negative decimal of at most 9 digits, or -1.
int32_t parse_count(const std::string& s) {
  if (s.empty() || s.size() > 9
      || !std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit((unsigned char)c); }))
    return -1;
  return static_cast<int32_t>(std::stol(s));
}

bool has_level_folder(const std::string& root, int32_t level) {
  std::error_code ec;
  auto l = "level" + std::to_string(level);
  return fs::is_directory(fs::path(root) / "KernelBench" / l, ec)
         || fs::is_directory(fs::path(root) / l, ec);
}

/// The problem files directly in `root`, as problems of `level`.
caf::expected<std::vector<problem>> load_flat(const std::string& root, int32_t level) {
  std::vector<std::pair<int32_t, std::string>> files;
  std::error_code ec;
  for (auto& entry : fs::directory_iterator(root, ec)) {
    if (entry.path().extension() != ".py")
      continue;
    auto stem = entry.path().stem().string();
    auto digits = stem.substr(0, stem.find('_'));
    auto n = parse_count(digits);
    if (n >= 0 && (digits.size() == stem.size() || stem[digits.size()] == '_'))
      files.emplace_back(n, entry.path().string());
  }
  std::sort(files.begin(), files.end());
  std::vector<problem> out;
  for (auto& [n, path] : files) {
    auto p = eval::load_problem_file(path, level);
    if (!p)
      return p.error();
    out.push_back(std::move(*p));
  }
  return out;
}

} // namespace

bool number_set::contains(int32_t n) const {
  if (ranges.empty())
    return true;
  return std::any_of(ranges.begin(), ranges.end(),
                     [n](auto& r) { return r.first <= n && n <= r.second; });
}

std::string number_set::to_string() const {
  if (ranges.empty())
    return "all";
  std::string out;
  for (auto& [a, b] : ranges) {
    if (!out.empty())
      out += ",";
    out += std::to_string(a);
    if (b != a)
      out += "-" + std::to_string(b);
  }
  return out;
}

caf::expected<std::vector<int32_t>> parse_levels(const std::string& text,
                                                 const std::string& flag) {
  std::vector<int32_t> out;
  for (auto& item : split(text, ',')) {
    auto n = parse_count(item);
    if (n < 1 || n > 99)
      return make_error(errc::invalid_argument, flag + " " + text + ": '" + item
                                                  + "' is not a level (expected numbers such as "
                                                    "1,2)");
    if (std::find(out.begin(), out.end(), n) != out.end())
      return make_error(errc::invalid_argument,
                        flag + " " + text + ": level " + item + " is listed twice");
    out.push_back(n);
  }
  if (out.empty())
    return make_error(errc::invalid_argument, flag + ": expected levels such as 1,2");
  return out;
}

caf::expected<number_set> parse_number_set(const std::string& text, const std::string& flag) {
  number_set out;
  if (text.empty() || text == "all")
    return out;
  for (auto& item : split(text, ',')) {
    auto dash = item.find('-');
    auto first = parse_count(item.substr(0, dash));
    auto last = dash == std::string::npos ? first : parse_count(item.substr(dash + 1));
    if (first < 0 || last < 0)
      return make_error(errc::invalid_argument,
                        flag + " " + text + ": '" + item
                          + "' is not a number or range (expected e.g. 1-20,25)");
    if (first > last)
      return make_error(errc::invalid_argument, flag + " " + text + ": range '" + item
                                                  + "' ends before it starts");
    out.ranges.emplace_back(first, last);
  }
  return out;
}

caf::expected<std::vector<problem>> select_problems(const std::string& root,
                                                    const std::vector<int32_t>& levels,
                                                    const number_set& numbers) {
  std::error_code ec;
  if (root.empty())
    return make_error(errc::invalid_argument,
                      "no problem source: pass --kernelbench DIR (a KernelBench checkout or a "
                      "folder of problem files) or set KERNELBENCH_ROOT");
  if (!fs::is_directory(root, ec))
    return make_error(errc::invalid_argument, root + ": the problem source is not a folder");
  std::vector<problem> out;
  for (auto level : levels) {
    caf::expected<std::vector<problem>> all = std::vector<problem>{};
    if (has_level_folder(root, level)) {
      all = eval::load_level(root, level);
    } else if (levels.size() == 1) {
      all = load_flat(root, level);
      if (all && all->empty())
        return make_error(errc::invalid_argument,
                          root + ": no level" + std::to_string(level)
                            + " folder (KernelBench/level" + std::to_string(level) + " or level"
                            + std::to_string(level) + ") and no problem files <N>_<Name>.py");
    } else {
      return make_error(errc::invalid_argument,
                        root + ": no level" + std::to_string(level) + " folder (looked for "
                          + "KernelBench/level" + std::to_string(level) + " and level"
                          + std::to_string(level) + ")");
    }
    if (!all)
      return all.error();
    size_t before = out.size();
    for (auto& p : *all)
      if (numbers.contains(p.number))
        out.push_back(std::move(p));
    if (out.size() == before)
      return make_error(errc::invalid_argument,
                        "level " + std::to_string(level) + " under " + root
                          + " has no problem numbered " + numbers.to_string());
  }
  return out;
}

} // namespace kbrl::report
