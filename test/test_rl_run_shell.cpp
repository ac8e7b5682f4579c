// The RL run actor (actors/rl_run.hpp) under CAF's deterministic test coordinator: a real
// membership actor with a fake clock, a node double, and the pipeline doubles as the cluster's
// learner, sampler and evaluator. It waits for them, runs the coordinator to the end and tells
// the node to stop; a learner that says it failed ends the node with that error. Ticks are
// delivered by trigger_timeouts(), nothing sleeps.

#include "actors/membership.hpp"
#include "actors/metrics.hpp"
#include "actors/rl_run.hpp"
#include "deterministic_system.hpp"
#include "messages/status_details.hpp"
#include "pipeline_doubles.hpp"
#include "runtime/episode/coordinator_checkpoint.hpp"
#include "test_support.hpp"
#include "tokenizer_fixture.hpp"

#include <boost/test/unit_test.hpp>

using namespace kbrl;
using kbrl::test::contains;

namespace {

constexpr int64_t t0 = 1'700'000'000'000;

/// What the node double was told: "stop", or "exit: <reason>".
struct node_log {
  std::vector<std::string> events;
};

node_actor::behavior_type node_double(node_actor::pointer self, std::shared_ptr<node_log> log) {
  self->set_exit_handler([self, log](const caf::exit_msg& msg) {
    log->events.push_back("exit: " + describe(msg.reason));
    self->quit(msg.reason);
  });
  return {
    [](status_atom) { return actor_status{}; },
    [](control_atom, const std::string&, const std::vector<std::string>&) { return std::string(); },
    [](status_atom, node_atom) { return node_status{}; },
    [](status_atom, const std::string&) { return actor_status{}; },
    [](control_atom, const std::string&, const std::string&, const std::vector<std::string>&) {
      return std::string();
    },
    [](nodes_atom) { return membership_view{}; },
    [](membership_atom) { return membership_actor{}; },
    [](config_atom) { return std::string(); },
    [log](stop_atom) { log->events.push_back("stop"); },
  };
}

/// A learner that cannot train: its status says failed, with why.
learner_actor::behavior_type broken_learner(learner_actor::pointer) {
  return {
    [](status_atom) {
      actor_status s;
      s.state = "failed";
      s.health = actor_health::failed;
      s.last_error = "no model.safetensors in /models/tiny";
      return s;
    },
    [](control_atom, const std::string&, const std::vector<std::string>&) { return std::string(); },
    [](train_atom, trajectory_batch&) -> caf::result<policy_update> {
      return make_error(errc::invalid_config, "cannot train");
    },
    [](policy_atom) { return policy_update{}; },
    [](subscribe_atom, policy_listener_actor) {},
  };
}

struct run_fixture : test::deterministic_system {
  test::temp_dir dir;
  int64_t now = t0;
  std::shared_ptr<test::pipeline_log> log = std::make_shared<test::pipeline_log>();
  std::shared_ptr<node_log> node_events = std::make_shared<node_log>();
  membership_actor mem;
  node_actor head;

  run_fixture() {
    membership_settings ms;
    ms.cluster = "test";
    ms.coordinator = "head";
    ms.clock = [this] { return now; };
    mem = keep(sys.spawn(membership, ms));
    head = keep(sys.spawn(node_double, node_events));
    sched.run();
  }

  /// Registers node "w" with these role actors.
  void join_workers(const caf::actor& learner) {
    node_info info;
    info.name = "w";
    info.host = "127.0.0.1";
    info.port = 1;
    info.roles = {"learner", "sampler", "evaluator"};
    actor_stats m;
    m.name = "w/metrics";
    info.actors = {
      {"w/learner", "learner", learner},
      {"w/metrics", "metrics",
       caf::actor_cast<caf::actor>(keep(sys.spawn(metrics_sink, m, dir / "metrics.jsonl", std::string())))},
      {"w/sampler.0", "sampler",
       caf::actor_cast<caf::actor>(keep(sys.spawn(test::versioned_sampler, log)))},
      {"w/evaluator-supervisor", "evaluator-supervisor",
       caf::actor_cast<caf::actor>(keep(sys.spawn(test::verdict_evaluator, log)))}};
    auto w_node = keep(sys.spawn(node_double, std::make_shared<node_log>()));
    auto view = ask<membership_view>(mem, register_atom::value, info,
                                     caf::actor_cast<actor_host_actor>(w_node));
    BOOST_REQUIRE_MESSAGE(view, test::why(view));
  }

  rl_run_actor start(uint64_t steps) {
    auto in = std::make_shared<rl_run_inputs>();
    auto& c = in->settings.coordinator;
    c.steps = steps;
    c.problems_per_step = 1;
    c.group_size = 2;
    c.run_dir = dir.path.string();
    c.episodes.max_turns = 1;
    in->train = {test::pipeline_problem(1), test::pipeline_problem(2)};
    in->tokenizer = std::make_shared<tok::tokenizer>(test::byte_tokenizer());
    in->chat = std::make_shared<tok::chat_format>(*tok::chat_format::by_name("chatml"));
    actor_stats stats;
    stats.name = "head/coordinator";
    stats.node = "head";
    auto r = keep(sys.spawn(rl_run, stats, std::shared_ptr<const rl_run_inputs>(in), head, mem));
    sched.run();
    return r;
  }

  /// Delivers the pending ticks and timeouts `rounds` times, running the system in between.
  void tick(int rounds) {
    for (int i = 0; i < rounds; ++i) {
      now += 500;
      sched.trigger_timeouts();
      sched.run();
    }
  }

  actor_status status(const rl_run_actor& r) {
    auto s = ask<actor_status>(r, status_atom::value);
    BOOST_REQUIRE_MESSAGE(s, test::why(s));
    return *s;
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(rl_run_shell, run_fixture)

BOOST_AUTO_TEST_CASE(it_waits_for_the_cluster_runs_to_the_end_and_stops_the_node) {
  auto r = start(2);
  auto waiting = status(r);
  BOOST_CHECK_EQUAL(waiting.state, "waiting");
  auto missing = detail_of(waiting, "waiting for");
  BOOST_CHECK_MESSAGE(contains(missing, "a learner") && contains(missing, "a sampler")
                        && contains(missing, "an evaluator"),
                      missing);
  join_workers(caf::actor_cast<caf::actor>(keep(sys.spawn(test::gated_learner, log))));
  tick(10);
  BOOST_REQUIRE_MESSAGE(!node_events->events.empty(), "the node was never told to stop");
  BOOST_CHECK_EQUAL(node_events->events.front(), "stop");
  auto cp = read_coordinator_checkpoint(dir.path.string());
  BOOST_REQUIRE(cp);
  BOOST_CHECK_EQUAL(cp->step, 2u);
  BOOST_CHECK_EQUAL(log->batches.size(), 2u);
}

BOOST_AUTO_TEST_CASE(a_learner_that_cannot_train_ends_the_node_with_its_reason) {
  auto r = start(2);
  join_workers(caf::actor_cast<caf::actor>(keep(sys.spawn(broken_learner))));
  tick(3);
  BOOST_REQUIRE(!node_events->events.empty());
  BOOST_CHECK_MESSAGE(contains(node_events->events.front(), "no model.safetensors"),
                      node_events->events.front());
  BOOST_CHECK(log->batches.empty());
}

BOOST_AUTO_TEST_SUITE_END()
