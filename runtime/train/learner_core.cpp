#include "runtime/train/learner_core.hpp"

#include "messages/errors.hpp"
#include "runtime/io/file_io.hpp"
#include "runtime/model/load_policy.hpp"
#include "runtime/model/lora_adapter.hpp"
#include "runtime/rl/advantages.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdio>
#include <limits>

namespace kbrl::train {

namespace fs = std::filesystem;

namespace {

std::string version_dir_name(uint64_t version) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "v%06llu", static_cast<unsigned long long>(version));
  return buf;
}

/// The versions whose directories exist under `root` ("v000012"), oldest first.
std::deque<uint64_t> existing_versions(const fs::path& root) {
  std::vector<uint64_t> found;
  std::error_code ec;
  for (auto it = fs::directory_iterator(root, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    const auto name = it->path().filename().string();
    if (name.size() > 1 && name[0] == 'v'
        && name.find_first_not_of("0123456789", 1) == std::string::npos)
      found.push_back(std::stoull(name.substr(1)));
  }
  std::sort(found.begin(), found.end());
  return {found.begin(), found.end()};
}

} // namespace

fs::path learner_core::checkpoint_root() const {
  return fs::path(settings_.run_dir) / "learner" / "checkpoints";
}

fs::path learner_core::policy_root() const {
  return fs::path(settings_.run_dir) / "learner" / "policy";
}

caf::expected<std::unique_ptr<learner_core>> learner_core::start(const learner_settings& s) {
  if (s.model.empty())
    return make_error(errc::invalid_config,
                      "learner.model and sampler.model are empty: the learner needs the model "
                      "directory or Hugging Face id it trains an adapter for");
  std::vector<int> devices = s.gpus;
  if (devices.empty())
    devices.assign(static_cast<std::size_t>(std::max(s.cpu_ranks, 1)), -1);
  std::vector<std::unique_ptr<model::transformer>> replicas;
  for (int gpu : devices) {
    auto loaded = model::load_policy(s.model, {s.dtype, gpu});
    if (!loaded)
      return loaded.error();
    replicas.push_back(std::make_unique<model::transformer>(std::move(*loaded)));
  }
  return start_with(std::move(replicas), s.model, s);
}

caf::expected<std::unique_ptr<learner_core>>
learner_core::start_with(std::unique_ptr<model::transformer> model, std::string model_name,
                         const learner_settings& s) {
  std::vector<std::unique_ptr<model::transformer>> one;
  one.push_back(std::move(model));
  return start_with(std::move(one), std::move(model_name), s);
}

caf::expected<std::unique_ptr<learner_core>>
learner_core::start_with(std::vector<std::unique_ptr<model::transformer>> replicas,
                         std::string model_name, const learner_settings& s) {
  std::unique_ptr<learner_core> core(new learner_core());
  core->settings_ = s;
  core->model_name_ = std::move(model_name);
  group_options group;
  group.timeout_s = s.collective_timeout_s;
  auto trainer = s.trainer;
  if (trainer.base_model.empty())
    trainer.base_model = core->model_name_; // the adapters name their base (PEFT loads it)
  auto dp = data_parallel_trainer::create(std::move(replicas), trainer, group);
  if (!dp)
    return dp.error();
  core->replicas_ = std::move(*dp);
  if (s.resume) {
    auto latest = latest_checkpoint(core->checkpoint_root());
    if (!latest)
      return latest.error();
    if (*latest) {
      const auto dir = core->checkpoint_root() / (*latest)->dir;
      auto cursor = load_checkpoint(dir, core->replicas_->primary());
      if (!cursor)
        return cursor.error();
      if (auto ok = core->replicas_->sync_replicas(); !ok)
        return ok.error();
      core->cursor_ = *cursor;
      core->report_.resumed_from = dir.string();
      core->report_.last_checkpoint = dir.string();
    }
  }
  // Versions past the resumed step were trained after the last checkpoint of an earlier life:
  // they are not this run's history.
  core->published_ = existing_versions(core->policy_root());
  const auto step = static_cast<uint64_t>(core->trainer().steps_done());
  while (!core->published_.empty() && core->published_.back() > step) {
    std::error_code ignored;
    fs::remove_all(core->policy_root() / version_dir_name(core->published_.back()), ignored);
    core->published_.pop_back();
  }
  const auto& t = core->trainer();
  core->report_.trainable_parameters = t.lora().size();
  core->report_.state_bytes =
    4 * t.lora().size() * static_cast<int64_t>(t.parameters().element_size());
  core->report_.weight_bytes = core->replicas_->model(0).weight_bytes();
  core->report_.step = t.steps_done();
  core->report_.batches_trained = core->cursor_.batches_trained;
  if (auto ok = core->publish(); !ok)
    return ok.error();
  return core;
}

