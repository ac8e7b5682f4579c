#include "actors/evaluator.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>

namespace kbrl {

evaluator_actor::behavior_type evaluator(evaluator_pointer self, actor_stats stats, int gpu,
                                         eval::engine_options opts) {
  auto& st = self->state;
  st.stats = std::move(stats);
  st.gpu = gpu;
  st.engine = std::make_unique<eval::eval_engine>(std::move(opts));
  if (auto ok = st.engine->start(); !ok) {
    spdlog::error("{}: {}", st.stats.name, describe(ok.error()));
    self->quit(ok.error());
    return evaluator_actor::behavior_type::make_empty_behavior();
  }
  spdlog::info("{} ready: worker pid {} on {}, isolation {}, candidate file writes fenced: {}",
               st.stats.name, st.engine->worker_pid(), st.engine->device(),
               to_string(st.engine->isolation()), st.engine->write_fence());
  if (st.engine->write_fence().rfind("off", 0) == 0)
    spdlog::warn("{}: candidate processes can write each other's build folders ({}); run on a "
                 "kernel with Landlock (Linux 5.13 or later) to confine them",
                 st.stats.name, st.engine->write_fence());
  return {
    [self](status_atom) -> actor_status {
      auto& st = self->state;
      st.stats.count();
      auto& e = *st.engine;
      return st.stats.snapshot(
        e.needs_restart() ? actor_health::failed : actor_health::ok,
        e.needs_restart() ? "failed" : "ready", self->mailbox().size(),
        {{"device", e.device() + (st.gpu >= 0 ? " (gpu " + std::to_string(st.gpu) + ")" : "")},
         {"worker pid", std::to_string(e.worker_pid())},
         {"isolation", to_string(e.isolation())},
         {"candidate writes fenced", e.write_fence()},
         {"evaluations", std::to_string(e.evaluations())},
         {"reference timings reused", std::to_string(e.reference_cache_hits())},
         {"reference outputs shared", std::to_string(e.references_shared())}},
        {"restart", "kill-worker"});
    },
    [self](control_atom, const std::string& verb,
           const std::vector<std::string>&) -> caf::result<std::string> {
      auto& st = self->state;
      st.stats.count();
      if (verb == "restart") {
        self->quit(make_error(errc::worker_crashed, "restarted by hand"));
        return st.stats.name + " restarting";
      }
      if (verb == "kill-worker") {
        auto pid = st.engine->worker_pid();
        st.engine->kill_worker();
        return "killed worker pid " + std::to_string(pid) + " of " + st.stats.name;
      }
      return make_error(errc::not_supported, st.stats.name + " accepts restart and kill-worker, "
                                                             "got '" + verb + "'");
    },
    [self](evaluate_atom, const eval_request& req) -> eval_result {
      auto& st = self->state;
      st.stats.count();
      st.current = req.trace;
      auto res = st.engine->evaluate(req);
      res.evaluator = st.stats.name;
      st.current.clear();
      // One line per verdict at debug level (log.level = "debug"): what a run's evaluations
      // came to, before its step's traces are written.
      spdlog::debug("{}: {}: {}{}{}", st.stats.name, req.trace,
                    res.correct ? "correct" : res.compiled ? "compiled, not correct" : "not compiled",
                    res.error == eval_error::none ? "" : std::string(", ") + to_string(res.error),
                    res.error_excerpt.empty()
                      ? std::string()
                      : ": " + res.error_excerpt.substr(0, std::min<std::size_t>(
                                 res.error_excerpt.size(), 300)));
      if (st.engine->restart_is_planned()) {
        // Not a failure: the next evaluation starts a fresh worker in this evaluator.
        spdlog::info("{}: worker {}; a fresh one starts with the next candidate", st.stats.name,
                     st.engine->last_failure());
      } else if (st.engine->needs_restart()) {
        st.stats.last_error = st.engine->last_failure();
        // Answer first, then fail: the supervisor restarts this evaluator with a fresh worker.
        self->quit(make_error(errc::worker_crashed, st.engine->last_failure()));
      }
      return res;
    },
  };
}

} // namespace kbrl
