#include "runtime/eval/problems.hpp"

#include "messages/errors.hpp"
#include "runtime/eval/eval_engine.hpp"
#include "runtime/io/text.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

namespace kbrl::eval {

namespace {

namespace fs = std::filesystem;

/// The leading number of "19_ReLU.py", or -1.
int leading_number(const std::string& stem) {
  size_t i = 0;
  while (i < stem.size() && std::isdigit(static_cast<unsigned char>(stem[i])))
    ++i;
  if (i == 0 || i > 6 || (i < stem.size() && stem[i] != '_'))
    return -1;
  return std::stoi(stem.substr(0, i));
}

std::vector<fs::path> level_dirs(const std::string& root, int level) {
  auto l = "level" + std::to_string(level);
  return {fs::path(root) / "KernelBench" / l, fs::path(root) / l};
}

} // namespace

std::string normalized_source_hash(const std::string& source) {
  std::string norm;
  std::istringstream in(source);
  std::string line;
  while (std::getline(in, line)) {
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back())))
      line.pop_back();
    norm += line;
    norm += '\n';
  }
  while (!norm.empty() && norm.back() == '\n')
    norm.pop_back();
  return source_hash(norm);
}

caf::expected<problem> load_problem_file(const std::string& path, int level) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return make_error(errc::invalid_argument, path + ": cannot read the problem file");
  std::stringstream ss;
  ss << in.rdbuf();
  problem p;
  p.reference_source = ss.str();
  std::vector<std::string> missing;
  static const std::regex model(R"(^class\s+Model\s*\()", std::regex::multiline);
  static const std::regex inputs(R"(^def\s+get_inputs\s*\()", std::regex::multiline);
  static const std::regex init(R"(^def\s+get_init_inputs\s*\()", std::regex::multiline);
  if (!std::regex_search(p.reference_source, model))
    missing.push_back("class Model");
  if (!std::regex_search(p.reference_source, inputs))
    missing.push_back("def get_inputs()");
  if (!std::regex_search(p.reference_source, init))
    missing.push_back("def get_init_inputs()");
  if (!missing.empty())
    return make_error(errc::invalid_argument, path + ": not a KernelBench-style problem (missing "
                                                + join(missing) + ")");
  auto stem = fs::path(path).stem().string();
  p.name = stem;
  p.number = std::max(0, leading_number(stem));
  p.level = level;
  p.id = level > 0 ? "level" + std::to_string(level) + "/" + stem : stem;
  p.source_hash = normalized_source_hash(p.reference_source);
  return p;
}

caf::expected<std::vector<problem>> load_level(const std::string& root, int level) {
  for (auto& dir : level_dirs(root, level)) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec))
      continue;
    std::vector<std::pair<int, std::string>> files;
    for (auto& entry : fs::directory_iterator(dir, ec)) {
      if (entry.path().extension() != ".py")
        continue;
      auto n = leading_number(entry.path().stem().string());
      if (n >= 0)
        files.emplace_back(n, entry.path().string());
    }
    std::sort(files.begin(), files.end());
    std::vector<problem> out;
    for (auto& [n, file] : files) {
      auto p = load_problem_file(file, level);
      if (!p)
        return std::move(p.error());
      out.push_back(std::move(*p));
    }
    return out;
  }
  return make_error(errc::invalid_argument, "no level" + std::to_string(level) + " folder under "
                                              + root + " (looked for KernelBench/level"
                                              + std::to_string(level) + " and level"
                                              + std::to_string(level) + ")");
}

caf::expected<problem> find_problem(const std::string& spec, const std::vector<std::string>& roots) {
  std::error_code ec;
  if (fs::is_regular_file(spec, ec))
    return load_problem_file(spec);
  static const std::regex level_id(R"(^(?:level)?(\d+)/(\d+)$)");
  std::smatch m;
  if (!std::regex_match(spec, m, level_id))
    return make_error(errc::invalid_argument,
                      "problem '" + spec + "': expected a file or LEVEL/ID such as 1/19");
  int level = std::stoi(m[1]);
  int id = std::stoi(m[2]);
  auto all_roots = roots;
  if (const char* env = std::getenv("KERNELBENCH_ROOT"))
    all_roots.push_back(env);
  std::vector<std::string> looked;
  for (auto& root : all_roots)
    for (auto& dir : level_dirs(root, level)) {
      looked.push_back(dir.string());
      if (!fs::is_directory(dir, ec))
        continue;
      for (auto& entry : fs::directory_iterator(dir, ec))
        if (entry.path().extension() == ".py"
            && leading_number(entry.path().stem().string()) == id)
          return load_problem_file(entry.path().string(), level);
    }
  return make_error(errc::invalid_argument,
                    "problem " + spec + " not found (looked in: "
                      + (looked.empty() ? std::string("nothing: set KERNELBENCH_ROOT or pass a "
                                                      "problems root")
                                        : join(looked))
                      + ")");
}

} // namespace kbrl::eval
