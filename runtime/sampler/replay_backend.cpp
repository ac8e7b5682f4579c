#include "runtime/sampler/replay_backend.hpp"

#include "messages/errors.hpp"

#include <simdjson.h>

#include <atomic>
#include <fstream>
#include <mutex>
#include <optional>

namespace kbrl::sampling {

std::string normalise_problem_key(std::string key) {
  if (key.size() > 3 && key.compare(key.size() - 3, 3, ".py") == 0)
    key.resize(key.size() - 3);
  return key;
}

std::string problem_of_trace(const std::string& trace) {
  return trace.substr(0, trace.find(' '));
}

caf::expected<recorded_completions> load_recorded_completions(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    return make_error(errc::invalid_config,
                      "sampler.replay_completions: cannot open '" + path + "'");
  recorded_completions out;
  simdjson::dom::parser parser;
  std::string line;
  size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos)
      continue;
    simdjson::dom::element row;
    std::string_view problem, completion;
    if (parser.parse(line).get(row) || row["problem"].get(problem)
        || row["completion"].get(completion))
      return make_error(errc::invalid_config,
                        path + " line " + std::to_string(number)
                          + ": expected {\"problem\": \"level1/19_ReLU\", \"completion\": "
                            "\"...\"} (strings)");
    out.by_problem[normalise_problem_key(std::string(problem))].emplace_back(completion);
    ++out.lines;
  }
  if (out.lines == 0)
    return make_error(errc::invalid_config, path + ": no recorded completions in it");
  return out;
}

namespace {

class replay_backend final : public generation_backend {
public:
  replay_backend(std::unique_ptr<generation_backend> inner, recorded_completions c,
                 std::string path)
    : inner_(std::move(inner)), recorded_(std::move(c)), path_(std::move(path)) {
    for (auto& [key, list] : recorded_.by_problem) {
      auto slash = key.rfind('/');
      if (slash != std::string::npos)
        by_name_.emplace(key.substr(slash + 1), key);
    }
  }

  // The inner backend's threads call back into this object: stop them first.
  ~replay_backend() override { inner_.reset(); }

  std::string kind() const override { return inner_->kind() + "+replay"; }
  std::string model() const override { return inner_->model(); }

  void submit(generation_request request, done_fn done) override {
    auto problem = normalise_problem_key(problem_of_trace(request.trace));
    inner_->submit(std::move(request), [this, problem, done = std::move(done)](
                                         generation_result res) {
      if (res.finish != finish_reason::error) {
        if (auto text = next(problem))
          res.completion_text = std::move(*text);
        else
          ++unmatched_;
      }
      done(std::move(res));
    });
  }

  caf::expected<void> apply_policy(const policy_update& update) override {
    return inner_->apply_policy(update);
  }

  backend_stats stats() const override {
    auto s = inner_->stats();
    std::string mine = "replaying " + std::to_string(recorded_.lines) + " completions of "
                       + std::to_string(recorded_.by_problem.size()) + " problems from " + path_
                       + ", " + std::to_string(replayed_.load()) + " replayed, "
                       + std::to_string(unmatched_.load()) + " without a recorded completion";
    s.detail = s.detail.empty() ? mine : s.detail + "; " + mine;
    return s;
  }

private:
  std::optional<std::string> next(const std::string& problem) {
    std::lock_guard<std::mutex> lock(mutex_);
    // The id itself, else the file's key is the bare name, else the request's is.
    auto slash = problem.rfind('/');
    auto name = problem.substr(slash == std::string::npos ? 0 : slash + 1);
    auto it = recorded_.by_problem.find(problem);
    if (it == recorded_.by_problem.end())
      it = recorded_.by_problem.find(name);
    if (it == recorded_.by_problem.end()) {
      auto full = by_name_.find(name);
      if (full == by_name_.end())
        return std::nullopt;
      it = recorded_.by_problem.find(full->second);
    }
    auto& turn = turn_[it->first];
    ++replayed_;
    return it->second[turn++ % it->second.size()];
  }

  std::unique_ptr<generation_backend> inner_;
  recorded_completions recorded_;
  std::string path_;
  std::map<std::string, std::string> by_name_; ///< "19_ReLU" -> "level1/19_ReLU"
  std::mutex mutex_;
  std::map<std::string, size_t> turn_;         ///< next completion of each problem
  std::atomic<uint64_t> replayed_{0}, unmatched_{0};
};

} // namespace

std::unique_ptr<generation_backend> make_replay_backend(std::unique_ptr<generation_backend> inner,
                                                        recorded_completions completions,
                                                        std::string source_path) {
  return std::make_unique<replay_backend>(std::move(inner), std::move(completions),
                                          std::move(source_path));
}

} // namespace kbrl::sampling
