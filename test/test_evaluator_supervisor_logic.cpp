// The evaluator supervisor without real workers, processes or time: its slot table
// (runtime/eval/slot_table.hpp) and build book (runtime/eval/build_book.hpp) directly, and the
// actor (actors/evaluator_supervisor.hpp) under CAF's deterministic test coordinator with double
// evaluators and builders and a fake wall clock. The real-worker behaviour stays covered by the
// evaluator suite.

#include "test_support.hpp"

#include <boost/test/unit_test.hpp>

#include "actors/evaluator_supervisor.hpp"
#include "deterministic_system.hpp"
#include "messages/status_details.hpp"
#include "messages/type_ids.hpp"

#include <caf/all.hpp>

#include <memory>
#include <optional>

using namespace kbrl;
using kbrl::test::contains;

namespace {

constexpr int64_t t0 = 1'700'000'000'000;

// -- doubles ---------------------------------------------------------------------------------------

/// What the doubles saw.
struct worker_log {
  int evaluators_started = 0;
  int builders_started = 0;
  std::vector<std::string> evaluated; ///< candidate sources, in order
  std::vector<std::string> built;
};

/// An evaluator double: answers every candidate correct, except the source "crash", answered
/// with a crash verdict after which the evaluator ends (as a real one does on a sticky error).
evaluator_actor::behavior_type fake_evaluator(evaluator_actor::pointer self,
                                              std::shared_ptr<worker_log> log) {
  return {
    [self](status_atom) {
      actor_status st;
      st.name = "fake";
      return st;
    },
    [](control_atom, const std::string& verb, const std::vector<std::string>&) {
      return "fake did " + verb;
    },
    [self, log](evaluate_atom, const eval_request& req) {
      log->evaluated.push_back(req.candidate_source);
      eval_result r;
      r.id = req.id;
      r.compiled = true;
      r.correct = req.candidate_source != "crash";
      if (req.candidate_source == "crash") {
        r.error = eval_error::crashed;
        self->quit(make_error(errc::worker_crashed, "illegal memory access"));
      }
      return r;
    },
  };
}

/// A builder double: sources containing "broken" fail to compile.
builder_actor::behavior_type fake_builder(builder_actor::pointer, std::shared_ptr<worker_log> log) {
  return {
    [](status_atom) { return actor_status{}; },
    [](control_atom, const std::string&, const std::vector<std::string>&) {
      return std::string("no");
    },
    [log](build_atom, const eval_request& req) {
      log->built.push_back(req.candidate_source);
      eval_result r;
      r.id = req.id;
      r.compiled = !contains(req.candidate_source, "broken");
      r.error = r.compiled ? eval_error::none : eval_error::compile;
      r.compile_seconds = 2.5;
      return r;
    },
  };
}

struct supervisor_fixture : kbrl::test::deterministic_system {
  int64_t now = t0;
  std::shared_ptr<worker_log> log = std::make_shared<worker_log>();
  evaluator_supervisor_actor sup;

  void start(supervisor_settings settings, size_t evaluators = 1) {
    settings.clock = [this] { return now; };
    supervisor_workers w;
    auto l = log;
    w.evaluator = [l](caf::local_actor* parent, const actor_stats&, int,
                      const eval::engine_options&) {
      ++l->evaluators_started;
      return parent->system().spawn(fake_evaluator, l);
    };
    w.builder = [l](caf::local_actor* parent, const actor_stats&, const eval::engine_options&) {
      ++l->builders_started;
      return parent->system().spawn(fake_builder, l);
    };
    std::vector<evaluator_slot> slots;
    for (size_t i = 0; i < evaluators; ++i)
      slots.push_back({"n/evaluator." + std::to_string(i), static_cast<int>(i), {}});
    actor_stats stats;
    stats.name = "n/evaluator-supervisor";
    stats.node = "n";
    sup = keep(sys.spawn(evaluator_supervisor_with, stats, settings, slots,
                         eval::engine_options{}, w));
    sched.run();
  }

