#include "actors/supervisor_builds.hpp"

#include "runtime/eval/build_artifact.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

namespace kbrl::supervision {

namespace {

/// A build ended: release its requests to the GPUs, or answer them all with its failure.
void finish_build(self_ptr self, const std::string& key, eval_result res, bool usable) {
  auto& st = self->state;
  auto done = st.builds.finish(key, std::move(res), usable,
                               [](const pending_evaluation& p) { return p.request.id; });
  for (auto& [item, verdict] : done.answers)
    deliver(self, item.promise, std::move(verdict));
  if (!done.to_gpus.empty())
    done.to_gpus.front().build_seconds = done.build_seconds;
  for (auto& item : done.to_gpus)
    st.queue.push_back(std::move(item));
  dispatch(self);
}

void builder_free(self_ptr self, const std::string& name) {
  for (auto& b : self->state.builders)
    if (b.name == name)
      b.busy = false;
}

void build_locally(self_ptr self, builder_slot& slot, const std::string& key,
                   const eval_request& first) {
  slot.busy = true;
  ++slot.builds;
  auto name = slot.name;
  self->request(slot.handle, deadline_of(self, first), build_atom::value, first)
    .then(
      [self, key, name](eval_result& res) {
        builder_free(self, name);
        bool usable = eval::build_verdict_usable(res);
        finish_build(self, key, std::move(res), usable);
        dispatch_builds(self);
      },
      [self, key, name](caf::error& err) {
        spdlog::warn("{} failed while building: {}; the GPU will build it", name,
                     self->system().render(err));
        builder_free(self, name);
        finish_build(self, key, eval_result{}, false);
        dispatch_builds(self);
      });
}

remote_builds* service_named(self_ptr self, const std::string& name) {
  for (auto& r : self->state.remote)
    if (r.name == name)
      return &r;
  return nullptr;
}

/// A build service's answer: its files go into this node's build folder for the source, where
/// the GPU worker finds and loads them.
bool install(self_ptr self, const std::string& source, const build_output& out) {
  if (out.files.empty())
    return true;
  auto dir = eval::build_dir_for(self->state.builder_engine.worker.extensions_dir, source);
  auto ok = eval::install_build_files(dir, out.files);
  if (!ok)
    spdlog::warn("{}: cannot install the build from {}: {}; the GPU will build it",
                 self->state.stats.name, out.verdict.evaluator, describe(ok.error()));
  return static_cast<bool>(ok);
}

void build_remotely(self_ptr self, remote_builds& service, const std::string& key,
                    const eval_request& first) {
  ++service.in_flight;
  ++service.builds;
  auto name = service.name;
  auto source = std::make_shared<std::string>(first.candidate_source);
  self->request(service.handle, deadline_of(self, first), build_atom::value, first)
    .then(
      [self, key, name, source](build_output& out) {
        if (auto* s = service_named(self, name); s != nullptr && s->in_flight > 0)
          --s->in_flight;
        bool usable = eval::build_verdict_usable(out.verdict) && install(self, *source, out);
        finish_build(self, key, std::move(out.verdict), usable);
        dispatch_builds(self);
      },
      [self, key, name](caf::error& err) {
        spdlog::warn("{} failed while building: {}; the GPU will build it", name,
                     self->system().render(err));
        if (auto* s = service_named(self, name); s != nullptr && s->in_flight > 0)
          --s->in_flight;
        finish_build(self, key, eval_result{}, false);
        dispatch_builds(self);
      });
}

} // namespace

void spawn_builder(self_ptr self, builder_slot& slot) {
  auto& st = self->state;
  start_builder(self, slot, st.stats.node, st.builder_engine, st.workers.builder,
                *st.live_workers);
}

void dispatch_builds(self_ptr self) {
  auto& st = self->state;
  for (auto& slot : st.builders) {
    if (slot.busy || !slot.handle)
      continue;
    auto next = st.builds.next_build();
    if (!next)
      return;
    build_locally(self, slot, next->first, next->second->request);
  }
  for (auto& service : st.remote)
    while (service.in_flight < st.settings.remote_build_slots) {
      auto next = st.builds.next_build();
      if (!next)
        return;
      build_remotely(self, service, next->first, next->second->request);
    }
}

void admit(self_ptr self, pending_evaluation item) {
  auto& st = self->state;
  if ((st.builders.empty() && st.remote.empty())
      || !eval::builds_ahead(item.request.task.backend)) {
    st.queue.push_back(std::move(item));
    return dispatch(self);
  }
  auto key = eval::source_hash(item.request.candidate_source);
  switch (st.builds.admit(key, item)) {
    case eval::build_route::to_gpus:
      st.queue.push_back(std::move(item));
      return dispatch(self);
    case eval::build_route::answer_failure:
      return deliver(self, item.promise, st.builds.failure_of(key, item.request.id));
    case eval::build_route::waits_for_build:
      return dispatch_builds(self);
  }
}

bool builder_down(self_ptr self, const caf::down_msg& msg) {
  auto* b = lost_builder(self->state.builders, msg, self->system().render(msg.reason));
  if (b == nullptr)
    return false;
  spawn_builder(self, *b);
  dispatch_builds(self);
  return true;
}

void use_build_services(self_ptr self, const membership_view& view) {
  auto& st = self->state;
  std::vector<remote_builds> now;
  for (auto& node : view.nodes) {
    if (node.state != node_state::up)
      continue;
    for (auto& a : node.info.actors) {
      if (a.role != "builds" || !a.handle)
        continue;
      remote_builds service;
      service.name = a.name;
      service.handle = caf::actor_cast<build_service_actor>(a.handle);
      if (auto* old = service_named(self, a.name);
          old != nullptr && old->handle.address() == service.handle.address()) {
        service.in_flight = old->in_flight;
        service.builds = old->builds;
      } else {
        spdlog::info("{}: builds go to {} (builder node {}, up to {} at a time)", st.stats.name,
                     a.name, node.info.name, st.settings.remote_build_slots);
      }
      now.push_back(std::move(service));
    }
  }
  for (auto& old : st.remote)
    if (std::none_of(now.begin(), now.end(), [&](auto& r) { return r.name == old.name; }))
      spdlog::warn("{}: {} is gone; its builds in flight go to the GPUs", st.stats.name,
                   old.name);
  st.remote = std::move(now);
  dispatch_builds(self);
}

} // namespace kbrl::supervision
