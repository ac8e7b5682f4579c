#include "runtime/evalcli/work_plan.hpp"

#include "messages/errors.hpp"
#include "runtime/report/generations_dir.hpp"
#include "runtime/report/problem_selection.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <tuple>

namespace kbrl::evalcli {

namespace {

namespace fs = std::filesystem;

template <class Enum>
bool parse_enum(const std::string& text, Enum& out, std::initializer_list<Enum> all) {
  for (auto e : all)
    if (text == to_string(e)) {
      out = e;
      return true;
    }
  return false;
}

} // namespace

std::string problem_root(const eval_options& o) {
  if (!o.kernelbench.empty())
    return o.kernelbench;
  const char* env = std::getenv("KERNELBENCH_ROOT");
  return env ? env : "";
}

namespace {

/// The backend and precision the candidates of `p` are written for and checked in (the command
/// line has checked both names).
void set_task(const eval_options& o, problem& p) {
  parse_enum(o.backend, p.backend,
             {kernel_backend::cuda, kernel_backend::triton, kernel_backend::torch,
              kernel_backend::hip, kernel_backend::cute, kernel_backend::tilelang,
              kernel_backend::thunderkittens});
  parse_enum(o.precision, p.precision,
             {kernel_precision::fp32, kernel_precision::fp16, kernel_precision::bf16});
}

} // namespace

caf::error plan_generations(const eval_options& o, work_plan& plan, report::run_info& info) {
  auto scan = report::scan_generations(o.generations);
  if (!scan)
    return scan.error();
  if (scan->files.empty())
    return make_error(errc::invalid_argument,
                      o.generations + ": no candidate files (expected level<L>/<problem>/"
                                      "sample_<S>.py or .txt, or KernelBench's "
                                      "level_<L>_problem_<N>_sample_<S>_kernel.py)");
  if (!scan->ignored.empty()) {
    std::string some;
    for (size_t i = 0; i < scan->ignored.size() && i < 5; ++i)
      some += (i ? ", " : "") + scan->ignored[i];
    std::fprintf(stderr, "kbrl-eval: %zu file(s) in %s match no layout and are ignored: %s%s\n",
                 scan->ignored.size(), o.generations.c_str(), some.c_str(),
                 scan->ignored.size() > 5 ? ", ..." : "");
  }
  std::vector<int32_t> levels;
  if (!o.levels.empty()) {
    auto parsed = report::parse_levels(o.levels);
    if (!parsed)
      return parsed.error();
    levels = *parsed;
  } else {
    for (auto& f : scan->files)
      if (std::find(levels.begin(), levels.end(), f.level) == levels.end())
        levels.push_back(f.level);
  }
  auto numbers = report::parse_number_set(o.problems);
  if (!numbers)
    return numbers.error();
  int32_t most_samples = 0, most_turns = 0;
  for (auto& f : scan->files) {
    most_samples = std::max(most_samples, f.sample + 1);
    most_turns = std::max(most_turns, f.turn + 1);
  }
  if (o.samples <= 0) {
    // A stray sample_99999.py would pad every problem to 100,000 samples (all "missing"): the
    // numbering must be roughly as dense as the files are.
    std::map<int32_t, const report::generation_file*> numbered;
    for (auto& f : scan->files)
      numbered.emplace(f.sample, &f);
    const auto distinct = static_cast<int32_t>(numbered.size());
    if (most_samples > 64 && most_samples > 4 * distinct) {
      auto* last = std::prev(numbered.end())->second;
      return make_error(errc::invalid_argument,
                        o.generations + ": sample numbers run up to "
                          + std::to_string(most_samples - 1) + " but only "
                          + std::to_string(distinct) + " different ones have files (the highest: "
                          + last->relative + "); every problem would be padded to "
                          + std::to_string(most_samples)
                          + " samples. Remove the stray file, or say how many samples to score "
                            "with --samples N");
    }
  }
  int32_t samples = o.samples > 0 ? o.samples : most_samples;
  int32_t turns = o.turns_given ? o.turns : most_turns;
  auto root = problem_root(o);
  // Without --problems: the problems the folder has files for (a partial folder is a subset,
  // not a failed full level). With --problems: exactly those, missing files counted as failures.
  std::vector<problem> problems;
  for (auto level : levels) {
    report::number_set wanted = *numbers;
    if (numbers->all()) {
      for (auto& f : scan->files)
        if (f.level == level)
          wanted.ranges.emplace_back(f.problem_number, f.problem_number);
      if (wanted.ranges.empty())
        return make_error(errc::invalid_argument, o.generations + ": no files for level "
                                                    + std::to_string(level));
    }
    auto some = report::select_problems(root, {level}, wanted);
    if (!some)
      return some.error();
    for (auto& p : *some)
      problems.push_back(std::move(p));
  }
  // Every file must belong to a selected problem (or be outside the selection on purpose).
  std::map<std::pair<int32_t, int32_t>, size_t> index;
  for (size_t i = 0; i < problems.size(); ++i)
    index[{problems[i].level, problems[i].number}] = i;
  std::vector<std::string> unknown;
  for (auto& f : scan->files)
    if (std::find(levels.begin(), levels.end(), f.level) != levels.end()
        && numbers->contains(f.problem_number) && !index.count({f.level, f.problem_number}))
      unknown.push_back(f.relative);
  if (!unknown.empty())
    return make_error(errc::invalid_argument,
                      "no problem under " + root + " for " + std::to_string(unknown.size())
                        + " file(s) of " + o.generations + ", e.g. " + unknown.front());
  for (auto& p : problems)
    set_task(o, p);
  // One item per file of a selected sample and turn; a sample without any file is missing.
  std::map<std::tuple<int32_t, int32_t, int32_t>, std::vector<const report::generation_file*>>
    by_sample;
  for (auto& f : scan->files)
    if (f.sample < samples && f.turn < turns)
      by_sample[{f.level, f.problem_number, f.sample}].push_back(&f);
  plan.problems = std::move(problems);
  for (size_t pi = 0; pi < plan.problems.size(); ++pi) {
    auto& p = plan.problems[pi];
    for (int32_t s = 0; s < samples; ++s) {
      auto it = by_sample.find({p.level, p.number, s});
      if (it == by_sample.end()) {
        work_item w;
        w.problem = pi;
        w.sample = s;
        w.missing = true;
        plan.items.push_back(std::move(w));
        continue;
      }
      for (auto* f : it->second) {
        work_item w;
        w.problem = pi;
        w.sample = s;
        w.turn = f->turn;
        w.file = f->path;
        w.relative = f->relative;
        w.is_completion = f->is_completion;
        plan.items.push_back(std::move(w));
      }
    }
  }
  info.mode = "generations";
  info.generations_dir = fs::absolute(o.generations).lexically_normal().string();
  info.levels = levels;
  info.samples = samples;
  info.turns = turns;
  info.problem_source = root;
  return {};
}

caf::error plan_model(const eval_options& o, const std::string& generations_root, work_plan& plan,
                      report::run_info& info) {
  if (o.levels.empty())
    return make_error(errc::invalid_argument, "--model needs --levels (e.g. --levels 1,2)");
  auto levels = report::parse_levels(o.levels);
  if (!levels)
    return levels.error();
  auto numbers = report::parse_number_set(o.problems);
  if (!numbers)
    return numbers.error();
  auto root = problem_root(o);
  auto problems = report::select_problems(root, *levels, *numbers);
  if (!problems)
    return problems.error();
  plan.problems = std::move(*problems);
  int32_t samples = o.samples > 0 ? o.samples : 1;
  int32_t turns = std::max(1, o.turns);
  for (size_t pi = 0; pi < plan.problems.size(); ++pi) {
    set_task(o, plan.problems[pi]);
    for (int32_t s = 0; s < samples; ++s) {
      work_item w;
      w.problem = pi;
      w.sample = s;
      if (turns > 1) {
        // An episode: its turns' files and what was drawn before are the episode's business.
        w.turns = turns;
        w.is_completion = true;
        plan.items.push_back(std::move(w));
        continue;
      }
      w.relative = report::completion_relative_path(plan.problems[pi], s, 0, false);
      w.file = (fs::path(generations_root) / w.relative).string();
      w.is_completion = true;
      std::error_code ec;
      w.generate = !fs::exists(w.file, ec); // a continued run reuses what was drawn
      plan.items.push_back(std::move(w));
    }
  }
  info.mode = "model";
  info.model = o.model;
  info.adapter = o.adapter.empty() ? "" : fs::absolute(o.adapter).lexically_normal().string();
  info.levels = *levels;
  info.samples = samples;
  info.turns = turns;
  info.problem_source = root;
  return {};
}

} // namespace kbrl::evalcli
