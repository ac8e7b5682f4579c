#pragma once
// Builds ahead, as an evaluator supervisor keeps them (actors/evaluator_supervisor.hpp): a
// load_inline candidate is built by a CPU builder before a GPU sees it, once per source. This
// book decides where each request goes and what a finished build releases; the actor only
// sends. Item is the supervisor's queued request (with its response promise); tests use plain
// values (test evaluator_supervisor_logic).
//
//   admit(key, item):  built before       -> to_gpus        (the caller queues it for a GPU)
//                      failed before      -> answer_failure (failure_of(key), the caller answers)
//                      being built        -> waits here for that build
//                      new                -> waits here; its key joins the build queue
//   next_build()       the next key to build and its first request
//   finish(key, ...)   built, or the builder could not say (it died or hung): every waiting
//                      request goes to the GPUs; a compile or static-check verdict: every copy
//                      is answered with it, the first with the build time, copies with none

#include "messages/data.hpp"

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace kbrl::eval {

/// Whether a candidate of this backend builds its extensions when its program is loaded
/// (load_inline), so that a CPU builder can do it; Triton and friends compile on the GPU.
inline bool builds_ahead(kernel_backend b) {
  return b == kernel_backend::cuda || b == kernel_backend::hip || b == kernel_backend::torch;
}

enum class build_route : uint8_t { to_gpus, answer_failure, waits_for_build };

/// Whether a builder's verdict says something about the source (built, or a compile or
/// static-check failure, ...), as opposed to the builder itself failing: a timeout, a crash or
/// kbrl's own error, after which the GPUs build the candidate themselves (finish's `usable`).
inline bool build_verdict_usable(const eval_result& res) {
  return res.error != eval_error::timeout && res.error != eval_error::crashed
         && res.error != eval_error::infrastructure;
}

template <class Item>
class build_book {
public:
  struct finished {
    std::vector<Item> to_gpus;                        ///< in arrival order
    std::vector<std::pair<Item, eval_result>> answers; ///< each with its own copy of the verdict
    double build_seconds = 0;                         ///< of a successful build, for the first
  };

  /// Routes `item` of source `key`; the book keeps the item when it waits for a build.
  build_route admit(const std::string& key, Item& item) {
    if (built_.count(key) > 0) {
      ++reused_;
      return build_route::to_gpus;
    }
    if (failures_.count(key) > 0) {
      ++reused_;
      return build_route::answer_failure;
    }
    auto waiting = building_.find(key);
    if (waiting != building_.end()) {
      ++reused_; // a duplicate: it waits for the first copy's build
      waiting->second.push_back(std::move(item));
      return build_route::waits_for_build;
    }
    building_[key].push_back(std::move(item));
    queue_.push_back(key);
    return build_route::waits_for_build;
  }

  /// The verdict of an earlier failed build of `key`, for a request with id `id`.
  eval_result failure_of(const std::string& key, uint64_t id) const {
    auto copy = failures_.at(key);
    copy.id = id;
    return copy;
  }

  /// The next source to build and the request whose program is built, or nullopt.
  std::optional<std::pair<std::string, const Item*>> next_build() {
    if (queue_.empty())
      return std::nullopt;
    auto key = queue_.front();
    queue_.pop_front();
    ++started_;
    return std::make_pair(key, &building_.at(key).front());
  }

  /// The build of `key` ended with `res`; `usable` is false when the builder could not say
  /// (it died, hung, or failed itself). `id_of` gives an item's request id.
  template <class IdOf>
  finished finish(const std::string& key, eval_result res, bool usable, IdOf id_of) {
    finished out;
    auto waiting = std::move(building_[key]);
    building_.erase(key);
    if (usable && !res.compiled
        && (res.error == eval_error::compile || res.error == eval_error::static_check)) {
      // The verdict came from a CPU builder: its time is build time, no evaluator spent any.
      res.build_seconds = res.compile_seconds;
      res.compile_seconds = 0;
      res.total_seconds = 0;
      failures_[key] = res;
      failures_[key].build_seconds = 0; // later duplicates reuse it for free
      for (size_t i = 0; i < waiting.size(); ++i) {
        auto copy = res;
        copy.id = id_of(waiting[i]);
        if (i > 0)
          copy.build_seconds = 0; // duplicates waited for the first copy's build
        out.answers.emplace_back(std::move(waiting[i]), std::move(copy));
      }
      return out;
    }
    if (usable && res.compiled) {
      built_.insert(key);
      out.build_seconds = res.compile_seconds;
    }
    out.to_gpus = std::move(waiting);
    return out;
  }

  /// Requests waiting for a build.
  size_t waiting() const {
    size_t n = 0;
    for (auto& [key, items] : building_)
      n += items.size();
    return n;
  }
  size_t sources_building() const { return building_.size(); }
  uint64_t builds_started() const { return started_; }
  uint64_t builds_reused() const { return reused_; }

private:
  std::deque<std::string> queue_;                     ///< keys waiting for a builder
  std::map<std::string, std::vector<Item>> building_; ///< key -> its requests, first first
  std::set<std::string> built_;                       ///< keys built successfully
  std::map<std::string, eval_result> failures_;       ///< key -> its compile verdict
  uint64_t started_ = 0;
  uint64_t reused_ = 0;
};

} // namespace kbrl::eval
