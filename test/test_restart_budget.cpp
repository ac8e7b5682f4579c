// The evaluator supervisor's restart budget (runtime/eval/restart_budget.hpp): pure, the time
// is passed in.

#include "runtime/eval/restart_budget.hpp"
#include "runtime/eval/slot_state.hpp"

#include <boost/test/unit_test.hpp>

#include <string>

using namespace kbrl::eval;
using namespace std::chrono_literals;

BOOST_AUTO_TEST_SUITE(restart_budget)

BOOST_AUTO_TEST_CASE(limit_restarts_within_the_window_then_spent) {
  kbrl::eval::restart_budget b{3, 60s};
  BOOST_CHECK(b.try_restart(0));
  BOOST_CHECK(b.try_restart(1000));
  BOOST_CHECK(b.try_restart(2000));
  BOOST_CHECK_EQUAL(b.in_window(), 3u);
  BOOST_CHECK(!b.try_restart(3000)); // the fourth within 60 s: spent, nothing recorded
  BOOST_CHECK_EQUAL(b.in_window(), 3u);
}

BOOST_AUTO_TEST_CASE(restarts_older_than_the_window_no_longer_count) {
  kbrl::eval::restart_budget b{2, 10s};
  BOOST_CHECK(b.try_restart(0));
  BOOST_CHECK(b.try_restart(5000));
  BOOST_CHECK(!b.try_restart(10'000)); // 0 is exactly 10 s old: still inside
  BOOST_CHECK(b.try_restart(10'001));  // 0 has left the window
  BOOST_CHECK_EQUAL(b.in_window(), 2u); // 5000 and 10001
}

BOOST_AUTO_TEST_CASE(reset_after_the_back_off_starts_over) {
  kbrl::eval::restart_budget b{1, 60s};
  BOOST_CHECK(b.try_restart(0));
  BOOST_CHECK(!b.try_restart(1));
  b.reset();
  BOOST_CHECK_EQUAL(b.in_window(), 0u);
  BOOST_CHECK(b.try_restart(2));
}

BOOST_AUTO_TEST_CASE(a_zero_limit_never_restarts) {
  kbrl::eval::restart_budget b{0, 60s};
  BOOST_CHECK(!b.try_restart(0));
}

BOOST_AUTO_TEST_CASE(slot_states_are_spelled_as_the_status_shows_them) {
  BOOST_CHECK_EQUAL(std::string(to_string(slot_state::starting)), "starting");
  BOOST_CHECK_EQUAL(std::string(to_string(slot_state::running)), "running");
  BOOST_CHECK_EQUAL(std::string(to_string(slot_state::restarting)), "restarting");
  BOOST_CHECK_EQUAL(std::string(to_string(slot_state::degraded)), "degraded");
}

BOOST_AUTO_TEST_SUITE_END()
