#include "actors/node_roles.hpp"

#include "actors/build_service.hpp"
#include "actors/learner.hpp"
#include "actors/metrics.hpp"
#include "actors/retriever.hpp"
#include "actors/rl_run.hpp"
#include "actors/role_slot.hpp"
#include "actors/sampler.hpp"
#include "runtime/node/role_plan.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <thread>

namespace kbrl {

namespace {

/// The build cache every worker of the node shares: <eval.cache_dir>/extensions when that key is
/// set (evaluation_engine_options), else the run directory's own.
std::string extensions_dir(const node_settings& s) {
  return s.eval_engine.worker.extensions_dir.empty() ? s.run_dir + "/eval/extensions"
                                                     : s.eval_engine.worker.extensions_dir;
}

/// The engine options of the evaluator on `gpu`: its own scratch directory, the node's shared
/// build cache.
eval::engine_options evaluator_engine(const node_settings& s, const std::string& name, int gpu) {
  auto opts = s.eval_engine;
  auto dir_name = name.substr(name.find('/') + 1);
  opts.worker.scratch_dir = s.run_dir + "/eval/" + dir_name;
  opts.worker.extensions_dir = extensions_dir(s);
  opts.worker.gpu = gpu;
  return opts;
}

/// A builder node's build service: eval.build_workers CPU builders (the machine's cores when 0),
/// building into the node's build cache.
build_service_actor spawn_build_service(node_pointer self, const actor_stats& stats) {
  auto& s = self->state.settings;
  auto opts = s.eval_engine;
  opts.worker.scratch_dir = s.run_dir + "/eval";
  opts.worker.extensions_dir = extensions_dir(s);
  opts.worker.gpu = -1;
  const bool has_arch = std::any_of(opts.worker.extra_env.begin(), opts.worker.extra_env.end(),
                                    [](auto& e) { return e.rfind("TORCH_CUDA_ARCH_LIST=", 0) == 0; });
  if (!has_arch)
    spdlog::warn("{}: eval.cuda_arch_list names no GPU architecture here (\"auto\" finds none "
                 "on a machine without GPUs): CUDA builds will not match the evaluator nodes' "
                 "and they will build again; set it to their GPUs' (e.g. \"9.0\" for H100 and "
                 "H200)",
                 stats.name);
  auto builders = s.eval_supervision.build_workers;
  if (builders == 0)
    builders = std::max(1u, std::thread::hardware_concurrency());
  return self->spawn(build_service, stats, opts, builders);
}

} // namespace

/// Spawns the actors of this node's roles and GPUs; returns their entries.
std::vector<actor_entry> spawn_role_actors(node_pointer self) {
  auto& s = self->state.settings;
  std::vector<actor_entry> out;
  std::vector<int> gpus(s.info.gpus.begin(), s.info.gpus.end());
  auto plan = plan_role_actors(s.info.roles, gpus);
  // The metrics sink first, when there is one: the learner sends it each step's scalars.
  metrics_actor sink;
  for (auto& planned : plan)
    if (planned.role == "metrics") {
      actor_stats stats;
      stats.node = s.info.name;
      stats.role = planned.role;
      stats.name = actor_name(s.info.name, planned.role, planned.index);
      sink = self->spawn(metrics_sink, stats, s.run_dir + "/metrics.jsonl", s.run_config_toml);
    }
  for (auto& planned : plan) {
    actor_stats stats;
    stats.node = s.info.name;
    stats.role = planned.role;
    stats.name = actor_name(s.info.name, planned.role, planned.index);
    caf::actor handle;
    if (planned.role == "metrics") {
      handle = caf::actor_cast<caf::actor>(sink);
    } else if (planned.role == "evaluator-supervisor") {
      std::vector<evaluator_slot> slots;
      for (auto& p : plan)
        if (p.role == "evaluator") {
          evaluator_slot slot;
          slot.name = actor_name(s.info.name, "evaluator", p.index);
          slot.gpu = p.gpu;
          slot.engine = evaluator_engine(s, slot.name, p.gpu);
          slots.push_back(std::move(slot));
        }
      auto builder_opts = s.eval_engine;
      builder_opts.worker.scratch_dir = s.run_dir + "/eval";
      builder_opts.worker.extensions_dir = extensions_dir(s);
      builder_opts.worker.gpu = -1;
      auto sup = self->spawn(evaluator_supervisor, stats, s.eval_supervision, slots, builder_opts);
      handle = caf::actor_cast<caf::actor>(sup);
      self->monitor(handle);
      out.push_back({stats.name, planned.role, handle});
      for (auto& slot : slots) {
        out.push_back({slot.name, "evaluator", handle});
        self->state.owned_by_handle.insert(slot.name);
      }
      continue;
    } else if (planned.role == "evaluator") {
      continue; // spawned and owned by the supervisor above
    } else if (planned.role == "builds") {
      handle = caf::actor_cast<caf::actor>(spawn_build_service(self, stats));
    } else if (planned.role == "learner") {
      auto settings = s.learner ? *s.learner : train::learner_settings{};
      settings.gpus = planned.gpus; // one data-parallel replica per GPU
      if (settings.run_dir.empty())
        settings.run_dir = s.run_dir;
      // detached: loading the model and every training step block
      handle = caf::actor_cast<caf::actor>(
        self->spawn<caf::detached>(learner, stats, std::move(settings), sink));
    } else if (planned.role == "sampler") {
      auto settings = s.sampler;
      settings.gpu = planned.gpu;
      settings.remote.name = stats.name;
      // detached: loading a model blocks for seconds to minutes
      handle = caf::actor_cast<caf::actor>(
        self->spawn<caf::detached>(sampler, stats, std::move(settings)));
    } else {
      std::vector<status_detail> details{
        {"device", planned.gpu < 0 ? "cpu" : "cuda:" + std::to_string(planned.gpu)}};
      handle = caf::actor_cast<caf::actor>(self->spawn(role_slot, stats, details));
    }
    self->monitor(handle);
    out.push_back({stats.name, planned.role, handle});
  }
  // RA-ICL: the coordinator node serves retrieved examples to every node's episodes.
  if (s.is_coordinator && !s.retrieval.index_dir.empty()) {
    actor_stats stats;
    stats.node = s.info.name;
    stats.role = "retriever";
    stats.name = actor_name(s.info.name, "retriever", -1);
    auto handle = caf::actor_cast<caf::actor>(self->spawn<caf::detached>(
      retriever, stats, s.retrieval, retrieval::retriever_options_from(s.retrieval)));
    self->monitor(handle);
    out.push_back({stats.name, "retriever", handle});
  }
  // An RL run: the coordinator node drives it (it finds the other roles through the membership).
  if (s.is_coordinator && s.rl) {
    actor_stats stats;
    stats.node = s.info.name;
    stats.role = "coordinator";
    stats.name = actor_name(s.info.name, "coordinator");
    auto handle = caf::actor_cast<caf::actor>(self->spawn(
      rl_run, stats, s.rl, caf::actor_cast<node_actor>(self), self->state.membership));
    self->monitor(handle);
    out.push_back({stats.name, "coordinator", handle});
  }
  // This node's samplers follow this node's learner; samplers elsewhere subscribe themselves
  // (or are subscribed by the coordinator).
  for (auto& l : out)
    if (l.role == "learner")
      for (auto& sampler : out)
        if (sampler.role == "sampler")
          self->send(caf::actor_cast<learner_actor>(l.handle), subscribe_atom::value,
                     caf::actor_cast<policy_listener_actor>(sampler.handle));
  return out;
}

void subscribe_supervisors(node_pointer self, const membership_actor& membership) {
  for (auto& child : self->state.children)
    if (child.role == "evaluator-supervisor")
      self->send(membership, subscribe_atom::value,
                 caf::actor_cast<membership_listener_actor>(child.handle));
}

} // namespace kbrl
