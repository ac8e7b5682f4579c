// Tests of the coordinator's membership: the pure table (runtime/node/membership_table.hpp) with
// explicit times, and the membership actor (actors/membership.hpp) driven deterministically by
// CAF's test coordinator with a fake wall clock: no sleeps, no sockets.

#include "deterministic_system.hpp"
#include "test_support.hpp"
#include "messages/status_details.hpp"

#include <boost/test/unit_test.hpp>

#include "actors/membership.hpp"
#include "messages/error_codes.hpp"
#include "messages/type_ids.hpp"
#include "runtime/io/clock.hpp"
#include "runtime/node/membership_table.hpp"

#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <spdlog/spdlog.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

using namespace kbrl;
using kbrl::test::contains;
using kbrl::test::starts_with;

namespace {

node_info make_info(const std::string& name, uint16_t port = 4242, int32_t pid = 100) {
  node_info info;
  info.name = name;
  info.host = "127.0.0.1";
  info.port = port;
  info.roles = {"sampler"};
  info.pid = pid;
  info.actors = {actor_entry{name + "/sampler.0", "sampler", caf::actor{}}};
  return info;
}

/// Why `x` failed, for a check's message ("" if it holds a value: Boost.Test builds messages even
/// when the check passes).
template <class T>
std::string why(const caf::expected<T>& x) {
  return x ? std::string{} : describe(x.error());
}

const node_record* find_in(const membership_view& view, const std::string& name) {
  for (auto& n : view.nodes)
    if (n.info.name == name)
      return &n;
  return nullptr;
}

constexpr int64_t t0 = 1'700'000'000'000; // an arbitrary wall-clock start, in ms

} // namespace

BOOST_AUTO_TEST_SUITE(membership)

// -- membership_table -----------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(table_first_join) {
  membership_table t{"c", "head"};
  BOOST_CHECK_EQUAL(t.revision(), 0u);
  BOOST_CHECK(t.find("a") == nullptr);
  BOOST_CHECK(t.register_node(make_info("a"), t0) == join_kind::first_join);
  const node_record* a = t.find("a");
  BOOST_REQUIRE(a != nullptr);
  BOOST_CHECK(a->state == node_state::up);
  BOOST_CHECK_EQUAL(a->incarnation, 1u);
  BOOST_CHECK_EQUAL(a->joined_unix_ms, t0);
  BOOST_CHECK_EQUAL(a->last_seen_unix_ms, t0);
  BOOST_CHECK_EQUAL(a->down_unix_ms, 0);
  BOOST_CHECK(a->down_reason.empty());
  BOOST_CHECK_EQUAL(t.revision(), 1u);
  BOOST_CHECK(t.register_node(make_info("b"), t0 + 1) == join_kind::first_join);
  auto view = t.view();
  BOOST_CHECK_EQUAL(view.cluster, "c");
  BOOST_CHECK_EQUAL(view.coordinator, "head");
  BOOST_CHECK_EQUAL(view.revision, 2u);
  BOOST_REQUIRE_EQUAL(view.nodes.size(), 2u);
  BOOST_CHECK_EQUAL(view.nodes[0].info.name, "a"); // order of first join
  BOOST_CHECK_EQUAL(view.nodes[1].info.name, "b");
  BOOST_CHECK_EQUAL(t.count(node_state::up), 2u);
  BOOST_CHECK_EQUAL(t.count(node_state::down), 0u);
  BOOST_CHECK_EQUAL(t.count(node_state::stopped), 0u);
}

BOOST_AUTO_TEST_CASE(table_rejoin_while_up_bumps_incarnation) {
  membership_table t{"c", "head"};
  t.register_node(make_info("a", 4242, /*pid=*/100), t0);
  // The process restarted faster than it was seen down: same name, new description.
  BOOST_CHECK(t.register_node(make_info("a", 4242, /*pid=*/200), t0 + 500) == join_kind::rejoin);
  const node_record* a = t.find("a");
  BOOST_REQUIRE(a != nullptr);
  BOOST_CHECK(a->state == node_state::up);
  BOOST_CHECK_EQUAL(a->incarnation, 2u);
  BOOST_CHECK_EQUAL(a->info.pid, 200); // the new description replaces the old one
  BOOST_CHECK_EQUAL(a->joined_unix_ms, t0 + 500);
  BOOST_CHECK_EQUAL(a->last_seen_unix_ms, t0 + 500);
  BOOST_CHECK_EQUAL(t.view().nodes.size(), 1u); // no duplicate record
  BOOST_CHECK_EQUAL(t.revision(), 2u);
}

