// kbrl-shell's reading of what a person types: short actor names, one config section, and a
// timed-out request said in words.

#include "runtime/shell/shell_names.hpp"

#include "messages/errors.hpp"
#include "test_support.hpp"

#include <caf/sec.hpp>
#include <boost/test/unit_test.hpp>

using namespace kbrl;
using kbrl::test::contains;

namespace {

membership_view two_nodes() {
  membership_view v;
  node_record head, gpu;
  head.info.name = "head";
  head.info.actors = {{"head/node", "node", {}}, {"head/coordinator", "coordinator", {}},
                      {"head/evaluator.0", "evaluator", {}}};
  gpu.info.name = "gpu1";
  gpu.info.actors = {{"gpu1/node", "node", {}}, {"gpu1/evaluator.0", "evaluator", {}}};
  v.nodes = {head, gpu};
  return v;
}

} // namespace

BOOST_AUTO_TEST_SUITE(shell_names)

BOOST_AUTO_TEST_CASE(a_role_without_its_node_names_the_one_actor_that_has_it) {
  auto v = two_nodes();
  BOOST_CHECK_EQUAL(*resolve_actor_name(v, "coordinator"), "head/coordinator");
  BOOST_CHECK_EQUAL(*resolve_actor_name(v, "gpu1/evaluator.0"), "gpu1/evaluator.0");
  auto several = resolve_actor_name(v, "evaluator.0");
  BOOST_REQUIRE(!several);
  BOOST_CHECK_MESSAGE(contains(describe(several.error()), "head/evaluator.0, gpu1/evaluator.0"),
                      describe(several.error()));
  auto none = resolve_actor_name(v, "learner");
  BOOST_REQUIRE(!none);
  BOOST_CHECK(contains(describe(none.error()), "no actor named 'learner'"));
}

BOOST_AUTO_TEST_CASE(config_section_keeps_its_table_and_subtables) {
  const std::string toml = "[run]\nname = \"x\"\n\n[learner]\nlr = 1e-5\n[learner.extra]\na = 1\n"
                           "[rl]\nsteps = 3\n";
  BOOST_CHECK_EQUAL(*toml_section(toml, "learner"), "[learner]\nlr = 1e-5\n[learner.extra]\na = 1\n");
  BOOST_CHECK_EQUAL(*toml_section(toml, "rl"), "[rl]\nsteps = 3\n");
  BOOST_CHECK(!toml_section(toml, "sampler"));
}

BOOST_AUTO_TEST_CASE(a_timeout_says_how_long_and_what_to_check) {
  caf::error timeout = caf::sec::request_timeout;
  auto text = failure_text(timeout, "request_timeout", std::chrono::seconds(15), "gpu1/node");
  BOOST_CHECK_MESSAGE(contains(text, "no answer from gpu1/node within 15") &&
                        contains(text, "still running"),
                      text);
  caf::error other = make_error(errc::unknown_actor, "x");
  BOOST_CHECK_EQUAL(failure_text(other, "rendered", std::chrono::seconds(15), "a"), "rendered");
}

BOOST_AUTO_TEST_SUITE_END()