  /// Sends `source` for evaluation; the answer lands in the returned box once the system ran.
  std::shared_ptr<std::optional<caf::expected<eval_result>>> send(const std::string& source,
                                                                   uint64_t id) {
    auto box = std::make_shared<std::optional<caf::expected<eval_result>>>();
    eval_request req;
    req.id = id;
    req.candidate_source = source;
    req.task.backend = kernel_backend::cuda;
    req.timing.timeout_s = 60;
    auto target = sup;
    spawned.push_back(sys.spawn([=](caf::event_based_actor* self) {
      self->request(target, caf::infinite, evaluate_atom::value, req)
        .then([=](eval_result& r) { box->emplace(std::move(r)); },
              [=](caf::error& e) { box->emplace(std::move(e)); });
    }));
    return box;
  }

  eval_result evaluate(const std::string& source, uint64_t id) {
    auto box = send(source, id);
    sched.run();
    BOOST_REQUIRE_MESSAGE(box->has_value(), "the supervisor did not answer " + source);
    BOOST_REQUIRE_MESSAGE(**box, kbrl::test::why(**box));
    return ***box;
  }

  actor_status status() {
    auto s = ask<actor_status>(sup, status_atom::value);
    BOOST_REQUIRE_MESSAGE(s, kbrl::test::why(s));
    return *s;
  }

  std::string detail(const std::string& key) { return detail_of(status(), key); }
};

} // namespace

BOOST_AUTO_TEST_SUITE(evaluator_supervisor_logic)

// -- the slot table ----------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(a_lost_worker_restarts_within_the_budget_then_degrades_until_the_back_off) {
  eval::slot_table t(2, std::chrono::milliseconds(60000));
  auto& s = t.add("n/evaluator.0", 0);
  t.started(s, t0);
  BOOST_CHECK_EQUAL(t.health(), "running");
  BOOST_CHECK(t.lost(s, "crash 1", t0 + 1000) == eval::loss_outcome::restart);
  BOOST_CHECK(s.state == eval::slot_state::restarting);
  BOOST_CHECK_EQUAL(t.health(), "recovering");
  t.started(s, t0 + 1100);
  BOOST_CHECK(t.lost(s, "crash 2", t0 + 2000) == eval::loss_outcome::restart);
  t.started(s, t0 + 2100);
  BOOST_CHECK(t.lost(s, "crash 3", t0 + 3000) == eval::loss_outcome::degraded);
  BOOST_CHECK(s.state == eval::slot_state::degraded);
  BOOST_CHECK_EQUAL(s.last_error, "crash 3");
  BOOST_CHECK_EQUAL(s.restarts, 2u);
  BOOST_CHECK_EQUAL(t.health(), "degraded");
  BOOST_CHECK(!t.any_usable());
  BOOST_REQUIRE(t.start_after_back_off(s));
  BOOST_CHECK_EQUAL(s.budget.in_window(), 0u);
  BOOST_CHECK_EQUAL(s.restarts, 3u);
  t.started(s, t0 + 40000);
  BOOST_CHECK(!t.start_after_back_off(s)); // not degraded any more
  // Outside the window the earlier restarts no longer count.
  BOOST_CHECK(t.lost(s, "crash 4", t0 + 200000) == eval::loss_outcome::restart);
}

BOOST_AUTO_TEST_CASE(busy_and_crashed_slots_get_no_work) {
  eval::slot_table t(5, std::chrono::milliseconds(60000));
  t.started(t.add("a", 0), t0);
  t.started(t.add("b", 1), t0);
  auto* first = t.free_slot();
  BOOST_REQUIRE(first);
  BOOST_CHECK_EQUAL(first->name, "a");
  first->busy = true;
  BOOST_CHECK_EQUAL(t.free_slot()->name, "b");
  t.answered(*first, eval_error::crashed); // on its way out
  BOOST_CHECK(!first->busy);
  BOOST_CHECK_EQUAL(first->evaluations, 1u);
  BOOST_CHECK(first->state == eval::slot_state::restarting);
  BOOST_CHECK_EQUAL(t.free_slot()->name, "b");
  auto status = eval::status_of(*t.find("b"), "n");
  BOOST_CHECK_EQUAL(status.state, "idle");
  BOOST_CHECK_EQUAL(status.node, "n");
}