BOOST_AUTO_TEST_CASE(table_rejoin_from_down_and_stopped) {
  membership_table t{"c", "head"};
  t.register_node(make_info("a"), t0);
  t.register_node(make_info("b"), t0);
  BOOST_CHECK(t.mark_down("a", "connection lost", t0 + 10));
  BOOST_CHECK(t.mark_stopped("b", t0 + 20));
  BOOST_CHECK(t.register_node(make_info("a"), t0 + 100) == join_kind::rejoin);
  BOOST_CHECK(t.register_node(make_info("b"), t0 + 200) == join_kind::rejoin);
  for (const char* name : {"a", "b"}) {
    const node_record* rec = t.find(name);
    BOOST_REQUIRE(rec != nullptr);
    BOOST_CHECK(rec->state == node_state::up);
    BOOST_CHECK_EQUAL(rec->incarnation, 2u);
    BOOST_CHECK_EQUAL(rec->down_unix_ms, 0); // cleared by the rejoin
    BOOST_CHECK(rec->down_reason.empty());
  }
  BOOST_CHECK_EQUAL(t.find("a")->joined_unix_ms, t0 + 100);
  BOOST_CHECK_EQUAL(t.find("b")->joined_unix_ms, t0 + 200);
  BOOST_CHECK_EQUAL(t.count(node_state::up), 2u);
  // A third incarnation counts on.
  t.register_node(make_info("a"), t0 + 300);
  BOOST_CHECK_EQUAL(t.find("a")->incarnation, 3u);
}

BOOST_AUTO_TEST_CASE(table_heartbeat_rules) {
  membership_table t{"c", "head"};
  BOOST_CHECK(!t.heartbeat("ghost", t0)); // unknown: must register
  t.register_node(make_info("a"), t0);
  BOOST_CHECK(t.heartbeat("a", t0 + 1000));
  BOOST_CHECK_EQUAL(t.find("a")->last_seen_unix_ms, t0 + 1000);
  // A late-arriving older heartbeat does not move last_seen backwards.
  BOOST_CHECK(t.heartbeat("a", t0 + 400));
  BOOST_CHECK_EQUAL(t.find("a")->last_seen_unix_ms, t0 + 1000);
  BOOST_CHECK_EQUAL(t.find("a")->joined_unix_ms, t0); // heartbeats do not rejoin
  BOOST_CHECK_EQUAL(t.find("a")->incarnation, 1u);
  // Down or stopped: false, and nothing changes.
  t.register_node(make_info("b"), t0);
  t.mark_down("a", "gone", t0 + 2000);
  t.mark_stopped("b", t0 + 2000);
  BOOST_CHECK(!t.heartbeat("a", t0 + 3000));
  BOOST_CHECK(!t.heartbeat("b", t0 + 3000));
  BOOST_CHECK(t.find("a")->state == node_state::down);
  BOOST_CHECK(t.find("b")->state == node_state::stopped);
  BOOST_CHECK_EQUAL(t.find("a")->last_seen_unix_ms, t0 + 1000);
}

