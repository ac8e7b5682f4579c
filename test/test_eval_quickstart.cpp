// kbrl-eval end to end on the CPU with the quickstart's policy: `--model` generates and
// evaluates on the bundled problems (the RL loop's first prompt, as the policy was trained),
// then `--generations` scores the completions the first run wrote, and the two interfaces agree
// on every sample: same files, same verdicts, same trials passed.

#include "cluster_fixture.hpp"
#include "test_support.hpp"

#include <boost/test/unit_test.hpp>

#include <simdjson.h>

#include <map>
#include <tuple>

using namespace kbrl;

namespace {

using verdict = std::tuple<bool, bool, std::string, int64_t>; // compiled, correct, error, trials

/// sample source file -> its verdict, from results.json.
std::map<std::string, verdict> verdicts(const std::string& results) {
  std::map<std::string, verdict> out;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  simdjson::dom::array samples;
  BOOST_REQUIRE_MESSAGE(!parser.load(results).get(doc) && !doc["samples"].get(samples),
                        "cannot read the samples of " << results);
  for (auto s : samples) {
    std::string_view source, error;
    bool compiled = false, correct = false;
    int64_t trials = 0;
    BOOST_REQUIRE_MESSAGE(!s["source"].get(source) && !s["error"].get(error)
                            && !s["compiled"].get(compiled) && !s["correct"].get(correct)
                            && !s["trials_passed"].get(trials),
                          results << ": a sample record lacks a field");
    out[std::string(source)] = {compiled, correct, std::string(error), trials};
  }
  return out;
}

} // namespace

BOOST_AUTO_TEST_SUITE(eval_quickstart)

BOOST_AUTO_TEST_CASE(the_quickstart_policy_scored_two_ways_agrees) {
  test::temp_dir dir;
  const std::string root = KBRL_SOURCE_DIR;
  const std::string tool = test::build_dir() + "/kbrl-eval";
  auto from_model = test::run_command(
    {tool, "--model", root + "/config/quickstart/policy", "--config",
     root + "/config/quickstart/run.toml", "--prompt-style", "episode", "--kernelbench",
     root + "/config/quickstart/problems", "--levels", "1", "--problems", "1-6", "--samples", "2",
     "--temperature", "1", "--max-new-tokens", "128", "--backend", "torch", "--no-timing",
     "--trials", "2", "--output", dir / "model"},
    300);
  BOOST_REQUIRE_MESSAGE(from_model.code == 0, from_model.output);
  BOOST_CHECK_MESSAGE(test::read_file(dir / "model/results.json")
                        .find("the RL loop's first prompt") != std::string::npos,
                      "results.json does not say the episode prompt was used");
  auto from_files = test::run_command(
    {tool, "--generations", dir / "model/generations", "--kernelbench",
     root + "/config/quickstart/problems", "--backend", "torch", "--no-timing", "--trials", "2",
     "--output", dir / "files"},
    300);
  BOOST_REQUIRE_MESSAGE(from_files.code == 0, from_files.output);

  auto a = verdicts(dir / "model/results.json"), b = verdicts(dir / "files/results.json");
  BOOST_CHECK_EQUAL(a.size(), 12u); // 6 problems x 2 samples
  BOOST_CHECK_EQUAL(a.size(), b.size());
  int correct = 0;
  for (auto& [source, v] : a) {
    BOOST_TEST_CONTEXT(source) {
      BOOST_REQUIRE(b.count(source));
      BOOST_CHECK(v == b.at(source));
      correct += std::get<1>(v);
    }
  }
  BOOST_TEST_MESSAGE("quickstart policy, 6 problems x 2 samples at temperature 1: " << correct
                     << " correct");
}

BOOST_AUTO_TEST_SUITE_END()
