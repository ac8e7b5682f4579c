// The RL step-timeline bench's recorded completions followed through kbrl's RL path on the CPU.
// make_replay.py (bench/rl_step_timeline) writes them from a candidate set laid out as
// bench/eval_throughput/make_candidates.py writes one (the fixture test/data/replay_candidates:
// a manifest, candidate files with awkward bytes, and a KernelBench-style tree). The replay
// backend hands each request the completion of the request's problem; the episode, with the
// settings an RL run reads from its run config, parses the kernel out of it and sends it to an
// evaluator. That request must be the one kbrl-bench-eval (tools/kbrl_bench_eval.cpp) builds for
// the same candidate: byte-equal source, the same problem file, the same judging settings.
// Also: with eval.cache_dir set, a node's workers build into one shared folder.

#include "actors/episode.hpp"
#include "actor_doubles.hpp"
#include "runtime/eval/problems.hpp"
#include "runtime/eval/static_checks.hpp"
#include "runtime/node/node_plan.hpp"
#include "runtime/node/rl_settings.hpp"
#include "runtime/sampler/replay_backend.hpp"
#include "test_support.hpp"
#include "tokenizer_fixture.hpp"

#include <caf/all.hpp>

#include <boost/test/unit_test.hpp>

#include <fstream>
#include <map>
#include <sstream>

using namespace kbrl;
using kbrl::test::read_file_bytes;

namespace {

const std::string fixture = std::string(KBRL_TEST_DATA) + "/replay_candidates";

/// Runs make_replay.py as gpu_bench.sh does, on the fixture's candidates; returns the file.
std::string make_replay(const test::temp_dir& dir, const std::string& numbers) {
  auto out = dir / "replay.jsonl";
  auto cmd = "python3 '" + std::string(KBRL_SOURCE_DIR) + "/bench/rl_step_timeline/make_replay.py'"
             + " --manifest '" + fixture + "/manifest.json' --candidates '" + fixture
             + "' --level 1 --numbers " + numbers + " --out '" + out + "' > '" + dir / "log"
             + "' 2>&1";
  int rc = std::system(cmd.c_str());
  BOOST_REQUIRE_MESSAGE(rc == 0, "make_replay.py failed: " << read_file_bytes(dir / "log"));
  return out;
}

/// Generates nothing of use (as a random policy): fixed tokens and text, answered at once.
class random_policy : public sampling::generation_backend {
public:
  std::string kind() const override { return "random"; }
  std::string model() const override { return "random"; }
  void submit(generation_request request, done_fn done) override {
    generation_result r;
    r.id = request.id;
    r.completion_text = "tokens of a random policy";
    r.completion_tokens = {5, 6, 7};
    r.logprobs = {-1, -1, -1};
    r.finish = finish_reason::length;
    done(std::move(r));
  }
  caf::expected<void> apply_policy(const policy_update&) override { return {}; }
  sampling::backend_stats stats() const override { return {}; }
};

/// A sampler actor over a generation backend whose answers come back on the caller's thread
/// (random_policy wrapped by the replay backend); records the requests' trace labels.
sampler_actor::behavior_type backend_sampler(sampler_actor::pointer,
                                             std::shared_ptr<sampling::generation_backend> b,
                                             std::shared_ptr<std::vector<std::string>> traces) {
  return {
    [](status_atom) { return actor_status{}; },
    [](control_atom, const std::string&, const std::vector<std::string>&) { return std::string{}; },
    [=](generate_atom, generation_request& req) {
      traces->push_back(req.trace);
      generation_result out;
      b->submit(std::move(req), [&](generation_result r) { out = std::move(r); });
      return out;
    },
    [](policy_atom, policy_update&) {},
  };
}

/// An evaluator supervisor that keeps every request it is sent and calls each correct.
evaluator_supervisor_actor::behavior_type
recording_evaluator(evaluator_supervisor_actor::pointer,
                    std::shared_ptr<std::vector<eval_request>> seen) {
  return {
    [](status_atom) { return actor_status{}; },
    [](control_atom, const std::string&, const std::vector<std::string>&) { return std::string{}; },
    [=](evaluate_atom, eval_request& req) {
      seen->push_back(req);
      eval_result r;
      r.id = req.id;
      r.compiled = r.correct = true;
      r.speedup = 2;
      return r;
    },
    [](status_atom, actors_atom) { return std::vector<actor_status>{}; },
    [](status_atom, const std::string&) { return actor_status{}; },
    [](control_atom, const std::string&, const std::string&, const std::vector<std::string>&) {
      return std::string{};
    },
    [](membership_view&) {},
  };
}

/// The run config of bench/rl_step_timeline/gpu_bench.sh's run.toml, on the fixture's problems.
config::run_config bench_run_config(const std::string& replay) {
  auto run = config::run_config::defaults();
  for (auto& o : std::vector<std::string>{
         "rl.enabled=true", "rl.steps=1", "rl.problems_per_step=2", "rl.group_size=3",
         "rl.max_turns=1", "rl.max_new_tokens=512", "sampler.model=/random/model",
         "sampler.replay_completions=" + replay, "problems.root=" + fixture + "/kb",
         "problems.levels=[1]", "problems.numbers=19-22", "problems.backend=cuda"}) {
    auto err = run.apply_override(o);
    BOOST_REQUIRE_MESSAGE(!err, o << ": " << describe(err));
  }
  return run;
}

/// What kbrl-bench-eval hands its evaluator supervisor for one manifest entry
/// (tools/kbrl_bench_eval.cpp, the loop that builds `reqs`).
eval_request bench_request(const std::string& problem_file, const std::string& candidate_file) {
  auto level = problem_file.rfind("level2", 0) == 0 ? 2 : 1;
  auto prob = eval::load_problem_file(fixture + "/kb/" + problem_file, level);
  BOOST_REQUIRE_MESSAGE(prob, test::why(prob));
  eval_request r;
  r.task = *prob;
  r.task.backend = kernel_backend::cuda;
  r.candidate_source = read_file_bytes(fixture + "/" + candidate_file);
  r.timing.timeout_s = 600;
  return r;
}

} // namespace

