// sampler.replay_completions: the wrapped backend still generates (tokens, log-probabilities,
// version stay its own), and the answer's text becomes a recorded completion of the request's
// problem, taken in turn; bad files fail with the file and line named.

#include "actors/sampler.hpp"
#include "runtime/config/settings.hpp"
#include "runtime/sampler/replay_backend.hpp"
#include "runtime/sampler/sampler_settings.hpp"
#include "test_support.hpp"

#include <boost/test/unit_test.hpp>

using namespace kbrl;

namespace {

/// Answers every request at once, on the caller's thread, with fixed generated text.
class generated_backend : public sampling::generation_backend {
public:
  std::string kind() const override { return "fake"; }
  std::string model() const override { return "fake-model"; }
  void submit(generation_request request, done_fn done) override {
    generation_result r;
    r.id = request.id;
    r.completion_text = request.trace == "fail" ? "" : "generated";
    r.completion_tokens = {7, 8, 9};
    r.logprobs = {-1, -2, -3};
    r.policy_version = 3;
    r.finish = request.trace == "fail" ? finish_reason::error : finish_reason::length;
    done(std::move(r));
  }
  caf::expected<void> apply_policy(const policy_update&) override { return {}; }
  sampling::backend_stats stats() const override { return {}; }
};

generation_result ask(sampling::generation_backend& b, const std::string& trace) {
  generation_request req;
  req.id = 1;
  req.trace = trace;
  generation_result out;
  b.submit(req, [&](generation_result r) { out = std::move(r); });
  return out;
}

} // namespace

BOOST_AUTO_TEST_SUITE(replay_completions)

BOOST_AUTO_TEST_CASE(replaces_the_text_and_keeps_what_was_generated) {
  test::temp_dir dir;
  auto path = dir.write("replay.jsonl",
                        R"({"problem": "level1/19_ReLU.py", "completion": "first relu"})" "\n"
                        "\n"
                        R"({"problem": "level1/19_ReLU", "completion": "second relu"})" "\n"
                        R"({"problem": "21_Sigmoid", "completion": "sigmoid"})" "\n");
  auto loaded = sampling::load_recorded_completions(path);
  BOOST_REQUIRE_MESSAGE(loaded, test::why(loaded));
  BOOST_CHECK_EQUAL(loaded->lines, 3u);
  BOOST_CHECK_EQUAL(loaded->by_problem.size(), 2u);
  auto b = sampling::make_replay_backend(std::make_unique<generated_backend>(), *loaded, path);
  auto one = ask(*b, "level1/19_ReLU trajectory 1000001 turn 1");
  BOOST_CHECK_EQUAL(one.completion_text, "first relu");
  BOOST_CHECK((one.completion_tokens == std::vector<int32_t>{7, 8, 9}));
  BOOST_CHECK_EQUAL(one.logprobs.size(), 3u);
  BOOST_CHECK_EQUAL(one.policy_version, 3u);
  BOOST_CHECK_EQUAL(ask(*b, "level1/19_ReLU trajectory 1000002 turn 1").completion_text,
                    "second relu");
  BOOST_CHECK_EQUAL(ask(*b, "level1/19_ReLU trajectory 1000003 turn 1").completion_text,
                    "first relu"); // cycles
  // By name, in either direction.
  BOOST_CHECK_EQUAL(ask(*b, "19_ReLU trajectory 4 turn 1").completion_text, "second relu");
  BOOST_CHECK_EQUAL(ask(*b, "level1/21_Sigmoid trajectory 5 turn 1").completion_text, "sigmoid");
  // Unknown problems keep the generated text; failures stay failures.
  BOOST_CHECK_EQUAL(ask(*b, "level1/22_Tanh trajectory 6 turn 1").completion_text, "generated");
  BOOST_CHECK(ask(*b, "fail").finish == finish_reason::error);
  auto detail = b->stats().detail;
  BOOST_CHECK(detail.find("5 replayed, 1 without a recorded completion") != std::string::npos);
  BOOST_CHECK_EQUAL(b->kind(), "fake+replay");
}

BOOST_AUTO_TEST_CASE(bad_files_name_the_file_and_line) {
  test::temp_dir dir;
  auto missing = sampling::load_recorded_completions(dir / "none.jsonl");
  BOOST_REQUIRE(!missing);
  BOOST_CHECK(test::why(missing).find("none.jsonl") != std::string::npos);
  auto bad = sampling::load_recorded_completions(dir.write(
    "bad.jsonl", R"({"problem": "a", "completion": "x"})" "\n" R"({"problem": "b"})" "\n"));
  BOOST_REQUIRE(!bad);
  BOOST_CHECK(test::why(bad).find("bad.jsonl line 2") != std::string::npos);
  auto empty = sampling::load_recorded_completions(dir.write("empty.jsonl", "\n"));
  BOOST_REQUIRE(!empty);
  BOOST_CHECK(test::why(empty).find("no recorded completions") != std::string::npos);
  auto not_json = sampling::load_recorded_completions(dir.write("text.jsonl", "hello\n"));
  BOOST_CHECK(!not_json);
}

BOOST_AUTO_TEST_CASE(the_sampler_setting_is_read_and_checked_before_a_model_loads) {
  auto run = config::run_config::defaults();
  BOOST_CHECK_EQUAL(sampling::sampler_settings_from(run, -1, "s").replay_completions, "");
  sampling::sampler_settings s;
  s.backend = "builtin";
  s.model = "/nonexistent/model";
  s.replay_completions = "/nonexistent/replay.jsonl";
  auto made = make_generation_backend(s);
  BOOST_REQUIRE(!made);
  BOOST_CHECK(test::why(made).find("sampler.replay_completions") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
