#include "runtime/episode/problem_set.hpp"

#include "messages/errors.hpp"
#include "runtime/eval/problems.hpp"
#include "runtime/io/hash.hpp"

#include <algorithm>
#include <numeric>
#include <random>

namespace kbrl::episode {

namespace {

/// FNV-1a 64 of text, mixed with a seed: stable across runs and machines.
uint64_t stable_hash(const std::string& text, uint64_t seed) {
  uint64_t h = io::fnv1a_64(text, 1469598103934665603ull ^ (seed * 0x9E3779B97F4A7C15ull));
  // splitmix64's finaliser: FNV alone leaves the high bits of similar ids correlated
  h ^= h >> 30;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 27;
  h *= 0x94D049BB133111EBull;
  return h ^ (h >> 31);
}

bool selected(int32_t number, const std::vector<number_range>& ranges) {
  if (ranges.empty())
    return true;
  for (auto& r : ranges)
    if (number >= r.first && number <= r.last)
      return true;
  return false;
}

} // namespace

caf::expected<std::vector<number_range>> parse_number_ranges(const std::string& text) {
  std::vector<number_range> out;
  size_t pos = 0;
  while (pos < text.size()) {
    auto end = text.find(',', pos);
    auto part = text.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    pos = end == std::string::npos ? text.size() : end + 1;
    if (part.empty())
      continue;
    number_range r;
    char dash = 0;
    int consumed = 0;
    int first = 0, last = 0;
    if (std::sscanf(part.c_str(), "%d%c%d%n", &first, &dash, &last, &consumed) == 3 && dash == '-'
        && consumed == static_cast<int>(part.size()) && first <= last) {
      r = {first, last};
    } else if (std::sscanf(part.c_str(), "%d%n", &first, &consumed) == 1
               && consumed == static_cast<int>(part.size())) {
      r = {first, first};
    } else {
      return make_error(errc::invalid_config, "problem numbers \"" + text + "\": cannot read \""
                                                + part + "\" (expected N or N-M with N <= M)");
    }
    out.push_back(r);
  }
  return out;
}

caf::expected<std::vector<problem>> load_problem_set(const problem_selection& sel) {
  std::vector<problem> out;
  for (auto level : sel.levels) {
    auto problems = eval::load_level(sel.root, level);
    if (!problems)
      return problems.error();
    for (auto& p : *problems)
      if (selected(p.number, sel.numbers)) {
        p.backend = sel.backend;
        p.precision = sel.precision;
        out.push_back(std::move(p));
      }
  }
  if (out.empty())
    return make_error(errc::invalid_config,
                      "no problems selected under " + sel.root + " (check the levels and numbers)");
  return out;
}

problem_split split_problems(const std::vector<problem>& problems, double eval_fraction,
                             uint64_t seed) {
  problem_split out;
  for (auto& p : problems) {
    double u = static_cast<double>(stable_hash(p.id, seed) >> 11) / 9007199254740992.0; // [0,1)
    (u < eval_fraction ? out.eval : out.train).push_back(p);
  }
  if (out.train.empty() && !out.eval.empty()) {
    out.train.push_back(out.eval.back());
    out.eval.pop_back();
  }
  return out;
}

problem_order::problem_order(std::vector<problem> problems, uint64_t seed)
  : problems_(std::move(problems)), seed_(seed) {}

const problem& problem_order::at(uint64_t index) const {
  auto n = problems_.size();
  auto pass = index / n;
  if (pass != shuffled_pass_) {
    permutation_.resize(n);
    std::iota(permutation_.begin(), permutation_.end(), size_t{0});
    std::mt19937_64 rng(seed_ * 1000003ull + pass);
    // Fisher-Yates with the generator's raw output: std::shuffle's use of it is unspecified.
    for (size_t i = n; i > 1; --i)
      std::swap(permutation_[i - 1], permutation_[rng() % i]);
    shuffled_pass_ = pass;
  }
  return problems_[permutation_[index % n]];
}

std::vector<problem> problem_order::next(size_t count) {
  std::vector<problem> out;
  if (problems_.empty())
    return out;
  for (size_t i = 0; i < count; ++i)
    out.push_back(at(cursor_++));
  return out;
}

void problem_order::seek(uint64_t cursor) {
  cursor_ = cursor;
}

curriculum::curriculum(std::vector<curriculum_stage> stages) : stages_(std::move(stages)) {}

const std::vector<int32_t>& curriculum::levels() const {
  static const std::vector<int32_t> all;
  return stages_.empty() ? all : stages_[stage_].levels;
}

bool curriculum::record_step(const std::vector<bool>& correct) {
  if (stages_.empty() || stage_ + 1 >= stages_.size())
    return false;
  auto& s = stages_[stage_];
  ++steps_in_stage_;
  recent_.insert(recent_.end(), correct.begin(), correct.end());
  if (recent_.size() > s.window)
    recent_.erase(recent_.begin(), recent_.end() - static_cast<std::ptrdiff_t>(s.window));
  bool by_steps = s.steps > 0 && steps_in_stage_ >= s.steps;
  bool by_rate = false;
  if (s.correct_rate > 0 && recent_.size() >= s.window) {
    auto hits = std::count(recent_.begin(), recent_.end(), true);
    by_rate = static_cast<double>(hits) / static_cast<double>(recent_.size()) >= s.correct_rate;
  }
  if (!by_steps && !by_rate)
    return false;
  ++stage_;
  steps_in_stage_ = 0;
  recent_.clear();
  return true;
}

} // namespace kbrl::episode