BOOST_AUTO_TEST_SUITE(replay_candidates)

BOOST_AUTO_TEST_CASE(make_replay_keeps_each_candidate_byte_for_byte_inside_the_tags) {
  test::temp_dir dir;
  auto replay = sampling::load_recorded_completions(make_replay(dir, "19,22"));
  BOOST_REQUIRE_MESSAGE(replay, test::why(replay));
  // Level 2's problem 19 and level 1's problem 2 are not taken; the manifest's order is kept.
  BOOST_CHECK_EQUAL(replay->lines, 3u);
  BOOST_REQUIRE_EQUAL(replay->by_problem.size(), 2u);
  const std::map<std::string, std::vector<std::string>> expected{
    {"level1/19_ReLU", {"c01.py", "c02.py"}}, {"level1/22_Tanh", {"c03.py"}}};
  for (auto& [problem, files] : expected) {
    auto& got = replay->by_problem[problem];
    BOOST_REQUIRE_EQUAL(got.size(), files.size());
    for (size_t i = 0; i < files.size(); ++i) {
      auto answer = episode::parse_answer(got[i]);
      BOOST_REQUIRE_MESSAGE(answer.ok(), problem << " " << files[i] << ": "
                                                 << episode::to_string(answer.failure));
      auto source = read_file_bytes(fixture + "/" + files[i]);
      BOOST_CHECK_MESSAGE(answer.code == source,
                          problem << ": the parsed kernel differs from " << files[i] << " ("
                                  << answer.code.size() << " bytes, the file has "
                                  << source.size() << ")");
    }
  }
}

BOOST_AUTO_TEST_CASE(check_replay_names_the_build_folders_the_engine_uses) {
  // gpu_bench.sh looks for the replayed kernels' build folders by check_replay.py's hash: it must
  // be the engine's (eval_engine::build_dir_of).
  test::temp_dir dir;
  auto replay = make_replay(dir, "19,22");
  auto cmd = "python3 '" + std::string(KBRL_SOURCE_DIR) + "/bench/rl_step_timeline/check_replay.py'"
             + " kernels '" + replay + "' '" + fixture + "' > '" + dir / "out" + "' 2>&1";
  int rc = std::system(cmd.c_str());
  auto out = read_file_bytes(dir / "out");
  BOOST_CHECK_MESSAGE(rc == 0, out);
  BOOST_CHECK_MESSAGE(out.find("3 of 3 parsed kernels byte-equal") != std::string::npos, out);
  for (auto file : {"c01.py", "c02.py", "c03.py"}) {
    auto hash = eval::source_hash(read_file_bytes(fixture + "/" + file));
    BOOST_CHECK_MESSAGE(out.find(std::string(file) + " ") != std::string::npos
                          && out.find("hash " + hash) != std::string::npos,
                        file << ": hash " << hash << " not in\n" << out);
  }
}

