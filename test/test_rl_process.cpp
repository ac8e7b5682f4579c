// The RL loop as a user runs it, with real processes: `kbrl-node --role all` with rl.enabled
// on a tiny random policy and a tiny problem folder (plain-torch backend, CPU) runs 2 steps of 2
// problems x 2 samples and exits 0 leaving metrics.jsonl, TensorBoard events, traces.jsonl, a
// learner checkpoint and coordinator.json with exactly those steps; `--resume DIR rl.steps=3`
// runs exactly one more step; a second fresh run in the same directory is refused; config
// errors and missing problems exit non-zero naming the key or path.

#include "actors/coordinator.hpp"
#include "cluster_fixture.hpp"
#include "tokenizer_fixture.hpp"
#include "rl_run_files.hpp"
#include "runtime/model/random_checkpoint.hpp"
#include "runtime/train/checkpoint_list.hpp"
#include "test_support.hpp"
#include "tfevents_reader.hpp"

#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <set>

using namespace kbrl;
using namespace std::chrono_literals;
using kbrl::test::contains;
using kbrl::test::event_files;
using kbrl::test::steps_of;
using kbrl::test::trace_steps;

namespace {

namespace fs = std::filesystem;

/// A tiny problem folder, a tiny random policy and the command line of a short run.
struct rl_process_fixture {
  test::temp_dir dir;
  std::string model, problems;

  rl_process_fixture() {
    for (auto name : {"1_small_relu.py", "4_small_softmax.py"})
      dir.write("problems/level1/" + std::string(name),
                test::read_file(std::string(KBRL_TEST_DATA) + "/problems/" + name));
    problems = dir / "problems";
    // A quarter of the vocabulary ends a completion, so completions differ in length and the
    // length term of the reward gives the groups something to learn from (random weights
    // never write a program that parses).
    auto config = model::tiny_model_config("qwen2");
    config.max_position_embeddings = 8192;
    config.eos_token_ids.clear();
    for (int64_t id = 128; id < 192; ++id)
      config.eos_token_ids.push_back(id);
    model = dir / "tiny-policy";
    BOOST_REQUIRE(model::write_random_checkpoint(model, config, 11));
    dir.write("tiny-policy/tokenizer.json", test::byte_tokenizer_json());
  }

  std::string node_bin() const { return test::build_dir() + "/kbrl-node"; }

