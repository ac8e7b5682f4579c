#include "runtime/episode/stage_clock.hpp"

#include <algorithm>
#include <chrono>

namespace kbrl::episode {

const char* to_string(stage s) {
  switch (s) {
    case stage::sampling: return "sampling";
    case stage::evaluating: return "evaluating";
    case stage::training: return "training";
    case stage::publishing: return "publishing";
  }
  return "?";
}

double stage_clock::steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
    .count();
}

stage_clock::stage_clock(time_source now) : now_(std::move(now)) {
  double t = now_();
  for (auto& s : stages_)
    s.last = t;
}

void stage_clock::tracker::advance(double t) {
  if (t > last) {
    summed += static_cast<double>(active) * (t - last);
    busy += active > 0 ? t - last : 0;
  }
  last = std::max(last, t);
}

stage_clock::tracker stage_clock::tracker::at(double t) const {
  tracker copy = *this;
  copy.advance(t);
  return copy;
}

void stage_clock::begin(stage s, uint64_t round) {
  double t = now_();
  std::lock_guard<std::mutex> lock(mutex_);
  auto& total = stages_[static_cast<int>(s)];
  total.advance(t);
  ++total.active;
  ++total.pieces;
  auto [it, fresh] = rounds_.try_emplace({round, static_cast<int>(s)});
  if (fresh)
    it->second.last = t;
  it->second.advance(t);
  ++it->second.active;
  ++it->second.pieces;
}

void stage_clock::end(stage s, uint64_t round) {
  double t = now_();
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = rounds_.find({round, static_cast<int>(s)});
  if (it == rounds_.end() || it->second.active == 0)
    return; // forgotten round, or an end without its begin
  it->second.advance(t);
  --it->second.active;
  auto& total = stages_[static_cast<int>(s)];
  total.advance(t);
  if (total.active > 0)
    --total.active;
}

double stage_clock::busy_seconds(stage s) const {
  double t = now_();
  std::lock_guard<std::mutex> lock(mutex_);
  return stages_[static_cast<int>(s)].at(t).busy;
}

stage_clock::usage stage_clock::round_usage(stage s, uint64_t round) const {
  double t = now_();
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = rounds_.find({round, static_cast<int>(s)});
  if (it == rounds_.end())
    return {};
  auto now = it->second.at(t);
  return {now.summed, now.busy, now.pieces};
}

void stage_clock::forget(uint64_t round) {
  std::lock_guard<std::mutex> lock(mutex_);
  double t = now_();
  for (int s = 0; s < static_cast<int>(stage_count); ++s) {
    auto it = rounds_.find({round, s});
    if (it == rounds_.end())
      continue;
    // Work still under way (an episode that outlived its step) stays in the stage's busy time
    // until now and stops counting there: its end() will find no round and be ignored.
    auto& total = stages_[s];
    total.advance(t);
    total.active -= std::min(total.active, it->second.active);
    rounds_.erase(it);
  }
}

} // namespace kbrl::episode