caf::expected<void> learner_core::publish() {
  const uint64_t version = static_cast<uint64_t>(trainer().steps_done());
  const auto dir = fs::absolute(policy_root() / version_dir_name(version));
  // A directory of this version from an earlier life holds other weights if that life trained
  // past its last checkpoint: always write the current ones.
  if (auto ok = model::write_lora_adapter(dir, trainer().adapter()); !ok)
    return ok.error();
  policy_update update;
  update.version = version;
  update.learner_step = version;
  update.base_model = model_name_;
  update.adapter_dir = dir.string();
  if (settings_.publish_bytes) {
    auto bytes = io::read_text_file(dir / model::lora_weights_name);
    if (!bytes)
      return bytes.error();
    update.adapter_bytes.assign(bytes->begin(), bytes->end());
    auto config = io::read_text_file(dir / model::lora_config_name);
    if (!config)
      return config.error();
    update.adapter_config = std::move(*config);
  }
  latest_ = std::move(update);
  report_.version = version;
  cursor_.policy_version = version;
  if (published_.empty() || published_.back() != version)
    published_.push_back(version);
  // Keep the versions a lagging sampler may still load.
  const std::size_t keep = static_cast<std::size_t>(
    std::min<uint64_t>(settings_.max_staleness + 2, std::numeric_limits<uint32_t>::max()));
  while (published_.size() > keep) {
    std::error_code ignored;
    fs::remove_all(policy_root() / version_dir_name(published_.front()), ignored);
    published_.pop_front();
  }
  return {};
}

caf::expected<void> learner_core::check_staleness(const trajectory_batch& batch) const {
  const uint64_t current = latest_.version;
  uint64_t oldest = std::numeric_limits<uint64_t>::max();
  std::vector<std::string> problems;
  for (const auto& t : batch.trajectories)
    for (const auto& u : t.turns) {
      oldest = std::min(oldest, u.policy_version);
      if (u.policy_version > current && problems.size() < 5)
        problems.push_back("trajectory " + std::to_string(t.id) + " turn "
                           + std::to_string(u.index) + " claims policy version "
                           + std::to_string(u.policy_version)
                           + ", newer than the learner's " + std::to_string(current));
    }
  if (oldest != std::numeric_limits<uint64_t>::max() && current - std::min(oldest, current)
                                                          > settings_.max_staleness)
    problems.push_back("batch " + std::to_string(batch.id) + " holds turns of policy version "
                       + std::to_string(oldest) + ", " + std::to_string(current - oldest)
                       + " versions behind the learner's " + std::to_string(current)
                       + " (learner.max_staleness = " + std::to_string(settings_.max_staleness)
                       + ")");
  if (!problems.empty()) {
    std::string text;
    for (const auto& p : problems)
      text += (text.empty() ? "" : "\n") + p;
    return make_error(errc::invalid_argument, text);
  }
  return {};
}

caf::expected<policy_update> learner_core::train(trajectory_batch batch) {
  if (auto ok = check_staleness(batch); !ok) {
    ++report_.batches_refused;
    return ok.error();
  }
  auto trajectories = std::move(batch.trajectories);
  auto advantages = rl::compute_advantages(trajectories, settings_.advantage);
  if (!advantages) {
    ++report_.batches_refused;
    return advantages.error();
  }
  const bool need_logprobs = settings_.trainer.loss.kind != rl::policy_loss_kind::supervised;
  auto samples = training_samples_from(trajectories, need_logprobs);
  if (!samples) {
    ++report_.batches_refused;
    return samples.error();
  }
  auto consumed = [&] {
    ++cursor_.batches_trained;
    cursor_.last_batch_id = batch.id;
    cursor_.last_coordinator_step = batch.coordinator_step;
    report_.batches_trained = cursor_.batches_trained;
    report_.groups_dropped += advantages->dropped_groups.size();
    report_.mean_score = advantages->mean_score;
    report_.advantages.clear();
    for (const auto& t : trajectories)
      for (const auto& turn : t.turns)
        report_.advantages.push_back(turn.advantage);
  };
  if (samples->empty()) {
    consumed();
    ++report_.batches_without_signal;
    return latest_;
  }
  auto stats = replicas_->step(*samples);
  if (!stats) {
    if (stats.error().code() != static_cast<uint8_t>(errc::internal))
      ++report_.batches_refused;
    return stats.error();
  }
  consumed();
  report_.step = stats->step;
  report_.last = *stats;
  report_.tokens_per_second =
    stats->seconds > 0 ? static_cast<double>(stats->tokens) / stats->seconds : 0;
  for (const auto& s : *samples)
    ++report_.turns_by_version[s.policy_version];
  while (report_.turns_by_version.size() > 16)
    report_.turns_by_version.erase(report_.turns_by_version.begin());
  if (auto ok = publish(); !ok)
    return ok.error();
  // A failed checkpoint does not undo the step: it is reported, and the next one tries again.
  if (settings_.checkpoint_every > 0 && stats->step % settings_.checkpoint_every == 0)
    (void)checkpoint();
  return latest_;
}

caf::expected<checkpoint_entry> learner_core::checkpoint() {
  auto entry = save_checkpoint(checkpoint_root(), trainer(), cursor_, settings_.keep_checkpoints);
  if (entry) {
    report_.last_checkpoint = (checkpoint_root() / entry->dir).string();
    report_.checkpoint_error.clear();
  } else {
    report_.checkpoint_error = describe(entry.error());
  }
  return entry;
}

} // namespace kbrl::train
