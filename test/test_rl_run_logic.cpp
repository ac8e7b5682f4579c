// The RL run's pure pieces (runtime/node/worker_checks.hpp, runtime/node/run_progress.hpp):
// which learners and samplers may be used, what is said while waiting, whether the learner's
// newest checkpoint is its final state. No actors, no clock.

#include "runtime/node/run_progress.hpp"
#include "runtime/node/worker_checks.hpp"
#include "test_support.hpp"

#include <boost/test/unit_test.hpp>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>

using namespace kbrl;
using kbrl::test::contains;

namespace {

/// Two distinct actor handles (the checks compare handles, never message them).
struct handles {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::actor a = sys.spawn([](caf::event_based_actor*) -> caf::behavior { return {}; });
  caf::actor b = sys.spawn([](caf::event_based_actor*) -> caf::behavior { return {}; });
  ~handles() {
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(b, caf::exit_reason::user_shutdown);
  }
};

} // namespace

BOOST_AUTO_TEST_SUITE(rl_run_logic)

BOOST_FIXTURE_TEST_CASE(a_worker_is_asked_once_and_ready_when_it_answers, handles) {
  worker_checks c;
  BOOST_CHECK(c.seen("n/sampler.0", "sampler", a));  // ask it
  BOOST_CHECK(!c.seen("n/sampler.0", "sampler", a)); // being asked
  BOOST_CHECK(!c.ready("n/sampler.0"));
  c.no_answer("n/sampler.0"); // still loading its model
  BOOST_CHECK_EQUAL(c.missing("sampler", "a sampler"),
                    "a sampler (n/sampler.0 is loading its model)");
  BOOST_CHECK(c.seen("n/sampler.0", "sampler", a)); // asked again
  auto* w = c.answered("n/sampler.0", actor_health::ok, "");
  BOOST_REQUIRE(w);
  BOOST_CHECK(w->state == worker_check::ready);
  BOOST_CHECK(c.ready("n/sampler.0"));
  BOOST_CHECK_EQUAL(c.missing("sampler", "a sampler"), "a sampler");
  BOOST_CHECK(!c.answered("n/sampler.9", actor_health::ok, "")); // unknown
}

BOOST_FIXTURE_TEST_CASE(a_failed_worker_says_why_and_a_new_incarnation_is_checked_again,
                        handles) {
  worker_checks c;
  c.seen("n/learner", "learner", a);
  auto* w = c.answered("n/learner", actor_health::failed, "no model.safetensors in /m");
  BOOST_REQUIRE(w);
  BOOST_CHECK(w->state == worker_check::failed);
  BOOST_CHECK_EQUAL(c.missing("learner", "a learner"),
                    "a learner (n/learner failed: no model.safetensors in /m)");
  BOOST_CHECK(!c.seen("n/learner", "learner", a)); // the same handle: not asked again
  BOOST_CHECK(c.seen("n/learner", "learner", b));  // the node came back: a new handle
  BOOST_CHECK_EQUAL(to_string(worker_check::checking), std::string("checking"));
  BOOST_CHECK_EQUAL(to_string(run_phase::finishing), std::string("finishing"));
}

BOOST_AUTO_TEST_CASE(the_final_checkpoint_is_recognised_by_its_step) {
  BOOST_CHECK(checkpoint_is_current({{"step", "12"}, {"last checkpoint", "/run/ckpt/step-000012"}}));
  BOOST_CHECK(!checkpoint_is_current({{"step", "13"}, {"last checkpoint", "/run/ckpt/step-000012"}}));
  BOOST_CHECK(!checkpoint_is_current({{"step", "3"}}));
  BOOST_CHECK(checkpoint_is_current({{"last checkpoint", "/run/step-000000"}})); // step 0
}

BOOST_AUTO_TEST_SUITE_END()