// -- the build book ----------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(a_source_is_built_once_and_its_copies_follow_the_build) {
  eval::build_book<uint64_t> book;
  uint64_t a = 1, b = 2, c = 3;
  BOOST_CHECK(book.admit("h1", a) == eval::build_route::waits_for_build);
  BOOST_CHECK(book.admit("h1", b) == eval::build_route::waits_for_build); // a duplicate
  BOOST_CHECK_EQUAL(book.waiting(), 2u);
  auto next = book.next_build();
  BOOST_REQUIRE(next);
  BOOST_CHECK_EQUAL(next->first, "h1");
  BOOST_CHECK_EQUAL(*next->second, 1u);
  BOOST_CHECK(!book.next_build()); // one build per source
  eval_result built;
  built.compiled = true;
  built.compile_seconds = 3;
  auto done = book.finish("h1", built, true, [](uint64_t id) { return id; });
  BOOST_CHECK_EQUAL(done.to_gpus.size(), 2u);
  BOOST_CHECK(done.answers.empty());
  BOOST_CHECK_EQUAL(done.build_seconds, 3.0);
  BOOST_CHECK(book.admit("h1", c) == eval::build_route::to_gpus); // built before
  BOOST_CHECK_EQUAL(book.builds_started(), 1u);
  BOOST_CHECK_EQUAL(book.builds_reused(), 2u);
}

BOOST_AUTO_TEST_CASE(a_failed_build_answers_every_copy_and_later_ones_for_free) {
  eval::build_book<uint64_t> book;
  uint64_t a = 1, b = 2, c = 3;
  book.admit("h", a);
  book.admit("h", b);
  book.next_build();
  eval_result failed;
  failed.error = eval_error::compile;
  failed.compile_seconds = 4;
  failed.total_seconds = 4;
  auto done = book.finish("h", failed, true, [](uint64_t id) { return id; });
  BOOST_REQUIRE_EQUAL(done.answers.size(), 2u);
  BOOST_CHECK(done.to_gpus.empty());
  BOOST_CHECK_EQUAL(done.answers[0].second.id, 1u);
  BOOST_CHECK_EQUAL(done.answers[0].second.build_seconds, 4.0); // the build's time, once
  BOOST_CHECK_EQUAL(done.answers[0].second.compile_seconds, 0.0);
  BOOST_CHECK_EQUAL(done.answers[1].second.build_seconds, 0.0);
  BOOST_CHECK(book.admit("h", c) == eval::build_route::answer_failure);
  auto reused = book.failure_of("h", 3);
  BOOST_CHECK_EQUAL(reused.id, 3u);
  BOOST_CHECK(reused.error == eval_error::compile);
  BOOST_CHECK_EQUAL(reused.build_seconds, 0.0);
}

BOOST_AUTO_TEST_CASE(a_builder_that_could_not_say_sends_the_requests_to_the_gpus) {
  eval::build_book<uint64_t> book;
  uint64_t a = 1;
  book.admit("h", a);
  book.next_build();
  auto done = book.finish("h", eval_result{}, false, [](uint64_t id) { return id; });
  BOOST_CHECK_EQUAL(done.to_gpus.size(), 1u);
  BOOST_CHECK(book.admit("h", a) == eval::build_route::waits_for_build); // not known as built
}

// -- the actor, with doubles -------------------------------------------------------------------------

