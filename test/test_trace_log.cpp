// traces.jsonl (runtime/episode/trace_log.hpp): a round's lines in trajectory order, rotation to
// traces.1.jsonl past the size limit, and a failed write that names the file and recovers.

#include "runtime/episode/trace_log.hpp"
#include "test_support.hpp"

#include <boost/test/unit_test.hpp>
#include <simdjson.h>

#include <filesystem>
#include <sstream>
#include <vector>

using namespace kbrl;
using kbrl::test::read_file;
using kbrl::test::lines_of;
using kbrl::test::temp_dir;
using kbrl::test::why;

namespace {

trajectory make(uint64_t id, const std::string& problem, double score) {
  trajectory t;
  t.id = id;
  t.group_id = id / 10;
  t.problem_id = problem;
  t.end_reason = "max_turns";
  turn u;
  u.index = 0;
  u.policy_version = 2;
  u.completion_text = "line one\n\"quoted\"";
  u.verdict.compiled = true;
  u.verdict.correct = score > 0;
  u.score = score;
  t.turns.push_back(u);
  return t;
}

} // namespace

BOOST_AUTO_TEST_SUITE(trace_log)

BOOST_AUTO_TEST_CASE(a_round_is_written_in_trajectory_order_as_json_lines) {
  temp_dir dir;
  episode::trace_log log(dir.path.string(), 1 << 20);
  auto ok = log.append({make(12, "b", 1.0), make(11, "a", 0.0)}, 3, false);
  BOOST_REQUIRE_MESSAGE(ok, why(ok));
  auto lines = lines_of(read_file(log.path()));
  BOOST_REQUIRE_EQUAL(lines.size(), 2u);
  simdjson::dom::parser parser;
  uint64_t first_id = 0, step = 0;
  bool eval = true;
  std::string_view completion;
  simdjson::dom::element doc;
  BOOST_REQUIRE(!parser.parse(lines[0]).get(doc));
  BOOST_REQUIRE(!doc["trajectory"].get(first_id));
  BOOST_REQUIRE(!doc["step"].get(step));
  BOOST_REQUIRE(!doc["eval"].get(eval));
  BOOST_REQUIRE(!doc["turns"].at(0)["completion"].get(completion));
  BOOST_CHECK_EQUAL(first_id, 11u);
  BOOST_CHECK_EQUAL(step, 3u);
  BOOST_CHECK(!eval);
  BOOST_CHECK_EQUAL(std::string(completion), "line one\n\"quoted\"");
}

BOOST_AUTO_TEST_CASE(past_the_limit_the_file_is_rotated_and_one_older_file_kept) {
  temp_dir dir;
  episode::trace_log log(dir.path.string(), 100); // one line is longer than this
  for (uint64_t step = 1; step <= 3; ++step) {
    auto ok = log.append({make(step * 100, "p", 1.0)}, step, false);
    BOOST_REQUIRE_MESSAGE(ok, why(ok));
  }
  auto current = lines_of(read_file(log.path()));
  auto older = lines_of(read_file(dir / "traces.1.jsonl"));
  BOOST_REQUIRE_EQUAL(current.size(), 1u);
  BOOST_REQUIRE_EQUAL(older.size(), 1u);
  BOOST_CHECK(kbrl::test::contains(current[0], "\"step\":3"));
  BOOST_CHECK(kbrl::test::contains(older[0], "\"step\":2")); // step 1 was rotated away
}

BOOST_AUTO_TEST_CASE(a_failed_write_names_the_file_and_the_next_append_recovers) {
  temp_dir dir;
  const auto run = dir / "run";
  episode::trace_log log(run, 1 << 20);
  auto failed = log.append({make(1, "p", 1.0)}, 1, false); // the run directory does not exist
  BOOST_REQUIRE(!failed);
  BOOST_CHECK_MESSAGE(kbrl::test::contains(why(failed), run + "/traces.jsonl"), why(failed));
  std::filesystem::create_directories(run);
  auto ok = log.append({make(2, "p", 1.0)}, 2, false);
  BOOST_REQUIRE_MESSAGE(ok, why(ok));
  BOOST_CHECK_EQUAL(lines_of(read_file(log.path())).size(), 1u);
}