BOOST_AUTO_TEST_CASE(table_mark_down_and_stopped) {
  membership_table t{"c", "head"};
  BOOST_CHECK(!t.mark_down("ghost", "x", t0));
  BOOST_CHECK(!t.mark_stopped("ghost", t0));
  BOOST_CHECK_EQUAL(t.revision(), 0u); // failed operations change nothing
  t.register_node(make_info("a"), t0);
  t.register_node(make_info("b"), t0);
  BOOST_CHECK_EQUAL(t.revision(), 2u);

  BOOST_CHECK(t.mark_down("a", "connection lost (killed)", t0 + 10));
  BOOST_CHECK_EQUAL(t.revision(), 3u);
  const node_record* a = t.find("a");
  BOOST_CHECK(a->state == node_state::down);
  BOOST_CHECK_EQUAL(a->down_reason, "connection lost (killed)");
  BOOST_CHECK_EQUAL(a->down_unix_ms, t0 + 10);
  // Already down: a second report changes nothing, the first reason stays.
  BOOST_CHECK(!t.mark_down("a", "other reason", t0 + 20));
  BOOST_CHECK(!t.mark_stopped("a", t0 + 20));
  BOOST_CHECK_EQUAL(a->down_reason, "connection lost (killed)");
  BOOST_CHECK_EQUAL(a->down_unix_ms, t0 + 10);
  BOOST_CHECK(a->state == node_state::down);
  BOOST_CHECK_EQUAL(t.revision(), 3u);

  BOOST_CHECK(t.mark_stopped("b", t0 + 30));
  BOOST_CHECK_EQUAL(t.revision(), 4u);
  const node_record* b = t.find("b");
  BOOST_CHECK(b->state == node_state::stopped);
  BOOST_CHECK_EQUAL(b->down_reason, "stopped cleanly");
  BOOST_CHECK_EQUAL(b->down_unix_ms, t0 + 30);
  // Stopped is final until a rejoin: neither down nor stopped again.
  BOOST_CHECK(!t.mark_down("b", "late down message", t0 + 40));
  BOOST_CHECK(!t.mark_stopped("b", t0 + 40));
  BOOST_CHECK(b->state == node_state::stopped);
  BOOST_CHECK_EQUAL(b->down_reason, "stopped cleanly");
  BOOST_CHECK_EQUAL(t.revision(), 4u);

  BOOST_CHECK_EQUAL(t.count(node_state::up), 0u);
  BOOST_CHECK_EQUAL(t.count(node_state::down), 1u);
  BOOST_CHECK_EQUAL(t.count(node_state::stopped), 1u);
}