  std::vector<std::string> args(std::vector<std::string> extra) const {
    std::vector<std::string> argv{
      "env", "-u", "KERNELBENCH_ROOT", node_bin(), "--role", "all", "--port",
      std::to_string(test::free_port()), "run.dir=" + (dir / "runs"), "run.name=short",
      "log.console=true", "rl.enabled=true", "rl.steps=2", "rl.problems_per_step=2",
      "rl.group_size=2", "rl.max_turns=1", "rl.max_new_tokens=12", "rl.chat_format=chatml",
      "reward.length=1", "problems.root=" + problems, "problems.backend=torch",
      "sampler.model=" + model, "sampler.dtype=fp32", "sampler.slots=4",
      "sampler.max_seq_len=8192", "learner.dtype=fp32", "learner.checkpoint_every=1",
      "learner.lr=0.001", "eval.cache_dir=" + (dir / "cache")};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(rl_process, rl_process_fixture)

BOOST_AUTO_TEST_CASE(a_short_run_trains_then_resumes_for_exactly_one_more_step) {
  auto run = dir / "runs/short";
  auto first = test::run_command(args({}), 120);
  BOOST_REQUIRE_MESSAGE(first.code == 0, first.output);
  BOOST_CHECK_MESSAGE(contains(first.output, "The RL run finished after step 2 of 2"),
                      first.output);
  BOOST_CHECK_MESSAGE(contains(first.output, "step 1/2: mean reward"), first.output);
  BOOST_CHECK(contains(first.output, "tensorboard --logdir " + run + "/tensorboard"));
  BOOST_CHECK(steps_of(run + "/metrics.jsonl", "reward/mean")
              == (std::map<uint64_t, int>{{1, 1}, {2, 1}}));
  BOOST_CHECK(steps_of(run + "/metrics.jsonl", "hist/reward")
              == (std::map<uint64_t, int>{{1, 1}, {2, 1}}));
  BOOST_CHECK(trace_steps(run + "/traces.jsonl") == (std::map<uint64_t, int>{{1, 4}, {2, 4}}));
  auto cp = read_coordinator_checkpoint(run);
  BOOST_REQUIRE(cp);
  BOOST_CHECK_EQUAL(cp->step, 2u);
  BOOST_CHECK_EQUAL(cp->cursor, 4u);
  auto latest = train::latest_checkpoint(fs::path(run) / "learner" / "checkpoints");
  BOOST_REQUIRE_MESSAGE(latest && *latest, "no learner checkpoint\n" << first.output);
  BOOST_CHECK_EQUAL((*latest)->cursor.policy_version, cp->policy_version);
  BOOST_CHECK_MESSAGE(cp->policy_version > 0, "the learner never trained\n" << first.output);
  auto tb = event_files(run + "/tensorboard");
  BOOST_REQUIRE_EQUAL(tb.size(), 1u);
  std::set<int64_t> scalar_steps, histogram_steps;
  for (auto& e : test::read_event_file(tb[0])) {
    for (auto& [tag, x] : e.scalars)
      if (tag == "reward/mean")
        scalar_steps.insert(e.step);
    for (auto& [tag, h] : e.histograms)
      if (tag == "hist/reward" && h.num == 4)
        histogram_steps.insert(e.step);
  }
  BOOST_CHECK(scalar_steps == (std::set<int64_t>{1, 2}));
  BOOST_CHECK(histogram_steps == (std::set<int64_t>{1, 2}));

  // Without --resume the directory is refused; with it, rl.steps=3 runs step 3 only.
  auto again = test::run_command(args({}), 30);
  BOOST_CHECK_EQUAL(again.code, 2);
  BOOST_CHECK_MESSAGE(contains(again.output, "--resume " + run), again.output);
  auto resumed = test::run_command(
    {"env", "-u", "KERNELBENCH_ROOT", node_bin(), "--role", "all", "--port",
     std::to_string(test::free_port()), "--resume", run, "rl.steps=3"},
    120);
  BOOST_REQUIRE_MESSAGE(resumed.code == 0, resumed.output);
  BOOST_CHECK_MESSAGE(contains(resumed.output, "The RL run finished after step 3 of 3 (1 step(s)"),
                      resumed.output);
  BOOST_CHECK(steps_of(run + "/metrics.jsonl", "reward/mean")
              == (std::map<uint64_t, int>{{1, 1}, {2, 1}, {3, 1}}));
  BOOST_CHECK(trace_steps(run + "/traces.jsonl")
              == (std::map<uint64_t, int>{{1, 4}, {2, 4}, {3, 4}}));
  cp = read_coordinator_checkpoint(run);
  BOOST_REQUIRE(cp);
  BOOST_CHECK_EQUAL(cp->step, 3u);
  BOOST_CHECK_EQUAL(cp->cursor, 6u);
  tb = event_files(run + "/tensorboard");
  BOOST_REQUIRE_EQUAL(tb.size(), 2u);
  auto second = test::read_event_file(tb[1]);
  BOOST_REQUIRE_GE(second.size(), 2u);
  BOOST_CHECK_EQUAL(second[1].session_status, 1);
  BOOST_CHECK_EQUAL(second[1].step, 3);
  // KBRL_KEEP_RL_RUN=DIR keeps the run for test/data/rl/read_with_tensorboard.py.
  if (const char* keep = std::getenv("KBRL_KEEP_RL_RUN")) {
    std::error_code ec;
    fs::remove_all(keep, ec);
    fs::copy(run, keep, fs::copy_options::recursive, ec);
    BOOST_TEST_MESSAGE("kept the run in " << keep << (ec ? ": " + ec.message() : ""));
  }
}

BOOST_AUTO_TEST_CASE(bad_runs_exit_non_zero_naming_what_is_wrong) {
  auto bad_key = test::run_command(args({"rl.group_size=1"}), 30);
  BOOST_CHECK_EQUAL(bad_key.code, 2);
  BOOST_CHECK_MESSAGE(contains(bad_key.output, "rl.group_size"), bad_key.output);
  auto no_root = test::run_command(args({"problems.root="}), 30);
  BOOST_CHECK_EQUAL(no_root.code, 2);
  BOOST_CHECK_MESSAGE(contains(no_root.output, "problems.root")
                        && contains(no_root.output, "KERNELBENCH_ROOT"),
                      no_root.output);
  auto no_level = test::run_command(args({"problems.levels=[3]", "run.name=nolevel"}), 30);
  BOOST_CHECK_EQUAL(no_level.code, 1);
  BOOST_CHECK_MESSAGE(contains(no_level.output, "the RL run cannot start")
                        && contains(no_level.output, problems),
                      no_level.output);
  // The learner's model has a tokenizer but broken weights: the run stops, saying why.
  dir.write("bad-weights/tokenizer.json", test::byte_tokenizer_json());
  dir.write("bad-weights/config.json", test::read_file(model + "/config.json"));
  dir.write("bad-weights/model.safetensors", "not a safetensors file");
  auto broken = test::run_command(args({"learner.model=" + (dir / "bad-weights"),
                                        "run.name=nolearner"}),
                                  60);
  BOOST_CHECK_EQUAL(broken.code, 1);
  BOOST_CHECK_MESSAGE(contains(broken.output, "local/learner cannot train"), broken.output);
  auto no_dir = test::run_command(
    {node_bin(), "--role", "all", "--port", "1", "--resume", dir / "nowhere"}, 30);
  BOOST_CHECK_EQUAL(no_dir.code, 2);
  BOOST_CHECK_MESSAGE(contains(no_dir.output, "--resume " + (dir / "nowhere")), no_dir.output);
}

BOOST_AUTO_TEST_CASE(a_run_where_nothing_can_be_sampled_stops_saying_why) {
  // A policy whose vocabulary (64) is smaller than its tokenizer's (256): every prompt holds
  // ids the model cannot take, so every completion fails. The run must not finish "fine" with
  // zeros: it says why each step failed and stops with exit 1 after rl.max_failed_steps.
  auto config = model::tiny_model_config("qwen2");
  config.vocab_size = 64; // prompts are ASCII: letters (65-122) are out of its reach
  config.max_position_embeddings = 8192;
  auto small = dir / "small-vocab";
  BOOST_REQUIRE(model::write_random_checkpoint(small, config, 11));
  dir.write("small-vocab/tokenizer.json", test::byte_tokenizer_json());
  auto run = test::run_command(args({"sampler.model=" + small, "rl.steps=5",
                                     "rl.max_failed_steps=2", "run.name=small-vocab"}),
                               120);
  BOOST_CHECK_EQUAL(run.code, 1);
  BOOST_CHECK_MESSAGE(contains(run.output, "outside the vocabulary [0, 64)"), run.output);
  BOOST_CHECK_MESSAGE(contains(run.output, "step 1: 4 of 4 episodes failed: 4 x the sampler "
                                           "could not generate"),
                      run.output);
  BOOST_CHECK_MESSAGE(contains(run.output, "every episode of the last 2 steps failed"),
                      run.output);
  // What was done stays: both steps were committed before the stop.
  BOOST_CHECK(test::trace_steps(dir / "runs/small-vocab/traces.jsonl")
              == (std::map<uint64_t, int>{{1, 4}, {2, 4}}));
}

BOOST_AUTO_TEST_CASE(the_coordinator_waits_for_a_node_with_samplers_and_evaluators) {
  // head: learner (and the run); worker: sampler and evaluator, started once head waits.
  auto head_port = test::free_port(), worker_port = test::free_port();
  auto manifest = dir.write(
    "cluster.toml",
    "[cluster]\nname = \"rl\"\ncoordinator = \"head\"\nheartbeat_interval_s = 0.2\n"
    "node_timeout_s = 3.0\n\n[[node]]\nname = \"head\"\nhost = \"127.0.0.1\"\nport = "
      + std::to_string(head_port)
      + "\nroles = [\"learner\"]\n\n[[node]]\nname = \"worker\"\nhost = \"127.0.0.1\"\n"
        "port = "
      + std::to_string(worker_port) + "\nroles = [\"sampler\", \"evaluator\"]\n");
  auto node_args = [&](const std::string& node, const std::string& role) {
    auto argv = args({"rl.steps=1", "run.name=" + node});
    argv.erase(argv.begin(), argv.begin() + 3);  // no env -u: child_process execs directly
    argv.erase(argv.begin() + 1, argv.begin() + 5); // --role all --port N
    argv.insert(argv.begin() + 1, {"--role", role, "--manifest", manifest, "--node", node});
    return argv;
  };
  test::child_process head(node_args("head", "learner"), dir / "head.out");
  BOOST_REQUIRE_MESSAGE(test::eventually(
                          [&] { return contains(head.output(), "the RL run waits for a sampler"); },
                          30s),
                        head.output());
  // The run is the actor head/coordinator; kbrl-shell shows what it waits for.
  auto status = test::run_command({test::build_dir() + "/kbrl-shell",
                                   "127.0.0.1:" + std::to_string(head_port), "-c",
                                   "status head/coordinator", "--json", "--timeout", "5"},
                                  20);
  BOOST_CHECK_MESSAGE(contains(status.output, "\"state\":\"waiting\"")
                        && contains(status.output, "a sampler"),
                      status.output);
  test::child_process worker(node_args("worker", "sampler,evaluator"), dir / "worker.out");
  BOOST_CHECK_EQUAL(head.wait_exit(90s), 0);
  auto out = head.output();
  BOOST_CHECK_MESSAGE(contains(out, "sampler(s) worker/sampler.0, evaluator supervisor(s) "
                                    "worker/evaluator-supervisor"),
                      out);
  BOOST_CHECK_MESSAGE(contains(out, "The RL run finished after step 1 of 1"), out);
  BOOST_CHECK(test::trace_steps(dir / "runs/head/traces.jsonl")
              == (std::map<uint64_t, int>{{1, 4}}));
  // The worker outlives the run (it keeps trying to rejoin) until it is stopped.
  BOOST_CHECK(worker.running());
  worker.signal(SIGTERM);
  BOOST_CHECK_EQUAL(worker.wait_exit(20s), 0);
}

BOOST_AUTO_TEST_SUITE_END()