BOOST_AUTO_TEST_CASE(a_line_carries_what_a_researcher_reads_a_trajectory_for) {
  auto t = make(7, "level1/19_ReLU", 0);
  t.turns[0].prompt_tokens = {72, 105};
  t.turns[0].completion_tokens = {1, 2, 3};
  t.turns[0].logprobs = {-0.5f, -1.0f, -2.0f};
  t.turns[0].verdict.hack_flags = {"own_kernels_idle"};
  t.turns[0].verdict.trials_passed = 3;
  t.turns[0].verdict.trials_total = 5;
  t.turns[0].verdict.build_seconds = 21.5;
  t.turns[0].verdict.phases = {{"compile", 0.25}, {"correctness", 1.5}, {"timing", 0.75}};
  t.turns[0].verdict.total_seconds = 3.0;
  auto unparsed = t.turns[0];
  unparsed.index = 1;
  unparsed.verdict = {}; // no program in the answer: never evaluated
  t.turns.push_back(unparsed);
  episode::trace_options options;
  options.token_ids = true;
  options.prompt_text = [](const std::vector<int32_t>& ids) {
    return std::string(ids.begin(), ids.end());
  };
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  const auto line = episode::trace_line(t, 4, false, options);
  BOOST_REQUIRE_MESSAGE(!parser.parse(line).get(doc), line);
  auto first = doc["turns"].at(0), second = doc["turns"].at(1);
  BOOST_CHECK_EQUAL(std::string_view(first["prompt"]), "Hi");
  BOOST_CHECK_EQUAL(std::string_view(first["hack_flags"].at(0)), "own_kernels_idle");
  BOOST_CHECK_EQUAL(int64_t(first["trials_passed"]), 3);
  BOOST_CHECK_EQUAL(std::string_view(first["error"]), "none");
  BOOST_CHECK_EQUAL(std::string_view(second["error"]), "format"); // not "none"
  // Where the evaluation's time went, on evaluated turns only.
  BOOST_CHECK_EQUAL(double(first["eval_seconds"]["build"]), 21.5);
  BOOST_CHECK_EQUAL(double(first["eval_seconds"]["correctness"]), 1.5);
  BOOST_CHECK_EQUAL(double(first["eval_seconds"]["total"]), 3.0);
  BOOST_CHECK(second["eval_seconds"].error());
  BOOST_CHECK_EQUAL(int64_t(first["completion_token_ids"].at(2)), 3);
  BOOST_CHECK_EQUAL(double(first["logprobs"].at(1)), -1.0);
  // Without the options: no prompt text, no token ids.
  BOOST_REQUIRE(!parser.parse(episode::trace_line(t, 4, false)).get(doc));
  BOOST_CHECK(doc["turns"].at(0)["prompt"].error());
  BOOST_CHECK(doc["turns"].at(0)["logprobs"].error());
}

BOOST_AUTO_TEST_CASE(rewards_by_component_and_advantages_as_the_learner_sees_them) {
  test::temp_dir dir;
  episode_settings episodes;
  episodes.rewards.correct = 1;
  episodes.rewards.format = 0.1;
  auto good = make(1, "level1/19_ReLU", 1.1);
  good.turns[0].completion_text = "```python\nclass ModelNew: pass\n```";
  good.turns[0].verdict.trials = {trial_result{}};
  auto bad = make(2, "level1/19_ReLU", 0.1);
  bad.group_id = good.group_id;
  bad.turns[0].completion_text = good.turns[0].completion_text;
  bad.turns[0].verdict.trials = {trial_result{}};
  auto flat = make(30, "level1/20_X", 0); // a group of one: no signal, advantage 0
  auto options = episode::trace_options_for(episodes, nullptr, false, rl::advantage_options{});
  episode::trace_log log(dir.path.string(), 1 << 20, options);
  BOOST_REQUIRE(log.append({good, bad, flat}, 1, false));
  auto lines = lines_of(read_file(dir / "traces.jsonl"));
  BOOST_REQUIRE_EQUAL(lines.size(), 3u);
  simdjson::dom::parser parser;
  auto turn_of = [&](size_t i) {
    simdjson::dom::element doc;
    BOOST_REQUIRE(!parser.parse(lines[i]).get(doc));
    return doc["turns"].at(0);
  };
  auto g = turn_of(0);
  BOOST_CHECK_CLOSE(double(g["reward"]["correct"]), 1.0, 1e-9);
  BOOST_CHECK_CLOSE(double(g["reward"]["format"]), 0.1, 1e-9);
  BOOST_CHECK_GT(double(g["advantage"]), 0.0); // above its group's mean
  BOOST_CHECK_LT(double(turn_of(1)["advantage"]), 0.0);
  BOOST_CHECK_EQUAL(double(turn_of(2)["advantage"]), 0.0);
  BOOST_CHECK(turn_of(0)["prompt"].error()); // no tokenizer: no prompt text
  BOOST_CHECK_EQUAL(std::string_view(turn_of(0)["kernel"]), "class ModelNew: pass\n");
}

BOOST_AUTO_TEST_SUITE_END()
