#include "actors/build_service.hpp"

#include "runtime/eval/build_artifact.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

namespace kbrl {

namespace {

using self_ptr = build_service_pointer;

void start(self_ptr self, builder_slot& slot) {
  auto& st = self->state;
  start_builder(self, slot, st.stats.node, st.engine, st.spawn_builder, *st.live_builders);
}

/// The answer to one request: its own copy of the verdict and, when it built, the files.
void answer(self_ptr self, pending_build& item, eval_result verdict,
            const std::vector<build_file>& files) {
  auto& st = self->state;
  verdict.id = item.request.id;
  ++st.answered;
  for (auto& f : files)
    st.bytes_sent += f.bytes.size();
  item.promise.deliver(build_output{std::move(verdict), files});
}

/// The files of a source built here before, or none (the requester then builds it itself).
std::vector<build_file> files_of(self_ptr self, const std::string& source) {
  auto dir = eval::build_dir_for(self->state.engine.worker.extensions_dir, source);
  auto files = eval::collect_build_files(dir);
  if (!files) {
    spdlog::warn("{}: cannot read the build in {}: {}", self->state.stats.name, dir,
                 describe(files.error()));
    return {};
  }
  return std::move(*files);
}

void dispatch(self_ptr self);

void finished(self_ptr self, const std::string& key, eval_result res, bool usable) {
  auto& st = self->state;
  auto done = st.builds.finish(key, res, usable,
                               [](const pending_build& p) { return p.request.id; });
  for (auto& [item, verdict] : done.answers)
    answer(self, item, std::move(verdict), {});
  if (done.to_gpus.empty())
    return;
  std::vector<build_file> files;
  if (usable && res.compiled)
    files = files_of(self, done.to_gpus.front().request.candidate_source);
  for (size_t i = 0; i < done.to_gpus.size(); ++i) {
    auto copy = res;
    copy.build_seconds = i == 0 && usable ? res.compile_seconds : 0;
    answer(self, done.to_gpus[i], std::move(copy), files);
  }
}

void dispatch(self_ptr self) {
  auto& st = self->state;
  for (auto& slot : st.builders) {
    if (slot.busy || !slot.handle)
      continue;
    auto next = st.builds.next_build();
    if (!next)
      return;
    auto key = next->first;
    const auto& first = next->second->request;
    slot.busy = true;
    ++slot.builds;
    auto name = slot.name;
    auto deadline = std::chrono::milliseconds(static_cast<int64_t>(first.timing.timeout_s * 1000))
                    + st.request_margin;
    auto free_slot = [self, name] {
      for (auto& b : self->state.builders)
        if (b.name == name)
          b.busy = false;
    };
    self->request(slot.handle, deadline, build_atom::value, first)
      .then(
        [self, key, free_slot](eval_result& res) {
          free_slot();
          bool usable = eval::build_verdict_usable(res);
          spdlog::info("{}: built {} in {:.1f} s ({})", self->state.stats.name, key,
                       res.compile_seconds,
                       res.compiled ? "ok" : std::string(to_string(res.error)));
          finished(self, key, std::move(res), usable);
          dispatch(self);
        },
        [self, key, name, free_slot](caf::error& err) {
          auto why = name + " failed while building: " + self->system().render(err);
          spdlog::warn("{}: {}; the evaluator nodes will build it", self->state.stats.name, why);
          free_slot();
          eval_result lost;
          lost.error = eval_error::infrastructure;
          lost.error_excerpt = why;
          finished(self, key, std::move(lost), false);
          dispatch(self);
        });
  }
}

actor_status service_status(self_ptr self) {
  auto& st = self->state;
  return st.stats.snapshot(actor_health::ok, "ready", self->mailbox().size(),
                           {{"builders", std::to_string(st.builders.size())},
                            {"builds", std::to_string(st.builds.builds_started())},
                            {"builds reused (duplicates)",
                             std::to_string(st.builds.builds_reused())},
                            {"waiting for a build", std::to_string(st.builds.waiting())},
                            {"answered", std::to_string(st.answered)},
                            {"MiB sent", std::to_string(st.bytes_sent >> 20)}});
}

} // namespace

build_service_actor::behavior_type build_service(build_service_pointer self, actor_stats stats,
                                                 eval::engine_options engine, size_t builders) {
  auto& st = self->state;
  st.stats = std::move(stats);
  engine.worker.gpu = -1;
  st.engine = std::move(engine);
  st.spawn_builder = [](caf::local_actor* parent, const actor_stats& s,
                        const eval::engine_options& opts) {
    return parent->system().spawn<caf::detached>(builder, s, opts);
  };
  for (size_t i = 0; i < std::max<size_t>(1, builders); ++i) {
    builder_slot slot;
    slot.name = actor_name(st.stats.node, "builder", static_cast<int>(i));
    st.builders.push_back(std::move(slot));
    start(self, st.builders.back());
  }
  self->set_down_handler([self](const caf::down_msg& msg) {
    if (auto* b = lost_builder(self->state.builders, msg, self->system().render(msg.reason))) {
      start(self, *b);
      dispatch(self);
    }
  });
  // Builders are detached actors with their own threads: stop them with the service.
  self->attach_functor([live = st.live_builders](const caf::error&) {
    for (auto& [name, addr] : *live)
      if (auto handle = caf::actor_cast<caf::actor>(addr))
        caf::anon_send_exit(handle, caf::exit_reason::user_shutdown);
  });
  spdlog::info("{}: {} CPU builder(s) for the cluster's evaluator nodes, building into {}",
               st.stats.name, st.builders.size(), st.engine.worker.extensions_dir);
  return {
    [self](status_atom) -> actor_status {
      self->state.stats.count();
      return service_status(self);
    },
    [self](control_atom, const std::string& verb,
           const std::vector<std::string>&) -> caf::result<std::string> {
      self->state.stats.count();
      return no_control_verbs(self->state.stats.name, verb);
    },
    [self](build_atom, eval_request& req) -> caf::result<build_output> {
      auto& st = self->state;
      st.stats.count();
      auto rp = self->make_response_promise<build_output>();
      pending_build item{std::move(req), rp};
      auto key = eval::source_hash(item.request.candidate_source);
      switch (st.builds.admit(key, item)) {
        case eval::build_route::to_gpus: { // built here before
          eval_result built;
          built.compiled = true;
          built.evaluator = st.stats.name;
          answer(self, item, std::move(built), files_of(self, item.request.candidate_source));
          break;
        }
        case eval::build_route::answer_failure:
          answer(self, item, st.builds.failure_of(key, item.request.id), {});
          break;
        case eval::build_route::waits_for_build:
          dispatch(self);
          break;
      }
      return rp;
    },
  };
}

} // namespace kbrl
