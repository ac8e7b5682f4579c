// The node actor (actors/node.hpp) of a coordinator node under CAF's deterministic test
// coordinator: it spawns its membership, registers itself, sends heartbeats when its timer fires,
// answers for its actors and the cluster, and stops. Real processes and sockets stay in cluster
// and rl_rejoin; where a node stands with its coordinator is tested directly in node_join_state.

#include "actors/node.hpp"
#include "deterministic_system.hpp"
#include "messages/error_codes.hpp"
#include "messages/status_details.hpp"
#include "test_support.hpp"

#include <boost/test/unit_test.hpp>

using namespace kbrl;
using kbrl::test::contains;

namespace {

struct node_fixture : test::deterministic_system {
  test::temp_dir dir;
  node_actor head;

  node_fixture() {
    node_settings s;
    s.info.name = "head";
    s.info.host = "127.0.0.1";
    s.info.port = 4242;
    s.cluster = "test";
    s.coordinator = "head";
    s.coordinator_host = "127.0.0.1";
    s.coordinator_port = 4242;
    s.is_coordinator = true;
    s.run_dir = dir.path.string();
    s.run_config_toml = "[rl]\nsteps = 3\n";
    head = keep(sys.spawn(node, s));
    sched.run();
  }

  /// Asks the node.
  template <class T, class... Ts>
  caf::expected<T> ask_node(Ts... xs) {
    return ask<T>(head, xs...);
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(node_shell, node_fixture)

BOOST_AUTO_TEST_CASE(a_coordinator_node_joins_its_own_membership_and_answers_for_it) {
  auto own = ask_node<actor_status>(status_atom::value);
  BOOST_REQUIRE_MESSAGE(own, test::why(own));
  BOOST_CHECK_EQUAL(own->state, "coordinating");
  BOOST_CHECK_EQUAL(detail_of(*own, "joins"), "1");
  auto view = ask_node<membership_view>(nodes_atom::value);
  BOOST_REQUIRE_MESSAGE(view, test::why(view));
  BOOST_REQUIRE_EQUAL(view->nodes.size(), 1u);
  BOOST_CHECK_EQUAL(view->nodes[0].info.name, "head");
  BOOST_CHECK(view->nodes[0].state == node_state::up);
  auto all = ask_node<node_status>(status_atom::value, node_atom::value);
  BOOST_REQUIRE_MESSAGE(all, test::why(all));
  BOOST_CHECK_EQUAL(all->actors.size(), 2u); // the node and its membership
  auto mem = ask_node<actor_status>(status_atom::value, std::string("head/membership"));
  BOOST_REQUIRE_MESSAGE(mem, test::why(mem));
  BOOST_CHECK_EQUAL(mem->name, "head/membership");
  auto config = ask_node<std::string>(config_atom::value);
  BOOST_REQUIRE(config);
  BOOST_CHECK(contains(*config, "steps = 3"));
}

BOOST_AUTO_TEST_CASE(unknown_actors_are_named_with_what_the_node_has) {
  auto none = ask_node<actor_status>(status_atom::value, std::string("head/nothing"));
  BOOST_REQUIRE(!none);
  BOOST_CHECK(has_code(none.error(), errc::unknown_actor));
  BOOST_CHECK(contains(describe(none.error()), "head/membership"));
  auto verb = ask_node<std::string>(control_atom::value, std::string("restart"),
                               std::vector<std::string>{});
  BOOST_REQUIRE(!verb);
  BOOST_CHECK(has_code(verb.error(), errc::not_supported));
}

BOOST_AUTO_TEST_CASE(heartbeats_go_out_when_their_timer_fires_and_stop_ends_the_node) {
  for (int i = 0; i < 3; ++i) {
    sched.trigger_timeouts();
    sched.run();
  }
  auto own = ask_node<actor_status>(status_atom::value);
  BOOST_REQUIRE(own);
  BOOST_CHECK_NE(detail_of(*own, "heartbeats sent"), "0");
  caf::anon_send(head, stop_atom::value);
  sched.run();
  auto after = ask_node<actor_status>(status_atom::value);
  BOOST_CHECK(!after); // the node is gone: the request fails
}

BOOST_AUTO_TEST_SUITE_END()
