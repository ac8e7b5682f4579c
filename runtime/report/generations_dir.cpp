#include "runtime/report/generations_dir.hpp"

#include "messages/errors.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <tuple>

namespace kbrl::report {

namespace {

namespace fs = std::filesystem;

/// A decimal number of at most 9 digits (no sign), or -1.
int32_t number(const std::string& digits) {
  if (digits.empty() || digits.size() > 9)
    return -1;
  return static_cast<int32_t>(std::stol(digits));
}

/// ".py" -> program, ".txt"/".md" -> completion; false for other extensions.
bool candidate_kind(const fs::path& p, bool& is_completion) {
  auto ext = p.extension().string();
  if (ext == ".py") {
    is_completion = false;
    return true;
  }
  if (ext == ".txt" || ext == ".md") {
    is_completion = true;
    return true;
  }
  return false;
}

} // namespace

caf::expected<generations_scan> scan_generations(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return make_error(errc::invalid_argument,
                      dir + ": not a folder (--generations expects a folder laid out as "
                            "level<L>/<problem>/sample_<S>.py or .txt)");
  static const std::regex level_dir(R"(level(\d+))");
  static const std::regex problem_dir(R"((\d+)(_.*)?)");
  static const std::regex sample_file(R"(sample_(\d+))");
  static const std::regex turn_file(R"(turn_(\d+))");
  static const std::regex kernelbench_flat(R"(level_(\d+)_problem_(\d+)_sample_(\d+)_kernel\.py)");
  generations_scan scan;
  std::map<std::tuple<int32_t, int32_t, int32_t, int32_t>, std::string> seen;
  auto add = [&](generation_file f) -> caf::error {
    auto key = std::make_tuple(f.level, f.problem_number, f.sample, f.turn);
    auto [it, fresh] = seen.emplace(key, f.relative);
    if (!fresh)
      return make_error(errc::invalid_argument,
                        dir + ": " + it->second + " and " + f.relative
                          + " are both level " + std::to_string(f.level) + " problem "
                          + std::to_string(f.problem_number) + " sample "
                          + std::to_string(f.sample) + " turn " + std::to_string(f.turn)
                          + "; keep one");
    scan.files.push_back(std::move(f));
    return {};
  };
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    auto name = it->path().filename().string();
    if (name.rfind(".", 0) == 0) { // dotfiles and dot-folders (.cache, .scratch) are not ours
      if (it->is_directory(ec))
        it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file(ec))
      continue;
    auto rel = fs::relative(it->path(), dir, ec).string();
    std::vector<std::string> parts;
    for (auto& part : fs::path(rel))
      parts.push_back(part.string());
    generation_file f;
    f.path = it->path().string();
    f.relative = rel;
    std::smatch m;
    bool matched = false;
    if (parts.size() == 1 && std::regex_match(parts[0], m, kernelbench_flat)) {
      f.level = number(m[1]);
      f.problem_number = number(m[2]);
      f.sample = number(m[3]);
      f.is_completion = false;
      matched = f.level >= 0 && f.problem_number >= 0 && f.sample >= 0;
    } else if ((parts.size() == 3 || parts.size() == 4)
               && std::regex_match(parts[0], m, level_dir)) {
      f.level = number(m[1]);
      std::smatch pm;
      if (f.level >= 0 && std::regex_match(parts[1], pm, problem_dir)) {
        f.problem_number = number(pm[1]);
        auto file = fs::path(parts.back());
        std::smatch sm, tm;
        auto stem = file.stem().string();
        if (parts.size() == 3 && candidate_kind(file, f.is_completion)
            && std::regex_match(stem, sm, sample_file)) {
          f.sample = number(sm[1]);
          matched = f.sample >= 0 && f.problem_number >= 0;
        } else if (parts.size() == 4 && candidate_kind(file, f.is_completion)
                   && std::regex_match(parts[2], sm, sample_file)
                   && std::regex_match(stem, tm, turn_file)) {
          f.sample = number(sm[1]);
          f.turn = number(tm[1]);
          matched = f.sample >= 0 && f.turn >= 0 && f.problem_number >= 0;
        }
      }
    }
    if (!matched) {
      scan.ignored.push_back(rel);
      continue;
    }
    if (auto err = add(std::move(f)))
      return err;
  }
  if (ec)
    return make_error(errc::io_failure, dir + ": cannot list the folder: " + ec.message());
  std::sort(scan.files.begin(), scan.files.end(), [](const auto& a, const auto& b) {
    return std::tie(a.level, a.problem_number, a.sample, a.turn)
           < std::tie(b.level, b.problem_number, b.sample, b.turn);
  });
  std::sort(scan.ignored.begin(), scan.ignored.end());
  return scan;
}

std::string completion_relative_path(const problem& p, int32_t sample, int32_t turn,
                                     bool multi_turn) {
  // The folder must start with the problem's number, which is how it is read back.
  auto number = std::to_string(p.number);
  auto name = p.name.rfind(number + "_", 0) == 0 || p.name == number ? p.name
              : p.name.empty()                                      ? number
                                                                    : number + "_" + p.name;
  auto folder = "level" + std::to_string(p.level) + "/" + name;
  if (!multi_turn)
    return folder + "/sample_" + std::to_string(sample) + ".txt";
  return folder + "/sample_" + std::to_string(sample) + "/turn_" + std::to_string(turn) + ".txt";
}

} // namespace kbrl::report
