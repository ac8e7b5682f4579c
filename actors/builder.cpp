#include "actors/builder.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

namespace kbrl {

builder_actor::behavior_type builder(builder_pointer self, actor_stats stats,
                                     eval::engine_options opts) {
  auto& st = self->state;
  st.stats = std::move(stats);
  opts.worker.gpu = -1; // builds never touch a GPU
  opts.builds_only = true;
  st.engine = std::make_unique<eval::eval_engine>(std::move(opts));
  if (auto ok = st.engine->start(); !ok) {
    spdlog::error("{}: {}", st.stats.name, describe(ok.error()));
    self->quit(ok.error());
    return builder_actor::behavior_type::make_empty_behavior();
  }
  return {
    [self](status_atom) -> actor_status {
      auto& st = self->state;
      st.stats.count();
      const bool failed = st.engine->needs_restart();
      return st.stats.snapshot(failed ? actor_health::failed : actor_health::ok,
                               failed ? "failed" : "ready",
                               self->mailbox().size(),
                               {{"builds", std::to_string(st.builds)},
                                {"worker pid", std::to_string(st.engine->worker_pid())}});
    },
    [self](control_atom, const std::string& verb,
           const std::vector<std::string>&) -> caf::result<std::string> {
      self->state.stats.count();
      return no_control_verbs(self->state.stats.name, verb);
    },
    [self](build_atom, const eval_request& req) -> eval_result {
      auto& st = self->state;
      st.stats.count();
      ++st.builds;
      auto res = st.engine->build(req);
      res.evaluator = st.stats.name;
      if (st.engine->needs_restart()) {
        st.stats.last_error = st.engine->last_failure();
        self->quit(make_error(errc::worker_crashed, st.engine->last_failure()));
      }
      return res;
    },
  };
}

builder_slot* lost_builder(std::vector<builder_slot>& slots, const caf::down_msg& msg,
                           const std::string& reason) {
  for (auto& b : slots)
    if (b.handle && b.handle.address() == msg.source) {
      b.last_error = reason;
      ++b.restarts;
      spdlog::warn("{} stopped ({}); starting a fresh one", b.name, b.last_error);
      return &b;
    }
  return nullptr;
}

} // namespace kbrl
