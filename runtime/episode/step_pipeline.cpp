#include "runtime/episode/step_pipeline.hpp"

#include "runtime/episode/step_summary.hpp"
#include "runtime/io/clock.hpp"

#include <algorithm>

namespace kbrl::episode {

double metric_value(const std::vector<metric_record>& records, const std::string& name,
                    double fallback) {
  for (auto& r : records)
    if (r.name == name)
      return r.value;
  return fallback;
}

uint64_t round_launch::group_id(size_t problem_index) const {
  return (eval ? 1'000'000'000'000ull : 0) + step * 100'000 + problem_index;
}

step_pipeline::step_pipeline(coordinator_settings settings, std::vector<problem> train,
                             std::vector<problem> held_out)
  : settings_(std::move(settings)),
    order_(std::move(train), settings_.seed),
    held_out_(std::move(held_out)),
    failed_steps_(settings_.max_failed_steps) {}

void step_pipeline::resume(const coordinator_checkpoint& checkpoint) {
  resumed_ = true;
  step_ = checkpoint.step;
  policy_version_ = checkpoint.policy_version;
  order_.seek(checkpoint.cursor);
}

start_outcome step_pipeline::begin(std::optional<uint64_t> learner_version) {
  start_outcome out;
  out.recorded_version = policy_version_;
  if (learner_version && resumed_ && *learner_version == policy_version_ + 1) {
    // The learner trained the step after the last committed one; the coordinator stopped before
    // committing it. Training it again would count its problems twice: it counts as done.
    order_.next(settings_.problems_per_step);
    ++step_;
    policy_version_ = *learner_version;
    out.kind = start_kind::learner_trained_next_step;
    out.checkpoint_changed = true;
  } else if (learner_version && *learner_version != policy_version_) {
    policy_version_ = *learner_version;
    out.kind = start_kind::learner_version_differs;
  }
  launched_ = step_;
  first_step_ = step_;
  starting_ = false;
  return out;
}

round_launch step_pipeline::launch(step_round r, std::vector<problem> problems,
                                   size_t group_size) {
  r.expected = problems.size() * group_size;
  r.sampled_from = policy_version_;
  round_launch out;
  out.key = r.key;
  out.step = r.step;
  out.eval = r.eval;
  out.problems = std::move(problems);
  out.group_size = group_size;
  // The staleness bound of the header: ask for at least the version published now.
  out.min_policy_version = policy_version_;
  auto key = r.key;
  rounds_.emplace(key, std::move(r));
  return out;
}

std::vector<round_launch> step_pipeline::launches() {
  std::vector<round_launch> out;
  while (!starting_ && !paused_ && !failed_) {
    uint64_t next = launched_ + 1;
    if (settings_.steps > 0 && next > settings_.steps)
      break;
    if (next > step_ + 1 + window())
      break;
    if (!async() && held_out_under_way())
      break;
    step_round r;
    r.key = next;
    r.step = next;
    auto problems = order_.next(settings_.problems_per_step);
    r.cursor_after = order_.cursor();
    launched_ = next;
    out.push_back(launch(std::move(r), std::move(problems), settings_.group_size));
  }
  return out;
}

arrival step_pipeline::add(trajectory t, uint64_t* round_key) {
  auto key = t.id / trajectory_id_stride;
  auto it = rounds_.find(key);
  if (it == rounds_.end())
    return arrival::unknown_round;
  if (round_key)
    *round_key = key;
  auto& r = it->second;
  r.collected.push_back(std::move(t));
  if (r.collected.size() < r.expected)
    return arrival::waiting;
  return r.eval ? arrival::held_out_complete : arrival::step_complete;
}

/// Drops trajectories with a turn sampled more than max_staleness versions before the current
/// policy (the learner would refuse the batch), and groups left with fewer than two members.
std::vector<trajectory> step_pipeline::drop_stale(std::vector<trajectory> in,
                                                  uint64_t& dropped) const {
  uint64_t floor = policy_version_ - std::min(policy_version_, settings_.max_staleness);
  std::map<uint64_t, std::vector<trajectory>> groups;
  for (auto& t : in) {
    bool stale = std::any_of(t.turns.begin(), t.turns.end(),
                             [&](const turn& u) { return u.policy_version < floor; });
    if (stale)
      ++dropped;
    else
      groups[t.group_id].push_back(std::move(t));
  }
  std::vector<trajectory> out;
  for (auto& [id, members] : groups) {
    if (members.size() < 2 && settings_.group_size >= 2) {
      dropped += members.size(); // no group left to compare with
      continue;
    }
    for (auto& t : members)
      out.push_back(std::move(t));
  }
  return out;
}

std::optional<training_order> step_pipeline::next_training(const std::string& source) {
  if (starting_ || training_ || publishing_)
    return std::nullopt;
  auto it = rounds_.find(step_ + 1);
  if (it == rounds_.end() || it->second.collected.size() < it->second.expected)
    return std::nullopt;
  auto& r = it->second;
  training_order order;
  order.key = r.key;
  r.summary = summarize_step(r.collected, r.step, source, policy_version_);
  last_reward_ = metric_value(r.summary, "reward/mean");
  last_correct_ = metric_value(r.summary, "rate/correct");
  auto kept = drop_stale(r.collected, r.stale_dropped);
  stale_dropped_ += r.stale_dropped;
  order.stale_dropped = r.stale_dropped;
  if (settings_.drop_flat_groups) {
    auto f = drop_flat_groups(std::move(kept));
    kept = std::move(f.kept);
    order.flat_groups_dropped = f.groups_dropped;
    groups_dropped_ += f.groups_dropped;
  }
  auto ms = r.summary.empty() ? now_unix_ms() : r.summary.front().unix_ms;
  r.summary.push_back({r.step, "groups/dropped_flat",
                       static_cast<double>(order.flat_groups_dropped), ms, source, {}});
  r.summary.push_back({r.step, "trajectories/dropped_stale",
                       static_cast<double>(r.stale_dropped), ms, source, {}});
  order.batch = std::move(kept);
  training_ = !order.batch.empty();
  return order;
}

void step_pipeline::trained(uint64_t version) {
  training_ = false;
  publishing_ = true;
  policy_version_ = version;
}

void step_pipeline::training_failed() { training_ = false; }

void step_pipeline::published() { publishing_ = false; }

std::optional<step_round> step_pipeline::commit(uint64_t key) {
  auto it = rounds_.find(key);
  if (it == rounds_.end())
    return std::nullopt;
  auto r = std::move(it->second);
  rounds_.erase(it);
  step_ = r.step;
  return r;
}

std::optional<std::string> step_pipeline::record_health(const step_health& health,
                                                        uint64_t step) {
  if (!failed_steps_.record(health))
    return std::nullopt;
  failed_ = true;
  return "every episode of the last " + std::to_string(failed_steps_.in_a_row())
         + " steps failed (rl.max_failed_steps), so nothing can be learned; step "
         + std::to_string(step) + ": " + health.reasons;
}

bool step_pipeline::held_out_due() const {
  return !failed_ && settings_.eval_every > 0 && step_ % settings_.eval_every == 0
         && !held_out_.empty();
}

round_launch step_pipeline::held_out() {
  step_round r;
  r.key = held_out_round_base + step_;
  r.step = step_;
  r.eval = true;
  return launch(std::move(r), held_out_, 1);
}

std::optional<step_round> step_pipeline::finish_held_out(uint64_t key) {
  auto it = rounds_.find(key);
  if (it == rounds_.end() || !it->second.eval)
    return std::nullopt;
  auto r = std::move(it->second);
  rounds_.erase(it);
  return r;
}

bool step_pipeline::resume_launching() {
  if (!paused_)
    return false;
  paused_ = false;
  return true;
}

bool step_pipeline::held_out_under_way() const {
  return std::any_of(rounds_.begin(), rounds_.end(),
                     [](const auto& kv) { return kv.second.eval; });
}

uint64_t step_pipeline::steps_in_flight_besides(uint64_t key) const {
  uint64_t n = 0;
  for (auto& [k, r] : rounds_)
    n += !r.eval && k != key ? 1 : 0;
  return n;
}

coordinator_phase step_pipeline::phase() const {
  bool steps_under_way = std::any_of(rounds_.begin(), rounds_.end(),
                                     [](const auto& kv) { return !kv.second.eval; });
  if (failed_)
    return coordinator_phase::failed;
  if (starting_)
    return coordinator_phase::starting;
  if (training_)
    return coordinator_phase::training;
  if (publishing_)
    return coordinator_phase::publishing;
  if (steps_under_way)
    return coordinator_phase::episodes;
  if (held_out_under_way())
    return coordinator_phase::evaluating;
  if (settings_.steps > 0 && step_ >= settings_.steps)
    return coordinator_phase::finished;
  if (paused_)
    return coordinator_phase::paused;
  return coordinator_phase::idle;
}

episode_settings step_pipeline::episode_settings_for(const round_launch& round) const {
  auto s = settings_.episodes;
  s.round = round.key;
  if (round.eval)
    s.sampling.temperature = 0; // held-out problems: greedy
  // In sync mode every sampler confirmed this version already, except one that joined (or came
  // back) since: it gets the policy from the learner when it is subscribed, and must not sample
  // before.
  s.min_policy_version = round.min_policy_version;
  return s;
}

coordinator_checkpoint step_pipeline::checkpoint(uint64_t cursor) const {
  return {step_, cursor, policy_version_};
}

} // namespace kbrl::episode
