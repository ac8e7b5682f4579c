#pragma once
// An actor system driven by CAF's deterministic test coordinator, for the actor-shell tests
// (coordinator_shell, rl_run_shell, node_shell, evaluator_supervisor_logic): nothing runs until
// sched.run(), delayed messages and request timeouts fire only at sched.trigger_timeouts(), so a
// test asserts what happened without sleeping. Logging is off while it lives.

#include "messages/type_ids.hpp"

#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <spdlog/spdlog.h>

#include <boost/test/unit_test.hpp>

#include <memory>
#include <optional>
#include <vector>

namespace kbrl::test {

struct deterministic_system {
  caf::actor_system_config cfg;
  caf::actor_system sys;
  caf::scheduler::test_coordinator& sched;
  spdlog::level::level_enum old_level;
  std::vector<caf::actor> spawned; ///< stopped when the test ends

  static caf::actor_system_config& prepare(caf::actor_system_config& cfg) {
    cfg.set("scheduler.policy", caf::atom("testing"));
    register_message_types(cfg);
    return cfg;
  }

  deterministic_system()
    : sys(prepare(cfg)),
      sched(dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler())),
      old_level(spdlog::get_level()) {
    spdlog::set_level(spdlog::level::off);
  }

  ~deterministic_system() {
    for (auto& a : spawned)
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    sched.run();
    spawned.clear();
    spdlog::set_level(old_level);
  }

  /// Keeps `h` to stop it at the end; returns it.
  template <class Handle>
  Handle keep(Handle h) {
    spawned.push_back(caf::actor_cast<caf::actor>(h));
    return h;
  }

  /// Asks `target` from a helper actor and runs the system until it is quiet: the answer or the
  /// error (the test fails when neither came).
  template <class T, class Handle, class... Ts>
  caf::expected<T> ask(const Handle& target, Ts... xs) {
    auto box = std::make_shared<std::optional<caf::expected<T>>>();
    spawned.push_back(sys.spawn([=](caf::event_based_actor* self) {
      self->request(target, caf::infinite, xs...)
        .then([=](T& x) { box->emplace(std::move(x)); },
              [=](caf::error& e) { box->emplace(std::move(e)); });
    }));
    sched.run();
    BOOST_REQUIRE_MESSAGE(box->has_value(), "no answer");
    return std::move(**box);
  }
};

} // namespace kbrl::test
