#include "actors/learner.hpp"

#include "runtime/io/clock.hpp"
#include "runtime/train/learner_core.hpp"
#include "runtime/train/memory_usage.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>

namespace kbrl {

learner_state::learner_state() = default;
learner_state::~learner_state() = default;

namespace {

std::string number(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", x);
  return buf;
}

std::string mebibytes(int64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

std::vector<status_detail> learner_details(learner_state& st) {
  std::vector<status_detail> d;
  d.push_back({"model", st.settings.model.empty() ? "(none)" : st.settings.model});
  d.push_back({"device", train::describe_devices(st.settings)});
  if (!st.core) {
    d.push_back({"error", describe(st.core_failure)});
    return d;
  }
  const auto& r = st.core->report();
  d.push_back({"policy version", std::to_string(r.version)});
  d.push_back({"step", std::to_string(r.step)});
  if (r.last) {
    const auto& s = *r.last;
    d.push_back({"loss", number(s.loss)});
    d.push_back({"policy loss", number(s.policy_loss)});
    d.push_back({"kl", number(s.kl)});
    d.push_back({"gradient norm", number(s.grad_norm)});
    d.push_back({"learning rate", number(s.lr)});
    d.push_back({"clip fraction", number(s.clip_fraction)});
    d.push_back({"tokens per second", number(r.tokens_per_second)});
    d.push_back({"last step", std::to_string(s.sequences) + " sequences, "
                                + std::to_string(s.tokens) + " tokens in "
                                + std::to_string(s.micro_batches) + " micro-batches, "
                                + number(s.seconds) + " s"});
  }
  d.push_back({"mean score (last batch)", number(r.mean_score)});
  d.push_back({"batches trained", std::to_string(r.batches_trained)});
  d.push_back({"batches refused", std::to_string(r.batches_refused)});
  d.push_back({"batches without signal", std::to_string(r.batches_without_signal)});
  d.push_back({"groups dropped (equal rewards)", std::to_string(r.groups_dropped)});
  std::string versions;
  for (const auto& [version, turns] : r.turns_by_version)
    versions += (versions.empty() ? "v" : ", v") + std::to_string(version) + ": "
                + std::to_string(turns);
  d.push_back({"turns trained by sampling version", versions.empty() ? "none" : versions});
  d.push_back({"trainable parameters", std::to_string(r.trainable_parameters)});
  d.push_back({"memory: resident", mebibytes(train::resident_bytes())});
  for (int g : st.settings.gpus)
    if (auto gpu = train::cuda_memory(g))
      d.push_back({"memory: cuda:" + std::to_string(g) + " (device-wide)",
                   mebibytes(gpu->first) + " of " + mebibytes(gpu->second)});
  if (st.core && st.core->replicas().ranks() > 1)
    d.push_back({"data parallel", std::to_string(st.core->replicas().ranks()) + " replicas over "
                                    + st.core->replicas().backend()});
  d.push_back({"memory: trainer state", mebibytes(r.state_bytes)});
  d.push_back({"memory: base weights", mebibytes(r.weight_bytes)});
  d.push_back({"last checkpoint", r.last_checkpoint.empty() ? "none" : r.last_checkpoint});
  if (!r.resumed_from.empty())
    d.push_back({"resumed from", r.resumed_from});
  if (!r.checkpoint_error.empty())
    d.push_back({"checkpoint error", r.checkpoint_error});
  d.push_back({"subscribers", std::to_string(st.subscribers.size())});
  return d;
}

caf::error no_core(learner_state& st) {
  return make_error(errc::not_supported,
                    st.stats.name + " has no model to train: " + describe(st.core_failure));
}

/// The scalars of the step just trained, for the metrics sink.
std::vector<metric_record> training_records(const train::learner_report& r, uint64_t step,
                                            uint64_t version, const std::string& source) {
  const auto& s = *r.last;
  const auto now = now_unix_ms();
  std::vector<metric_record> out;
  for (auto [name, value] :
       {std::pair{"learner/loss", s.loss}, std::pair{"learner/policy_loss", s.policy_loss},
        std::pair{"learner/kl", s.kl}, std::pair{"learner/clip_fraction", s.clip_fraction},
        std::pair{"learner/mean_ratio", s.mean_ratio}, std::pair{"learner/max_ratio", s.max_ratio},
        std::pair{"learner/grad_norm", s.grad_norm}, std::pair{"learner/lr", s.lr},
        std::pair{"learner/tokens_per_second", r.tokens_per_second},
        std::pair{"learner/tokens", static_cast<double>(s.tokens)},
        std::pair{"learner/sequences", static_cast<double>(s.sequences)},
        std::pair{"learner/seconds", s.seconds},
        std::pair{"learner/version", static_cast<double>(version)}})
    out.push_back({step, name, value, now, source, {}});
  if (!r.advantages.empty())
    out.push_back({step, "hist/advantage", static_cast<double>(r.advantages.size()), now, source,
                   r.advantages});
  return out;
}

} // namespace

learner_actor::behavior_type learner(learner_pointer self, actor_stats stats,
                                     train::learner_settings settings, metrics_actor metrics) {
  auto& st = self->state;
  st.stats = std::move(stats);
  st.settings = std::move(settings);
  st.metrics = std::move(metrics);
  try {
    auto core = train::learner_core::start(st.settings);
    if (core) {
      st.core = std::move(*core);
      spdlog::info("{} ready: {} on {}, {} trainable parameters, policy version {}{}",
                   st.stats.name, st.settings.model,
                   train::describe_devices(st.settings),
                   st.core->report().trainable_parameters, st.core->latest().version,
                   st.core->report().resumed_from.empty()
                     ? ""
                     : " (resumed from " + st.core->report().resumed_from + ")");
    } else {
      st.core_failure = core.error();
    }
  } catch (const std::exception& e) { // c10::Error and friends stop here
    st.core_failure = make_error(errc::internal, std::string("starting the learner: ") + e.what());
  }
  if (!st.core) {
    st.stats.last_error = describe(st.core_failure);
    spdlog::error("{} cannot train: {}", st.stats.name, st.stats.last_error);
  }
  self->set_down_handler([self](const caf::down_msg& msg) {
    auto& subs = self->state.subscribers;
    subs.erase(std::remove_if(subs.begin(), subs.end(),
                              [&](const policy_listener_actor& a) {
                                return a.address() == msg.source;
                              }),
               subs.end());
  });
  return {
    [self](status_atom) -> actor_status {
      auto& st = self->state;
      st.stats.count();
      return st.stats.snapshot(st.core ? actor_health::ok : actor_health::failed,
                               st.core ? "idle" : "failed", self->mailbox().size(),
                               learner_details(st), {"checkpoint"});
    },
    [self](control_atom, const std::string& verb,
           const std::vector<std::string>&) -> caf::result<std::string> {
      auto& st = self->state;
      st.stats.count();
      if (verb != "checkpoint")
        return make_error(errc::not_supported,
                          st.stats.name + " accepts the control verb checkpoint, got '" + verb
                            + "'");
      if (!st.core)
        return no_core(st);
      auto entry = st.core->checkpoint();
      if (!entry)
        return entry.error();
      return "wrote checkpoint " + st.core->report().last_checkpoint + " at step "
             + std::to_string(entry->step);
    },
    [self](train_atom, trajectory_batch& batch) -> caf::result<policy_update> {
      auto& st = self->state;
      st.stats.count();
      if (!st.core)
        return no_core(st);
      const uint64_t before = st.core->latest().version;
      const uint64_t step = batch.coordinator_step;
      caf::expected<policy_update> update{caf::error{}};
      try {
        update = st.core->train(std::move(batch));
      } catch (const std::exception& e) {
        update = make_error(errc::internal, std::string("training step: ") + e.what());
      }
      if (!update) {
        st.stats.last_error = describe(update.error());
        spdlog::warn("{}: {}", st.stats.name, st.stats.last_error);
        return update.error();
      }
      if (update->version != before) {
        const auto& r = st.core->report();
        if (r.last && st.metrics)
          caf::anon_send(st.metrics, metrics_atom::value,
                         training_records(r, step, update->version, st.stats.name));
        if (r.last)
          spdlog::info("{} step {}: loss {:.4g}, gradient norm {:.3g}, {:.0f} tokens/s; policy "
                       "version {}",
                       st.stats.name, r.step, r.last->loss, r.last->grad_norm,
                       r.tokens_per_second, update->version);
        // Anonymous: a push naming this detached actor could sit in the middleman for a
        // sampler on another node past shutdown, and CAF 0.17 then waits forever for this
        // actor's thread (see relay_from in node.cpp). The samplers do not answer pushes.
        for (auto& sub : st.subscribers)
          caf::anon_send(sub, policy_atom::value, *update);
      }
      return std::move(*update);
    },
    [self](policy_atom) -> caf::result<policy_update> {
      auto& st = self->state;
      st.stats.count();
      if (!st.core)
        return no_core(st);
      return st.core->latest();
    },
    [self](subscribe_atom, const policy_listener_actor& handle) {
      auto& st = self->state;
      st.stats.count();
      if (!handle)
        return;
      for (auto& s : st.subscribers)
        if (s == handle)
          return;
      st.subscribers.push_back(handle);
      self->monitor(handle);
      if (st.core)
        caf::anon_send(handle, policy_atom::value, st.core->latest());
    },
  };
}

} // namespace kbrl
