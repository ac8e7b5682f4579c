// Where a node stands with its coordinator (runtime/node/join_state.hpp), without actors:
// retries back off and log sparingly, one join and one heartbeat pending at a time, nothing
// after stop.

#include "runtime/node/join_state.hpp"

#include <boost/test/unit_test.hpp>

using namespace kbrl;
using std::chrono::milliseconds;

BOOST_AUTO_TEST_SUITE(node_join_state)

BOOST_AUTO_TEST_CASE(failed_attempts_back_off_to_five_seconds_and_log_sparingly) {
  join_state j;
  BOOST_CHECK_EQUAL(j.state_text(false), "joining (attempt 1)");
  std::vector<int64_t> delays;
  std::vector<bool> logged;
  for (int i = 0; i < 10; ++i) {
    auto r = j.failed("connection refused");
    delays.push_back(r.delay.count());
    logged.push_back(r.log);
  }
  BOOST_CHECK_EQUAL(delays[0], 1000);
  BOOST_CHECK_EQUAL(delays[1], 2000);
  BOOST_CHECK_EQUAL(delays[2], 4000);
  BOOST_CHECK_EQUAL(delays[3], 5000);
  BOOST_CHECK_EQUAL(delays[9], 5000);
  BOOST_CHECK(logged[0]);           // the first failure
  BOOST_CHECK(!logged[1]);          // the same reason again
  BOOST_CHECK(logged[9]);           // every 10th attempt
  BOOST_CHECK(j.failed("no membership: timeout").log); // a new reason
  BOOST_CHECK_EQUAL(j.state_text(false), "joining (attempt 12: no membership: timeout)");
  BOOST_CHECK_EQUAL(j.state_text(true), "coordinating");
}

BOOST_AUTO_TEST_CASE(a_join_resets_the_attempts_and_a_loss_joins_again) {
  join_state j;
  j.failed("refused");
  j.failed("refused");
  BOOST_CHECK(j.may_join());
  BOOST_CHECK_EQUAL(j.succeeded(), 2u);
  BOOST_CHECK(j.joined());
  BOOST_CHECK(!j.may_join());
  BOOST_CHECK_EQUAL(j.attempts(), 0u);
  BOOST_CHECK(j.last_error().empty());
  BOOST_CHECK_EQUAL(j.state_text(false), "joined");
  j.lost();
  BOOST_CHECK(j.may_join());
  BOOST_CHECK_EQUAL(j.succeeded(), 0u);
  BOOST_CHECK_EQUAL(j.joins(), 2u);
}

BOOST_AUTO_TEST_CASE(one_join_and_one_heartbeat_pending_at_a_time_and_none_after_stop) {
  join_state j;
  BOOST_CHECK(j.schedule_join());
  BOOST_CHECK(!j.schedule_join());
  j.join_fired();
  BOOST_CHECK(j.schedule_join());
  BOOST_CHECK(j.schedule_heartbeat());
  BOOST_CHECK(!j.schedule_heartbeat());
  j.heartbeat_fired();
  BOOST_CHECK(j.stop());
  BOOST_CHECK(!j.stop());
  BOOST_CHECK(!j.schedule_heartbeat());
  j.join_fired();
  BOOST_CHECK(!j.schedule_join());
  BOOST_CHECK(!j.may_join());
}

BOOST_AUTO_TEST_SUITE_END()