BOOST_AUTO_TEST_CASE(the_evaluator_gets_what_kbrl_bench_eval_sends_for_the_same_candidate) {
  test::temp_dir dir;
  auto run = bench_run_config(make_replay(dir, "19,22"));
  auto rl = rl_run_settings_from(run, dir / "run", nullptr);
  BOOST_REQUIRE_MESSAGE(rl, test::why(rl));
  // The problems the coordinator hands out: 19 and 22 of level 1 (not 2, not level 2's 19).
  auto problems = episode::load_problem_set(rl->problems);
  BOOST_REQUIRE_MESSAGE(problems, test::why(problems));
  BOOST_REQUIRE_EQUAL(problems->size(), 2u);
  BOOST_CHECK_EQUAL((*problems)[0].id, "level1/19_ReLU");
  BOOST_CHECK_EQUAL((*problems)[1].id, "level1/22_Tanh");

  auto recorded = sampling::load_recorded_completions(dir / "replay.jsonl");
  BOOST_REQUIRE_MESSAGE(recorded, test::why(recorded));
  std::shared_ptr<sampling::generation_backend> backend = sampling::make_replay_backend(
    std::make_unique<random_policy>(), std::move(*recorded), dir / "replay.jsonl");

  caf::actor_system_config cfg;
  register_message_types(cfg);
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  auto traces = std::make_shared<std::vector<std::string>>();
  auto seen = std::make_shared<std::vector<eval_request>>();
  auto res = std::make_shared<episode_resources>();
  res->samplers = {sys.spawn(backend_sampler, backend, traces)};
  res->evaluators = {sys.spawn(recording_evaluator, seen)};
  res->coordinator = sys.spawn(test::trajectory_sink, caf::actor_cast<caf::actor>(self));
  res->tokenizer = std::make_shared<tok::tokenizer>(test::byte_tokenizer());
  res->chat = std::make_shared<tok::chat_format>(*tok::chat_format::by_name("chatml"));

  // One group of 3 per problem, one episode at a time (the replay cycles per problem in the
  // order requests arrive; sequential episodes make that order the test's).
  const size_t group = 3;
  uint64_t id = 0;
  for (auto& p : *problems)
    for (size_t g = 0; g < group; ++g) {
      actor_stats stats;
      stats.name = "test/episode." + std::to_string(++id);
      auto e = sys.spawn(run_episode, stats, rl->coordinator.episodes,
                         std::shared_ptr<const episode_resources>(res), id);
      self->send(e, start_atom::value, p, uint64_t{7});
      self->receive(
        [&](trajectory& t) {
          BOOST_CHECK_EQUAL(t.problem_id, p.id);
          BOOST_REQUIRE_EQUAL(t.turns.size(), 1u);
          BOOST_CHECK(t.turns[0].verdict.correct);
          BOOST_CHECK((t.turns[0].completion_tokens == std::vector<int32_t>{5, 6, 7}));
        },
        caf::after(std::chrono::seconds(30)) >> [] { BOOST_FAIL("no trajectory"); });
    }
  BOOST_REQUIRE_EQUAL(seen->size(), 2 * group);
  BOOST_CHECK(backend->stats().detail.find("6 replayed, 0 without") != std::string::npos);

  // Request by request: the candidate the replay cycle gives, as kbrl-bench-eval would send it.
  const std::vector<std::pair<std::string, std::string>> order{
    {"level1/19_ReLU.py", "c01.py"}, {"level1/19_ReLU.py", "c02.py"},
    {"level1/19_ReLU.py", "c01.py"}, {"level1/22_Tanh.py", "c03.py"},
    {"level1/22_Tanh.py", "c03.py"}, {"level1/22_Tanh.py", "c03.py"}};
  for (size_t i = 0; i < order.size(); ++i) {
    auto& got = (*seen)[i];
    auto want = bench_request(order[i].first, order[i].second);
    BOOST_TEST_CONTEXT("request " << i << " (" << got.trace << "), bench: " << order[i].second) {
      BOOST_CHECK_EQUAL(got.trace.substr(0, got.trace.find(' ')), want.task.id);
      BOOST_CHECK((*traces)[i] == got.trace);
      // The kernel: byte-equal, so the same source hash (build folder) as in the bench.
      BOOST_CHECK(got.candidate_source == want.candidate_source);
      BOOST_CHECK_EQUAL(eval::source_hash(got.candidate_source),
                        eval::source_hash(want.candidate_source));
      // The problem: the same file, the same backend and precision.
      BOOST_CHECK_EQUAL(got.task.id, want.task.id);
      BOOST_CHECK_EQUAL(got.task.level, want.task.level);
      BOOST_CHECK_EQUAL(got.task.number, want.task.number);
      BOOST_CHECK(got.task.reference_source == want.task.reference_source);
      BOOST_CHECK_EQUAL(got.task.source_hash, want.task.source_hash);
      BOOST_CHECK(got.task.backend == want.task.backend);
      BOOST_CHECK(got.task.precision == want.task.precision);
      // The judging: same trials, seeds and tolerances. Only the wall-clock budget differs:
      // kbrl-bench-eval gives 600 s, an RL run its default timing_options (300 s).
      auto& a = got.timing;
      auto& b = want.timing;
      BOOST_CHECK_EQUAL(a.correctness_trials, b.correctness_trials);
      BOOST_CHECK_EQUAL(a.perf_trials, b.perf_trials);
      BOOST_CHECK_EQUAL(a.warmup_runs, b.warmup_runs);
      BOOST_CHECK_EQUAL(a.seed, b.seed);
      BOOST_CHECK_EQUAL(a.atol, b.atol);
      BOOST_CHECK_EQUAL(a.rtol, b.rtol);
      BOOST_CHECK_EQUAL(a.measure_performance, b.measure_performance);
      BOOST_CHECK_EQUAL(a.compare_torch_compile, b.compare_torch_compile);
      BOOST_CHECK_EQUAL(a.timeout_s, 300.0);
      // The static checks (run by the engine on both paths) agree, and pass these candidates.
      eval::static_check_options sco;
      sco.backend = got.task.backend;
      sco.precision = got.task.precision;
      auto rl_checks = eval::check_candidate(got.candidate_source, sco);
      auto bench_checks = eval::check_candidate(want.candidate_source, sco);
      BOOST_CHECK(!rl_checks.rejected());
      BOOST_CHECK_EQUAL(rl_checks.findings.size(), bench_checks.findings.size());
    }
  }
  // The engine options come from the same function on both paths (evaluation_engine_options):
  // inputs_on, reference_mode and the rules are the run config's in both.
  auto engine = evaluation_engine_options(run);
  BOOST_CHECK_EQUAL(engine.inputs_on, "device");
  BOOST_CHECK_EQUAL(engine.reference_mode, "eager");
  for (auto& e : res->evaluators)
    self->send_exit(e, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(eval_cache_dir_gives_a_node_one_shared_build_folder) {
  auto run = config::run_config::defaults();
  // Unset: empty, and the node builds in its run directory (actors/node.cpp).
  BOOST_CHECK_EQUAL(evaluation_engine_options(run).worker.extensions_dir, "");
  BOOST_REQUIRE(!run.apply_override("eval.cache_dir=/tmp/kbrl-shared-cache"));
  auto o = evaluation_engine_options(run);
  BOOST_CHECK_EQUAL(o.worker.extensions_dir, "/tmp/kbrl-shared-cache/extensions");
  BOOST_CHECK_EQUAL(o.reference_cache_file, "/tmp/kbrl-shared-cache/reference_times.jsonl");
  // From a run config file; a value of the wrong type is refused, naming the key.
  auto file = config::run_config::parse("[eval]\ncache_dir = \"/srv/cache\"\n", "run.toml");
  BOOST_REQUIRE_MESSAGE(file, test::why(file));
  BOOST_CHECK_EQUAL(evaluation_engine_options(*file).worker.extensions_dir,
                    "/srv/cache/extensions");
  auto bad = config::run_config::parse("[eval]\ncache_dir = 3\n", "run.toml");
  BOOST_REQUIRE(!bad);
  BOOST_CHECK(test::why(bad).find("cache_dir") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
