#include "actors/sampler.hpp"

#include "runtime/sampler/builtin_backend.hpp"
#include "runtime/sampler/remote_backend.hpp"
#include "runtime/sampler/replay_backend.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <optional>

namespace kbrl {

namespace {

using clock_type = std::chrono::steady_clock;
constexpr auto throughput_window = std::chrono::seconds(60);

/// Sampled tokens per second over the last minute (or since the first answer in it).
double tokens_per_second(sampler_state& st) {
  auto now = clock_type::now();
  while (!st.recent_tokens.empty() && now - st.recent_tokens.front().first > throughput_window)
    st.recent_tokens.pop_front();
  if (st.recent_tokens.size() < 2)
    return 0;
  size_t tokens = 0;
  for (auto& [at, n] : st.recent_tokens)
    tokens += n;
  auto span = std::chrono::duration<double>(now - st.recent_tokens.front().first).count();
  return span > 0 ? static_cast<double>(tokens) / span : 0;
}

std::string fixed(double x, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return buf;
}

std::vector<status_detail> sampler_details(sampler_state& st) {
  std::vector<status_detail> d;
  d.push_back({"backend", st.settings.backend});
  d.push_back({"device", st.settings.gpu < 0 ? "cpu" : "cuda:" + std::to_string(st.settings.gpu)});
  if (!st.backend) {
    d.push_back({"error", st.backend_error});
    return d;
  }
  auto b = st.backend->stats();
  d.push_back({"model", st.backend->model()});
  d.push_back({"queue", std::to_string(st.held.size()) + " / "
                          + std::to_string(st.settings.queue_capacity)});
  d.push_back({"batch occupancy", std::to_string(b.active) + " / " + std::to_string(b.slots)});
  d.push_back({"waiting in backend", std::to_string(b.waiting)});
  d.push_back({"waiting for a newer policy", std::to_string(st.waiting_for_policy.size())});
  d.push_back({"tokens per second (last minute)", fixed(tokens_per_second(st), 1)});
  d.push_back({"policy version", std::to_string(b.policy_version)});
  d.push_back({"completions", std::to_string(b.completions)});
  d.push_back({"failures", std::to_string(b.failures)});
  d.push_back({"refused busy", std::to_string(st.refused_busy)});
  if (!b.detail.empty())
    d.push_back({"detail", b.detail});
  return d;
}

} // namespace

/// Hands a held request to the backend; its answer comes back as (generate, key, result).
void start_generation(sampler_pointer self, uint64_t key, generation_request req) {
  auto me = caf::actor_cast<caf::weak_actor_ptr>(self);
  self->state.backend->submit(std::move(req), [me, key](generation_result res) {
    if (auto strong = caf::actor_cast<caf::strong_actor_ptr>(me))
      caf::anon_send(caf::actor_cast<sampler_behavior>(strong), generate_atom::value, key,
                     std::move(res));
  });
}

sampler_state::~sampler_state() {
  // The backend's threads may still call back: stop them before the state goes.
  backend.reset();
}

namespace {

caf::expected<std::unique_ptr<sampling::generation_backend>>
make_plain_backend(const sampling::sampler_settings& s) {
  if (s.backend == "remote") {
    if (s.remote.base_url.empty() || s.remote.model.empty())
      return make_error(errc::invalid_config,
                        "sampler.backend = \"remote\" needs sampler.remote_url and "
                        "sampler.remote_model (the model name the server lists)");
    return sampling::make_remote_backend(s.remote);
  }
  if (s.backend == "builtin")
    return sampling::make_builtin_backend(s);
  return make_error(errc::invalid_config, "sampler.backend: expected builtin or remote, got \""
                                            + s.backend + "\"");
}

} // namespace

caf::expected<std::unique_ptr<sampling::generation_backend>>
make_generation_backend(const sampling::sampler_settings& s) {
  // Read the recorded completions first: a bad file fails before a model is loaded.
  std::optional<sampling::recorded_completions> replay;
  if (!s.replay_completions.empty()) {
    auto loaded = sampling::load_recorded_completions(s.replay_completions);
    if (!loaded)
      return loaded.error();
    replay = std::move(*loaded);
  }
  auto backend = make_plain_backend(s);
  if (!backend || !replay)
    return backend;
  return sampling::make_replay_backend(std::move(*backend), std::move(*replay),
                                       s.replay_completions);
}

sampler_behavior::behavior_type sampler(sampler_pointer self, actor_stats stats,
                                        sampling::sampler_settings settings) {
  auto& st = self->state;
  st.stats = std::move(stats);
  st.settings = std::move(settings);
  if (auto made = make_generation_backend(st.settings)) {
    st.backend = std::move(*made);
    spdlog::info("{} ready: {} backend, model {}", st.stats.name, st.backend->kind(),
                 st.backend->model());
  } else {
    st.backend_failure = made.error();
    st.backend_error = describe(made.error());
    st.stats.last_error = st.backend_error;
    spdlog::error("{} has no backend, every request will fail: {}", st.stats.name,
                  st.backend_error);
  }
  return {
    [self](status_atom) -> actor_status {
      auto& st = self->state;
      st.stats.count();
      std::string state = !st.backend        ? "failed"
                          : st.held.empty() ? "idle"
                                            : "generating";
      return st.stats.snapshot(st.backend ? actor_health::ok : actor_health::failed, state,
                               self->mailbox().size(), sampler_details(st));
    },
    [self](control_atom, const std::string& verb,
           const std::vector<std::string>&) -> caf::result<std::string> {
      self->state.stats.count();
      return no_control_verbs(self->state.stats.name, verb);
    },
    [self](generate_atom, generation_request& req) -> caf::result<generation_result> {
      auto& st = self->state;
      st.stats.count();
      if (!st.backend)
        return st.backend_failure; // as when it was made: names the key or the server
      if (st.held.size() >= st.settings.queue_capacity) {
        ++st.refused_busy;
        return make_error(errc::busy, st.stats.name + " holds "
                                        + std::to_string(st.held.size())
                                        + " requests (sampler.queue_capacity); try again later");
      }
      auto key = st.next_key++;
      auto rp = self->make_response_promise<generation_result>();
      st.held[key] = held_generation{rp, req.id, clock_type::now()};
      // The backend knows the request by `key`, so requesters' ids may repeat across nodes.
      req.id = key;
      if (req.min_policy_version > st.backend->stats().policy_version)
        st.waiting_for_policy.emplace(key, std::move(req));
      else
        start_generation(self, key, std::move(req));
      return rp;
    },
    [self](generate_atom, uint64_t key, generation_result& res) {
      auto& st = self->state;
      auto it = st.held.find(key);
      if (it == st.held.end())
        return; // not ours (only the backend sends these)
      res.id = it->second.request_id;
      res.seconds = std::chrono::duration<double>(clock_type::now() - it->second.since).count();
      res.sampler = st.stats.name;
      st.recent_tokens.emplace_back(clock_type::now(), res.completion_tokens.size());
      if (res.finish == finish_reason::error)
        st.stats.last_error = res.error;
      it->second.promise.deliver(std::move(res));
      st.held.erase(it);
    },
    [self](policy_atom, policy_update& update) {
      auto& st = self->state;
      st.stats.count();
      if (!st.backend)
        return;
      auto identity = std::make_tuple(
        update.version, update.learner_step, update.adapter_dir,
        std::hash<std::string_view>{}(std::string_view(
          reinterpret_cast<const char*>(update.adapter_bytes.data()), update.adapter_bytes.size())));
      if (st.applied_policy == identity) {
        spdlog::debug("{}: policy version {} is already applied", st.stats.name, update.version);
        return;
      }
      if (auto ok = st.backend->apply_policy(update); !ok) {
        st.stats.last_error = "policy version " + std::to_string(update.version)
                              + " not applied: " + describe(ok.error());
        spdlog::error("{}: {}", st.stats.name, st.stats.last_error);
        return;
      }
      st.applied_policy = identity;
      spdlog::info("{} samples from policy version {} now", st.stats.name, update.version);
      for (auto it = st.waiting_for_policy.begin(); it != st.waiting_for_policy.end();) {
        if (it->second.min_policy_version <= update.version) {
          start_generation(self, it->first, std::move(it->second));
          it = st.waiting_for_policy.erase(it);
        } else {
          ++it;
        }
      }
    },
  };
}

} // namespace kbrl