BOOST_AUTO_TEST_CASE(table_expire_silent_boundaries) {
  membership_table t{"c", "head"};
  const int64_t timeout = 5000;
  t.register_node(make_info("a"), t0);
  t.register_node(make_info("b"), t0);
  t.register_node(make_info("c"), t0);
  t.mark_stopped("c", t0 + 1); // not up: never expired
  BOOST_CHECK(t.heartbeat("b", t0 + 3000));
  const auto rev = t.revision();

  // Exactly at the timeout is not yet silent.
  BOOST_CHECK(t.expire_silent(t0 + timeout, timeout).empty());
  BOOST_CHECK(t.find("a")->state == node_state::up);
  BOOST_CHECK_EQUAL(t.revision(), rev);

  // One millisecond past it is.
  auto expired = t.expire_silent(t0 + timeout + 1, timeout);
  BOOST_CHECK(expired == std::vector<std::string>{"a"});
  const node_record* a = t.find("a");
  BOOST_CHECK(a->state == node_state::down);
  BOOST_CHECK_EQUAL(a->down_unix_ms, t0 + timeout + 1);
  BOOST_CHECK_EQUAL(format_duration_ms(5001), "5.0 s");
  BOOST_CHECK_EQUAL(a->down_reason, "no heartbeat for 5.0 s");
  BOOST_CHECK_EQUAL(t.revision(), rev + 1);
  BOOST_CHECK(t.find("b")->state == node_state::up); // heard 2001 ms ago
  BOOST_CHECK(t.find("c")->state == node_state::stopped);

  // b goes silent for longer; the reason reports the silence, counted from the last heartbeat.
  expired = t.expire_silent(t0 + 3000 + 12'345, timeout);
  BOOST_CHECK(expired == std::vector<std::string>{"b"});
  BOOST_CHECK_EQUAL(t.find("b")->down_reason, "no heartbeat for 12.3 s");
  // Down nodes are not expired twice.
  BOOST_CHECK(t.expire_silent(t0 + 1'000'000, timeout).empty());
  BOOST_CHECK_EQUAL(t.find("a")->down_reason, "no heartbeat for 5.0 s");
}

BOOST_AUTO_TEST_CASE(table_expire_several_at_once) {
  membership_table t{"c", "head"};
  t.register_node(make_info("a"), t0);
  t.register_node(make_info("b"), t0 + 100);
  auto expired = t.expire_silent(t0 + 100 + 90'000, /*timeout_ms=*/1000);
  BOOST_CHECK((expired == std::vector<std::string>{"a", "b"}));
  BOOST_CHECK_EQUAL(t.find("a")->down_reason, "no heartbeat for 1 min 30 s");
  BOOST_CHECK_EQUAL(t.find("b")->down_reason, "no heartbeat for 1 min 30 s");
  BOOST_CHECK_EQUAL(t.count(node_state::down), 2u);
  BOOST_CHECK_EQUAL(t.revision(), 4u); // two joins, two downs
}

BOOST_AUTO_TEST_CASE(format_duration_examples) {
  BOOST_CHECK_EQUAL(format_duration_ms(-5), "0 ms");
  BOOST_CHECK_EQUAL(format_duration_ms(0), "0 ms");
  BOOST_CHECK_EQUAL(format_duration_ms(999), "999 ms");
  BOOST_CHECK_EQUAL(format_duration_ms(1000), "1.0 s");
  BOOST_CHECK_EQUAL(format_duration_ms(4200), "4.2 s");
  BOOST_CHECK_EQUAL(format_duration_ms(59'900), "59.9 s");
  BOOST_CHECK_EQUAL(format_duration_ms(60'000), "1 min 0 s");
  BOOST_CHECK_EQUAL(format_duration_ms(192'000), "3 min 12 s");
  BOOST_CHECK_EQUAL(format_duration_ms(3'600'000), "1 h 0 min");
  BOOST_CHECK_EQUAL(format_duration_ms(7'500'000), "2 h 5 min");
}

BOOST_AUTO_TEST_CASE(table_find_actor_host) {
  membership_table t{"c", "head"};
  t.register_node(make_info("gpu1"), t0);
  t.register_node(make_info("head"), t0);
  const node_record* host = t.find_actor_host("gpu1/evaluator.0");
  BOOST_REQUIRE(host != nullptr);
  BOOST_CHECK_EQUAL(host->info.name, "gpu1");
  BOOST_CHECK_EQUAL(t.find_actor_host("head/learner"), t.find("head"));
  BOOST_CHECK(t.find_actor_host("gpu2/evaluator.0") == nullptr);
  BOOST_CHECK(t.find_actor_host("learner") == nullptr);  // no node part
  BOOST_CHECK(t.find_actor_host("/learner") == nullptr); // empty node part
  BOOST_CHECK(t.find_actor_host("gpu") == nullptr);      // no prefix matching
  // A down node is still found: callers decide what "down" means for them.
  t.mark_down("gpu1", "gone", t0 + 1);
  BOOST_CHECK_EQUAL(t.find_actor_host("gpu1/sampler.0"), t.find("gpu1"));
}

BOOST_AUTO_TEST_CASE(node_of_actor_splits_at_first_slash) {
  BOOST_CHECK_EQUAL(node_of_actor("gpu1/evaluator.0"), "gpu1");
  BOOST_CHECK_EQUAL(node_of_actor("head/learner"), "head");
  BOOST_CHECK_EQUAL(node_of_actor("a/b/c"), "a");
  BOOST_CHECK_EQUAL(node_of_actor("learner"), "");
  BOOST_CHECK_EQUAL(node_of_actor("/learner"), "");
  BOOST_CHECK_EQUAL(node_of_actor(""), "");
}

// -- the membership actor -------------------------------------------------------------------------

namespace {

/// An actor system on CAF's deterministic test scheduler with one membership actor whose wall
/// clock is `now`. Every actor it spawns is stopped at the end so the system can shut down.
struct membership_fixture : kbrl::test::deterministic_system {
  int64_t now = t0;                  ///< the fake wall clock, in ms since the epoch
  membership_settings settings;
  membership_actor mem;

  membership_fixture() {
    settings.cluster = "test-cluster";
    settings.coordinator = "head";
    settings.heartbeat_interval = std::chrono::milliseconds(1000);
    settings.node_timeout = std::chrono::milliseconds(5000);
    settings.clock = [this] { return now; };
    mem = keep(sys.spawn(kbrl::membership, settings));
    sched.run();
  }

  /// A stand-in for a node actor: answers status requests for its actors.
  caf::actor spawn_node_actor(const std::string& node) {
    auto a = sys.spawn([node](caf::event_based_actor*) -> caf::behavior {
      return {
        [node](status_atom, const std::string& actor) -> actor_status {
          actor_status st;
          st.name = actor;
          st.node = node;
          st.state = "idle (dummy)";
          return st;
        },
      };
    });
    spawned.push_back(a);
    return a;
  }

  /// An actor that records every membership_view it receives.
  std::pair<membership_listener_actor, std::shared_ptr<std::vector<membership_view>>>
  spawn_recorder() {
    auto log = std::make_shared<std::vector<membership_view>>();
    auto a = sys.spawn([log](caf::event_based_actor*) -> caf::behavior {
      return {[log](const membership_view& v) { log->push_back(v); }};
    });
    spawned.push_back(a);
    return {caf::actor_cast<membership_listener_actor>(a), log};
  }

  /// Sends a request to the membership actor from a helper actor, runs the system until it is
  /// quiet and returns the answer (a value or an error).
  template <class T, class... Ts>
  caf::expected<T> ask(Ts... xs) {
    auto box = std::make_shared<std::optional<caf::expected<T>>>();
    auto target = mem;
    auto requester = sys.spawn([=](caf::event_based_actor* self) {
      self->request(target, caf::infinite, xs...)
        .then([=](T& x) { box->emplace(std::move(x)); },
              [=](caf::error& err) { box->emplace(std::move(err)); });
    });
    spawned.push_back(requester);
    sched.run();
    BOOST_REQUIRE_MESSAGE(box->has_value(), "the membership actor did not answer");
    return std::move(**box);
  }

  membership_view join(const std::string& name, const caf::actor& node_actor) {
    auto v = ask<membership_view>(register_atom::value, make_info(name),
                                  caf::actor_cast<actor_host_actor>(node_actor));
    BOOST_REQUIRE_MESSAGE(v, why(v));
    return *v;
  }

  membership_view view() {
    auto v = ask<membership_view>(membership_atom::value);
    BOOST_REQUIRE_MESSAGE(v, why(v));
    return *v;
  }

  bool heartbeat(const std::string& name) {
    auto ok = ask<bool>(heartbeat_atom::value, name);
    BOOST_REQUIRE_MESSAGE(ok, why(ok));
    return *ok;
  }

  bool leave(const std::string& name) {
    auto ok = ask<bool>(leave_atom::value, name);
    BOOST_REQUIRE_MESSAGE(ok, why(ok));
    return *ok;
  }

  /// The record of `name` in the current view (the test fails if there is none).
  node_record record(const std::string& name) {
    auto v = view();
    const node_record* rec = find_in(v, name);
    BOOST_REQUIRE_MESSAGE(rec != nullptr, "no node " + name + " in the view");
    return *rec;
  }

  /// Delivers the pending liveness tick and lets the membership actor handle it.
  void tick() {
    BOOST_REQUIRE_MESSAGE(sched.trigger_timeouts() > 0, "no tick was scheduled");
    sched.run();
  }

  void kill(const caf::actor& a) {
    caf::anon_send_exit(a, caf::exit_reason::kill);
    sched.run();
  }
};

std::string detail(const actor_status& st, const std::string& key) {
  return detail_of(st, key, "<missing " + key + ">");
}

} // namespace

BOOST_FIXTURE_TEST_CASE(actor_registers_two_nodes, membership_fixture) {
  auto a = spawn_node_actor("a");
  auto b = spawn_node_actor("b");
  auto v1 = join("a", a);
  BOOST_CHECK_EQUAL(v1.cluster, "test-cluster");
  BOOST_CHECK_EQUAL(v1.coordinator, "head");
  BOOST_REQUIRE_EQUAL(v1.nodes.size(), 1u);
  auto v2 = join("b", b);
  BOOST_CHECK_GT(v2.revision, v1.revision);
  auto v = view();
  BOOST_REQUIRE_EQUAL(v.nodes.size(), 2u);
  BOOST_CHECK_EQUAL(v.nodes[0].info.name, "a");
  BOOST_CHECK_EQUAL(v.nodes[1].info.name, "b");
  for (auto& n : v.nodes) {
    BOOST_CHECK(n.state == node_state::up);
    BOOST_CHECK_EQUAL(n.incarnation, 1u);
    BOOST_CHECK_EQUAL(n.joined_unix_ms, t0); // the injected clock, not the system's
  }
  BOOST_CHECK_EQUAL(v.revision, v2.revision);
}

BOOST_FIXTURE_TEST_CASE(actor_heartbeat_of_unknown_node_answers_false, membership_fixture) {
  BOOST_CHECK(!heartbeat("ghost"));
  join("a", spawn_node_actor("a"));
  BOOST_CHECK(heartbeat("a"));
  BOOST_CHECK(!heartbeat("ghost"));
}

BOOST_FIXTURE_TEST_CASE(actor_node_actor_death_marks_node_down, membership_fixture) {
  auto a = spawn_node_actor("a");
  auto b = spawn_node_actor("b");
  join("a", a);
  join("b", b);
  now += 42;
  kill(a);
  auto rec = record("a");
  BOOST_CHECK(rec.state == node_state::down);
  BOOST_CHECK_MESSAGE(starts_with(rec.down_reason, "connection lost"), rec.down_reason);
  BOOST_CHECK_EQUAL(rec.down_unix_ms, t0 + 42);
  BOOST_CHECK(record("b").state == node_state::up);
  // The node must register again: its heartbeats are refused meanwhile.
  BOOST_CHECK(!heartbeat("a"));
  auto a2 = spawn_node_actor("a");
  join("a", a2);
  rec = record("a");
  BOOST_CHECK(rec.state == node_state::up);
  BOOST_CHECK_EQUAL(rec.incarnation, 2u);
  BOOST_CHECK(rec.down_reason.empty());
  BOOST_CHECK(heartbeat("a"));
}

BOOST_FIXTURE_TEST_CASE(actor_ignores_down_of_an_older_incarnation, membership_fixture) {
  auto old_actor = spawn_node_actor("a");
  auto new_actor = spawn_node_actor("a");
  join("a", old_actor);
  join("a", new_actor); // restarted before the old process was seen down
  BOOST_CHECK_EQUAL(record("a").incarnation, 2u);
  const auto rev = view().revision;
  kill(old_actor);
  auto rec = record("a");
  BOOST_CHECK(rec.state == node_state::up);
  BOOST_CHECK_EQUAL(rec.incarnation, 2u);
  BOOST_CHECK(rec.down_reason.empty());
  BOOST_CHECK_EQUAL(view().revision, rev);
  BOOST_CHECK(heartbeat("a"));
  // The current incarnation's death still counts.
  kill(new_actor);
  BOOST_CHECK(record("a").state == node_state::down);
}

BOOST_FIXTURE_TEST_CASE(actor_silent_node_goes_down_on_tick, membership_fixture) {
  auto a = spawn_node_actor("a");
  join("a", a);
  // Exactly at the timeout: still up.
  now = t0 + 5000;
  tick();
  BOOST_CHECK(record("a").state == node_state::up);
  // Past it: down, with the silence in words. The tick re-armed itself after the first one.
  now = t0 + 5001;
  tick();
  auto rec = record("a");
  BOOST_CHECK(rec.state == node_state::down);
  BOOST_CHECK_MESSAGE(starts_with(rec.down_reason, "no heartbeat"), rec.down_reason);
  BOOST_CHECK_EQUAL(rec.down_reason, "no heartbeat for 5.0 s");
  BOOST_CHECK_EQUAL(rec.down_unix_ms, t0 + 5001);
  BOOST_CHECK(!heartbeat("a")); // a hung node that wakes up must register again
  // Its actor dying later does not change the reason it was declared down for.
  kill(a);
  BOOST_CHECK_EQUAL(record("a").down_reason, "no heartbeat for 5.0 s");
}

BOOST_FIXTURE_TEST_CASE(actor_node_that_heartbeats_stays_up, membership_fixture) {
  join("a", spawn_node_actor("a"));
  join("b", spawn_node_actor("b"));
  for (int i = 1; i <= 10; ++i) { // 10 s of ticks, a heartbeating every 1 s, b silent
    now = t0 + i * 1000;
    BOOST_CHECK(heartbeat("a"));
    tick();
  }
  BOOST_CHECK(record("a").state == node_state::up);
  BOOST_CHECK_EQUAL(record("a").last_seen_unix_ms, t0 + 10'000);
  BOOST_CHECK(record("b").state == node_state::down);
  BOOST_CHECK_EQUAL(record("b").down_reason, "no heartbeat for 6.0 s"); // first tick past 5 s
}

BOOST_FIXTURE_TEST_CASE(actor_leave_marks_stopped, membership_fixture) {
  auto a = spawn_node_actor("a");
  join("a", a);
  BOOST_CHECK(!leave("ghost"));
  now += 7;
  BOOST_CHECK(leave("a"));
  auto rec = record("a");
  BOOST_CHECK(rec.state == node_state::stopped);
  BOOST_CHECK_EQUAL(rec.down_reason, "stopped cleanly");
  BOOST_CHECK_EQUAL(rec.down_unix_ms, t0 + 7);
  BOOST_CHECK(!leave("a")); // a second goodbye changes nothing
  // The process exits after its goodbye: that is not a crash.
  kill(a);
  BOOST_CHECK(record("a").state == node_state::stopped);
  BOOST_CHECK_EQUAL(record("a").down_reason, "stopped cleanly");
  // Nor is a stopped node expired by silence.
  now += 60'000;
  tick();
  BOOST_CHECK(record("a").state == node_state::stopped);
}

BOOST_FIXTURE_TEST_CASE(actor_subscriber_gets_a_view_after_each_change, membership_fixture) {
  auto [sub, log] = spawn_recorder();
  caf::anon_send(mem, subscribe_atom::value, sub);
  sched.run();
  BOOST_REQUIRE_EQUAL(log->size(), 1u); // the current view right away
  BOOST_CHECK(log->back().nodes.empty());

  auto a = spawn_node_actor("a");
  auto b = spawn_node_actor("b");
  join("a", a);
  BOOST_REQUIRE_EQUAL(log->size(), 2u);
  BOOST_REQUIRE(find_in(log->back(), "a") != nullptr);
  BOOST_CHECK(find_in(log->back(), "a")->state == node_state::up);

  join("b", b);
  BOOST_REQUIRE_EQUAL(log->size(), 3u);
  BOOST_CHECK_EQUAL(log->back().nodes.size(), 2u);

  heartbeat("a"); // not a change
  view();         // nor is a query
  BOOST_CHECK_EQUAL(log->size(), 3u);

  kill(a);
  BOOST_REQUIRE_EQUAL(log->size(), 4u);
  BOOST_CHECK(find_in(log->back(), "a")->state == node_state::down);

  leave("b");
  BOOST_REQUIRE_EQUAL(log->size(), 5u);
  BOOST_CHECK(find_in(log->back(), "b")->state == node_state::stopped);

  leave("b"); // refused: no change, no view
  BOOST_CHECK_EQUAL(log->size(), 5u);

  join("c", spawn_node_actor("c"));
  now += 10'000;
  tick();
  BOOST_REQUIRE_EQUAL(log->size(), 7u); // c joined, c went silent
  BOOST_CHECK(find_in(log->back(), "c")->state == node_state::down);

  // Revisions grow with every view sent.
  for (size_t i = 1; i < log->size(); ++i)
    BOOST_CHECK_GT((*log)[i].revision, (*log)[i - 1].revision);
}

BOOST_FIXTURE_TEST_CASE(actor_forgets_a_dead_subscriber, membership_fixture) {
  auto [sub, log] = spawn_recorder();
  caf::anon_send(mem, subscribe_atom::value, sub);
  sched.run();
  auto own = ask<actor_status>(status_atom::value);
  BOOST_REQUIRE(own);
  BOOST_CHECK_EQUAL(detail(*own, "subscribers"), "1");
  kill(caf::actor_cast<caf::actor>(sub));
  own = ask<actor_status>(status_atom::value);
  BOOST_REQUIRE(own);
  BOOST_CHECK_EQUAL(detail(*own, "subscribers"), "0");
  // A dead subscriber is no node: nothing is marked down and the view is unchanged.
  auto a = spawn_node_actor("a");
  join("a", a);
  BOOST_CHECK(record("a").state == node_state::up);
}

BOOST_FIXTURE_TEST_CASE(actor_own_status_counts_nodes, membership_fixture) {
  auto a = spawn_node_actor("a");
  join("a", a);
  join("b", spawn_node_actor("b"));
  join("c", spawn_node_actor("c"));
  kill(a);
  leave("b");
  auto st = ask<actor_status>(status_atom::value);
  BOOST_REQUIRE_MESSAGE(st, why(st));
  BOOST_CHECK_EQUAL(st->name, "head/membership");
  BOOST_CHECK_EQUAL(st->role, "membership");
  BOOST_CHECK_EQUAL(st->node, "head");
  BOOST_CHECK_EQUAL(detail(*st, "nodes up"), "1");
  BOOST_CHECK_EQUAL(detail(*st, "nodes down"), "1");
  BOOST_CHECK_EQUAL(detail(*st, "nodes stopped"), "1");
  BOOST_CHECK_GT(st->messages_handled, 0u);
  // The same answer by full name, through the cluster-wide status handler.
  auto by_name = ask<actor_status>(status_atom::value, std::string{"head/membership"});
  BOOST_REQUIRE_MESSAGE(by_name, why(by_name));
  BOOST_CHECK_EQUAL(by_name->name, "head/membership");
  BOOST_CHECK_EQUAL(detail(*by_name, "nodes up"), "1");
}

BOOST_FIXTURE_TEST_CASE(actor_status_of_unknown_node_fails, membership_fixture) {
  join("a", spawn_node_actor("a"));
  auto st = ask<actor_status>(status_atom::value, std::string{"ghost/learner"});
  BOOST_REQUIRE(!st);
  BOOST_CHECK(code_of(st.error()) == errc::unknown_actor);
  BOOST_CHECK_MESSAGE(contains(describe(st.error()), "ghost"), describe(st.error()));
  // A name without a node part names no node either.
  st = ask<actor_status>(status_atom::value, std::string{"learner"});
  BOOST_REQUIRE(!st);
  BOOST_CHECK(code_of(st.error()) == errc::unknown_actor);
}

BOOST_FIXTURE_TEST_CASE(actor_status_of_down_node_fails_with_reason, membership_fixture) {
  auto a = spawn_node_actor("a");
  join("a", a);
  join("b", spawn_node_actor("b"));
  kill(a);
  auto st = ask<actor_status>(status_atom::value, std::string{"a/sampler.0"});
  BOOST_REQUIRE(!st);
  BOOST_CHECK(code_of(st.error()) == errc::node_unreachable);
  auto text = describe(st.error());
  BOOST_CHECK_MESSAGE(contains(text, "node a is down"), text);
  BOOST_CHECK_MESSAGE(contains(text, "connection lost"), text);
  // Silent nodes say so too.
  now += 10'000;
  tick();
  st = ask<actor_status>(status_atom::value, std::string{"b/sampler.0"});
  BOOST_REQUIRE(!st);
  BOOST_CHECK(code_of(st.error()) == errc::node_unreachable);
  text = describe(st.error());
  BOOST_CHECK_MESSAGE(contains(text, "no heartbeat for 10.0 s"), text);
  // And stopped ones.
  join("c", spawn_node_actor("c"));
  leave("c");
  st = ask<actor_status>(status_atom::value, std::string{"c/sampler.0"});
  BOOST_REQUIRE(!st);
  BOOST_CHECK(code_of(st.error()) == errc::node_unreachable);
  text = describe(st.error());
  BOOST_CHECK_MESSAGE(contains(text, "node c is stopped"), text);
  BOOST_CHECK_MESSAGE(contains(text, "stopped cleanly"), text);
}

BOOST_FIXTURE_TEST_CASE(actor_status_of_up_node_is_relayed, membership_fixture) {
  auto old_actor = spawn_node_actor("a-old");
  auto new_actor = spawn_node_actor("a-new");
  join("a", old_actor);
  join("a", new_actor);
  auto st = ask<actor_status>(status_atom::value, std::string{"a/sampler.0"});
  BOOST_REQUIRE_MESSAGE(st, why(st));
  BOOST_CHECK_EQUAL(st->name, "a/sampler.0");
  BOOST_CHECK_EQUAL(st->node, "a-new"); // asked the current incarnation's node actor
  BOOST_CHECK_EQUAL(st->state, "idle (dummy)");
}

BOOST_FIXTURE_TEST_CASE(actor_refuses_control_verbs_for_itself, membership_fixture) {
  auto answer = ask<std::string>(control_atom::value, std::string{"restart"},
                                 std::vector<std::string>{});
  BOOST_REQUIRE(!answer);
  BOOST_CHECK(code_of(answer.error()) == errc::not_supported);
  BOOST_CHECK_MESSAGE(contains(describe(answer.error()), "'restart'"),
                      describe(answer.error()));
  // Control of an actor on an unknown node fails like status does.
  answer = ask<std::string>(control_atom::value, std::string{"ghost/sampler.0"},
                            std::string{"restart"}, std::vector<std::string>{});
  BOOST_REQUIRE(!answer);
  BOOST_CHECK(code_of(answer.error()) == errc::unknown_actor);
}

BOOST_AUTO_TEST_SUITE_END()