BOOST_FIXTURE_TEST_CASE(requests_are_answered_by_the_evaluators, supervisor_fixture) {
  start(supervisor_settings{});
  auto r = evaluate("ok", 7);
  BOOST_CHECK_EQUAL(r.id, 7u);
  BOOST_CHECK(r.correct);
  BOOST_CHECK_EQUAL(log->evaluators_started, 1);
  BOOST_CHECK_EQUAL(status().state, "running");
  BOOST_CHECK_EQUAL(detail("answered"), "1");
}

BOOST_FIXTURE_TEST_CASE(a_crashed_evaluator_is_replaced_and_the_next_request_runs_on_it,
                        supervisor_fixture) {
  start(supervisor_settings{});
  auto crash = send("crash", 1);
  auto after = send("ok", 2); // queued behind the crash
  sched.run();
  BOOST_REQUIRE(crash->has_value() && after->has_value());
  BOOST_CHECK((***crash).error == eval_error::crashed);
  BOOST_CHECK((***after).correct);
  BOOST_CHECK_EQUAL(log->evaluators_started, 2);
  BOOST_REQUIRE_EQUAL(log->evaluated.size(), 2u);
  BOOST_CHECK_EQUAL(status().state, "running");
}

BOOST_FIXTURE_TEST_CASE(a_spent_budget_degrades_the_slot_until_the_back_off_is_over,
                        supervisor_fixture) {
  supervisor_settings s;
  s.restart_limit = 1;
  start(s);
  evaluate("crash", 1); // restart 1 of 1
  BOOST_CHECK_EQUAL(log->evaluators_started, 2);
  now += 1000;
  evaluate("crash", 2); // budget spent
  BOOST_CHECK_EQUAL(log->evaluators_started, 2);
  BOOST_CHECK_EQUAL(status().state, "degraded");
  auto refused = evaluate("ok", 3);
  BOOST_CHECK(refused.error == eval_error::infrastructure);
  BOOST_CHECK(contains(refused.error_excerpt, "degraded"));
  // The back-off's delayed message: the slot starts again with a fresh budget.
  sched.trigger_timeouts();
  sched.run();
  BOOST_CHECK_EQUAL(log->evaluators_started, 3);
  BOOST_CHECK_EQUAL(status().state, "running");
  BOOST_CHECK(evaluate("ok", 4).correct);
}

BOOST_FIXTURE_TEST_CASE(builds_ahead_build_each_source_once, supervisor_fixture) {
  supervisor_settings s;
  s.build_workers = 1;
  start(s);
  BOOST_CHECK_EQUAL(log->builders_started, 1);
  auto a = send("kernel A", 1);
  auto b = send("kernel A", 2);
  auto broken = send("broken kernel", 3);
  sched.run();
  BOOST_REQUIRE(a->has_value() && b->has_value() && broken->has_value());
  BOOST_CHECK((***a).correct && (***b).correct);
  BOOST_CHECK((***broken).error == eval_error::compile);
  BOOST_CHECK_EQUAL(log->built.size(), 2u); // kernel A once, the broken one once
  BOOST_CHECK_EQUAL(log->evaluated.size(), 2u); // the broken one never reached a GPU
  BOOST_CHECK_EQUAL(detail("builds reused (duplicates)"), "1");
}

BOOST_FIXTURE_TEST_CASE(a_full_queue_answers_busy, supervisor_fixture) {
  supervisor_settings s;
  s.queue_capacity = 1;
  start(s);
  // Nothing runs until sched.run(): the first request takes the evaluator, the second waits in
  // the queue, the third finds it full.
  auto first = send("ok", 1);
  auto second = send("ok", 2);
  auto third = send("ok", 3);
  sched.run();
  BOOST_REQUIRE(third->has_value());
  BOOST_CHECK(first->has_value() && static_cast<bool>(**first));
  BOOST_CHECK(second->has_value() && static_cast<bool>(**second));
  BOOST_REQUIRE(!**third);
  BOOST_CHECK(contains(describe((**third).error()), "queue is full"));
}

BOOST_AUTO_TEST_SUITE_END()
