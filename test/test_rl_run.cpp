// The RL loop as a kbrl-node run:
//   - the [rl]/[problems]/[reward] keys become coordinator settings, with errors naming the key;
//   - the step summary's levels, staleness and distributions; histograms and restarts in
//     TensorBoard event files (read back by test/tfevents_reader.hpp), written by the metrics
//     sink;
//   - a run directory made consistent for --resume (coordinator.json against the learner's
//     checkpoint; later steps' lines removed), an earlier run refused or replaced;
// (test_rl_process.cpp runs the whole thing as real processes.)

#include "actors/metrics.hpp"
#include "actors/rl_run.hpp"
#include "cluster_fixture.hpp"
#include "rl_run_files.hpp"
#include "runtime/config/settings.hpp"
#include "runtime/episode/step_summary.hpp"
#include "runtime/node/rl_run_dir.hpp"
#include "runtime/node/rl_settings.hpp"
#include "runtime/report/tfevents_writer.hpp"
#include "runtime/train/checkpoint_list.hpp"
#include "test_support.hpp"
#include "tfevents_reader.hpp"

#include <caf/all.hpp>
#include <fmt/format.h>

#include <boost/test/unit_test.hpp>

#include <map>
#include <set>

using namespace kbrl;
using namespace std::chrono_literals;
using kbrl::test::contains;
using kbrl::test::event_files;
using kbrl::test::steps_of;
using kbrl::test::trace_steps;

namespace {

namespace fs = std::filesystem;

config::run_config rl_config(std::vector<std::string> overrides) {
  auto run = config::run_config::defaults();
  for (auto o : {"rl.enabled=true", "sampler.model=/models/tiny", "problems.root=/problems"})
    BOOST_REQUIRE(!run.apply_override(o));
  for (auto& o : overrides) {
    auto err = run.apply_override(o);
    BOOST_REQUIRE_MESSAGE(!err, describe(err));
  }
  return run;
}

std::string rl_error(std::vector<std::string> overrides, const char* env_root = nullptr) {
  auto s = rl_run_settings_from(rl_config(std::move(overrides)), "/runs/x", env_root);
  return s ? std::string("(no error)") : describe(s.error());
}

trajectory traj(const std::string& problem, uint64_t group, double reward, bool correct,
                double speedup, uint64_t version) {
  trajectory t;
  t.problem_id = problem;
  t.group_id = group;
  t.end_reason = "max_turns";
  turn u;
  u.return_value = reward;
  u.verdict.compiled = true;
  u.verdict.correct = correct;
  u.verdict.error = correct ? eval_error::none : eval_error::mismatch;
  u.verdict.speedup = speedup;
  u.prompt_tokens = {1, 2, 3};
  u.completion_tokens = {4, 5};
  u.policy_version = version;
  t.turns.push_back(u);
  return t;
}

/// A learner checkpoint as checkpoint.cpp lists it (only what latest_checkpoint reads).
void fake_learner_checkpoint(const test::temp_dir& dir, uint64_t version, uint64_t step) {
  auto name = fmt::format("step-{:06d}", version);
  dir.write("run/learner/checkpoints/" + name + "/trainer_state.json", "{}");
  dir.write("run/learner/checkpoints/checkpoints.jsonl",
            fmt::format("{{\"step\":{0},\"dir\":\"{1}\",\"unix_ms\":1,\"policy_version\":{0},"
                        "\"cursor\":{{\"batches_trained\":{0},\"last_batch_id\":{2},"
                        "\"last_coordinator_step\":{2},\"policy_version\":{0}}}}}\n",
                        version, name, step));
}

std::string jsonl_steps(const std::string& name, std::vector<uint64_t> steps) {
  std::string out;
  for (auto s : steps)
    out += fmt::format("{{\"step\":{},\"name\":\"{}\",\"value\":1}}\n", s, name);
  return out;
}

} // namespace

BOOST_AUTO_TEST_SUITE(rl_run)

BOOST_AUTO_TEST_CASE(rl_keys_become_the_coordinator_settings) {
  auto off = rl_run_settings_from(config::run_config::defaults(), "/runs/x", nullptr);
  BOOST_REQUIRE_MESSAGE(off, test::why(off));
  BOOST_CHECK(!off->enabled); // nothing else is read or checked

  auto s = rl_run_settings_from(
    rl_config({"rl.steps=7", "rl.problems_per_step=3", "rl.group_size=5", "rl.eval_every=2",
               "rl.eval_fraction=0.25", "rl.drop_flat_groups=false", "rl.max_turns=2",
               "rl.gamma=0.5", "rl.return_aggregation=max", "rl.temperature=0.7",
               "learner.temperature=0.7", "rl.top_p=0.9", "rl.top_k=20", "rl.max_new_tokens=64",
               "rl.mode=async", "rl.max_staleness=2", "rl.sampler_timeout_s=2.5",
               "rl.eval_timeout_s=45",
               "rl.traces_max_mb=3", "run.seed=9", "problems.levels=[1, 2]",
               "problems.numbers=1-3,7", "problems.backend=torch", "problems.precision=bf16",
               "reward.preset=kevin", "reward.length=0.5", "reward.speed_kind=linear",
               "reward.low_coverage=keep"}),
    "/runs/x", nullptr);
  BOOST_REQUIRE_MESSAGE(s, test::why(s));
  auto& c = s->coordinator;
  BOOST_CHECK(s->enabled);
  BOOST_CHECK_EQUAL(c.steps, 7u);
  BOOST_CHECK_EQUAL(c.problems_per_step, 3u);
  BOOST_CHECK_EQUAL(c.group_size, 5u);
  BOOST_CHECK_EQUAL(c.eval_every, 2u);
  BOOST_CHECK(!c.drop_flat_groups);
  BOOST_CHECK_EQUAL(c.run_dir, "/runs/x");
  BOOST_CHECK_EQUAL(c.traces_max_bytes, 3u << 20);
  BOOST_CHECK_EQUAL(c.seed, 9u);
  BOOST_CHECK_EQUAL(c.episodes.max_turns, 2);
  BOOST_CHECK_EQUAL(c.episodes.gamma, 0.5);
  BOOST_CHECK(c.episodes.aggregation == episode::return_aggregation::max);
  BOOST_CHECK_EQUAL(c.episodes.sampling.temperature, 0.7);
  BOOST_CHECK_EQUAL(c.episodes.sampling.top_p, 0.9);
  BOOST_CHECK_EQUAL(c.episodes.sampling.top_k, 20);
  BOOST_CHECK_EQUAL(c.episodes.sampling.max_new_tokens, 64);
  BOOST_CHECK_EQUAL(c.episodes.sampler_timeout.count(), 2500);
  BOOST_CHECK_EQUAL(c.episodes.timing.timeout_s, 45.0); // the worker's budget per candidate
  BOOST_CHECK_EQUAL(c.episodes.rewards.correct, 0.3); // kevin's
  BOOST_CHECK_EQUAL(c.episodes.rewards.speed, 1.0);   // kevin's
  BOOST_CHECK_EQUAL(c.episodes.rewards.length, 0.5);  // overridden
  BOOST_CHECK(c.episodes.rewards.speed_kind == episode::speed_form::linear);
  BOOST_CHECK(c.episodes.rewards.low_coverage == episode::low_coverage_policy::keep);
  BOOST_CHECK_EQUAL(s->mode, "async");
  BOOST_CHECK_EQUAL(s->max_staleness, 2u);
  BOOST_CHECK_EQUAL(s->eval_fraction, 0.25);
  BOOST_CHECK_EQUAL(s->problems.root, "/problems");
  BOOST_CHECK(s->problems.levels == (std::vector<int32_t>{1, 2}));
  BOOST_REQUIRE_EQUAL(s->problems.numbers.size(), 2u);
  BOOST_CHECK_EQUAL(s->problems.numbers[0].last, 3);
  BOOST_CHECK(s->problems.backend == kernel_backend::torch);
  BOOST_CHECK(s->problems.precision == kernel_precision::bf16);
  BOOST_CHECK_EQUAL(s->policy_model, "/models/tiny");

  // An empty problems.root falls back to $KERNELBENCH_ROOT.
  auto env = rl_run_settings_from(rl_config({"problems.root="}), "/runs/x", "/kb");
  BOOST_REQUIRE_MESSAGE(env, test::why(env));
  BOOST_CHECK_EQUAL(env->problems.root, "/kb");
}

BOOST_AUTO_TEST_CASE(the_coordinator_and_episode_defaults_are_the_settings_tables) {
  // One source for each default: what a default-constructed struct holds (code and tests that
  // build settings by hand) must be what the run config's table gives (issue 17; rl.steps was
  // 100 there and 10 here). A new field with a table key belongs here too.
  auto s = rl_run_settings_from(rl_config({}), "/runs/x", nullptr);
  BOOST_REQUIRE_MESSAGE(s, test::why(s));
  const auto& c = s->coordinator;
  const coordinator_settings dc;
  BOOST_CHECK_EQUAL(c.steps, dc.steps);
  BOOST_CHECK_EQUAL(c.problems_per_step, dc.problems_per_step);
  BOOST_CHECK_EQUAL(c.group_size, dc.group_size);
  BOOST_CHECK_EQUAL(c.eval_every, dc.eval_every);
  BOOST_CHECK_EQUAL(c.drop_flat_groups, dc.drop_flat_groups);
  BOOST_CHECK_EQUAL(c.learner_timeout.count(), dc.learner_timeout.count());
  BOOST_CHECK_EQUAL(c.traces_max_bytes, dc.traces_max_bytes);
  BOOST_CHECK_EQUAL(c.seed, dc.seed);
  BOOST_CHECK(c.mode == dc.mode);
  BOOST_CHECK_EQUAL(c.max_staleness, dc.max_staleness);
  BOOST_CHECK_EQUAL(c.max_failed_steps, dc.max_failed_steps);
  const auto& e = c.episodes;
  const episode_settings de;
  BOOST_CHECK_EQUAL(e.max_turns, de.max_turns);
  BOOST_CHECK_EQUAL(e.gamma, de.gamma);
  BOOST_CHECK(e.aggregation == de.aggregation);
  BOOST_CHECK_EQUAL(e.success_speedup, de.success_speedup);
  BOOST_CHECK_EQUAL(e.max_retries, de.max_retries);
  BOOST_CHECK_EQUAL(e.sampler_timeout.count(), de.sampler_timeout.count());
  BOOST_CHECK_EQUAL(e.evaluator_timeout.count(), de.evaluator_timeout.count());
  BOOST_CHECK_EQUAL(e.sampling.temperature, de.sampling.temperature);
  BOOST_CHECK_EQUAL(e.sampling.top_p, de.sampling.top_p);
  BOOST_CHECK_EQUAL(e.sampling.top_k, de.sampling.top_k);
  BOOST_CHECK_EQUAL(e.sampling.max_new_tokens, de.sampling.max_new_tokens);
  BOOST_CHECK_EQUAL(e.timing.correctness_trials, de.timing.correctness_trials);
  BOOST_CHECK_EQUAL(e.timing.perf_trials, de.timing.perf_trials);
  BOOST_CHECK_EQUAL(e.timing.timeout_s, de.timing.timeout_s);
  BOOST_CHECK_EQUAL(s->max_staleness, rl_run_settings{}.max_staleness);
  BOOST_CHECK_EQUAL(s->mode, rl_run_settings{}.mode);
}

BOOST_AUTO_TEST_CASE(rl_config_errors_name_the_key) {
  auto missing_root = rl_error({"problems.root="});
  BOOST_CHECK_MESSAGE(contains(missing_root, "problems.root")
                        && contains(missing_root, "KERNELBENCH_ROOT"),
                      missing_root);
  BOOST_CHECK(contains(rl_error({"problems.root="}, ""), "KERNELBENCH_ROOT"));
  auto weight = rl_error({"reward.format=-0.5"});
  BOOST_CHECK_MESSAGE(contains(weight, "reward.format") && contains(weight, "-1"), weight);
  BOOST_CHECK(contains(rl_error({"reward.speed_cap=0"}), "reward.speed_cap"));
  auto temperature = rl_error({"rl.temperature=0.5"});
  BOOST_CHECK_MESSAGE(contains(temperature, "rl.temperature")
                        && contains(temperature, "learner.temperature"),
                      temperature);
  BOOST_CHECK_EQUAL(rl_error({"rl.temperature=0"}), "(no error)"); // greedy counts as 1
  auto staleness = rl_error({"rl.mode=async", "rl.max_staleness=9"});
  BOOST_CHECK_MESSAGE(contains(staleness, "learner.max_staleness"), staleness);
  BOOST_CHECK(contains(rl_error({"rl.eval_every=5"}), "rl.eval_fraction"));
  BOOST_CHECK(contains(rl_error({"problems.numbers=3-1"}), "problems.numbers"));
  BOOST_CHECK(contains(rl_error({"sampler.model="}), "sampler.model"));
  // Values outside a key's range or spelling are refused when the config is read.
  auto run = config::run_config::defaults();
  auto err = run.apply_override("rl.group_size=1");
  BOOST_CHECK_MESSAGE(err && contains(describe(err), "rl.group_size"), describe(err));
  err = run.apply_override("reward.preset=fast");
  BOOST_CHECK_MESSAGE(err && contains(describe(err), "kevin"), describe(err));
  err = run.apply_override("rl.mode=fast");
  BOOST_CHECK(err && contains(describe(err), "sync"));
}

BOOST_AUTO_TEST_CASE(the_step_summary_has_levels_staleness_and_distributions) {
  auto records = episode::summarize_step(
    {traj("level1/1_a", 1, 1.0, true, 2.0, 3), traj("level1/1_a", 1, 0.0, false, 0, 3),
     traj("level2/5_b", 2, 1.0, true, 0.5, 1), traj("level2/5_b", 2, 1.0, true, 4.0, 2)},
    7, "test", /*learner_version=*/3);
  std::map<std::string, const metric_record*> m;
  for (auto& r : records)
    m[r.name] = &r;
  auto value = [&](const std::string& name) {
    BOOST_REQUIRE_MESSAGE(m.count(name), "no " << name);
    return m[name]->value;
  };
  BOOST_CHECK_CLOSE(value("level1/reward_mean"), 0.5, 1e-9);
  BOOST_CHECK_CLOSE(value("level2/correct_rate"), 1.0, 1e-9);
  BOOST_CHECK_CLOSE(value("rate/fast_1"), 0.5, 1e-9); // speedups 2 and 4 of 4 turns
  BOOST_CHECK_CLOSE(value("speedup/min"), 0.5, 1e-9);
  BOOST_CHECK_EQUAL(value("policy/version_min"), 1.0);
  BOOST_CHECK_EQUAL(value("policy/version_max"), 3.0);
  BOOST_CHECK_CLOSE(value("staleness/mean"), 0.75, 1e-9); // lags 0, 0, 2, 1
  BOOST_CHECK_EQUAL(value("staleness/max"), 2.0);
  BOOST_CHECK_EQUAL(value("tokens/prompt"), 12.0);
  BOOST_CHECK_EQUAL(value("tokens/completion_mean"), 2.0);
  BOOST_CHECK_CLOSE(value("turn1/reward_mean"), 0.75, 1e-9);
  BOOST_CHECK(m["hist/reward"]->samples == (std::vector<double>{1, 0, 1, 1}));
  BOOST_CHECK(m["hist/speedup"]->samples == (std::vector<double>{2, 0.5, 4}));
  BOOST_CHECK(m["reward/mean"]->samples.empty());
  // Without the learner's version there is no staleness.
  auto plain = episode::summarize_step({traj("x", 1, 0, false, 0, 0)}, 1, "test");
  for (auto& r : plain)
    BOOST_CHECK(r.name.rfind("staleness/", 0) != 0 && r.name != "hist/speedup");
}

BOOST_AUTO_TEST_CASE(histograms_and_restarts_are_written_as_tensorboard_reads_them) {
  auto h = report::make_histogram({0, 1, 2, 3}, 2);
  BOOST_CHECK_EQUAL(h.num, 4);
  BOOST_CHECK_EQUAL(h.sum, 6);
  BOOST_CHECK_EQUAL(h.sum_squares, 14);
  BOOST_CHECK(h.bucket_limit == (std::vector<double>{1.5, 3}));
  BOOST_CHECK(h.bucket == (std::vector<double>{2, 2}));
  auto same = report::make_histogram({0.5, 0.5});
  BOOST_CHECK_EQUAL(same.min, 0); // one bucket of width 1 around the value
  BOOST_CHECK_EQUAL(same.max, 1);
  BOOST_CHECK(same.bucket == (std::vector<double>{2}));

  test::temp_dir dir;
  auto w = report::tfevents_writer::create(dir / "tb", "test");
  BOOST_REQUIRE_MESSAGE(w, test::why(w));
  BOOST_REQUIRE(w->write_session_start(5));
  BOOST_REQUIRE(w->write_histograms(5, {{"hist/reward", h}}));
  auto events = test::read_event_file(w->path());
  BOOST_REQUIRE_EQUAL(events.size(), 3u);
  BOOST_CHECK_EQUAL(events[0].file_version, "brain.Event:2");
  BOOST_CHECK_EQUAL(events[1].session_status, 1); // START
  BOOST_CHECK_EQUAL(events[1].step, 5);
  BOOST_REQUIRE_EQUAL(events[2].histograms.size(), 1u);
  auto& [tag, back] = events[2].histograms.front();
  BOOST_CHECK_EQUAL(tag, "hist/reward");
  BOOST_CHECK_EQUAL(back.min, 0);
  BOOST_CHECK_EQUAL(back.max, 3);
  BOOST_CHECK(back.bucket_limit == h.bucket_limit);
  BOOST_CHECK(back.bucket == h.bucket);
}

BOOST_AUTO_TEST_CASE(the_metrics_sink_writes_scalars_and_histograms_to_tensorboard) {
  test::temp_dir dir;
  caf::actor_system_config cfg;
  register_message_types(cfg);
  caf::actor_system sys{cfg};
  actor_stats stats;
  stats.name = "test/metrics";
  auto sink = sys.spawn(metrics_sink, stats, dir / "metrics.jsonl", std::string());
  // The learner's scalars of a step come first and are held; the coordinator's commit (which
  // carries progress/done_frac) completes the step's one line.
  caf::anon_send(sink, metrics_atom::value,
                 std::vector<metric_record>{{3, "learner/loss", 0.5, 1, "test/learner", {}}});
  auto step = [](uint64_t s) {
    return std::vector<metric_record>{{s, "reward/mean", 0.25 * s, 1, "test", {}},
                                      {s, "hist/reward", 2, 1, "test", {0.0, 0.5 * s}},
                                      report::commit_record(s, 10, 1, "test")};
  };
  caf::anon_send(sink, metrics_atom::value, step(3));
  caf::anon_send(sink, metrics_atom::value, step(4));
  BOOST_REQUIRE(test::eventually(
    [&] {
      auto files = event_files(dir / "tensorboard");
      return files.size() == 1 && test::read_event_file(files[0]).size() == 7;
    },
    10s));
  auto events = test::read_event_file(event_files(dir / "tensorboard")[0]);
  BOOST_CHECK_EQUAL(events[1].session_status, 1);
  BOOST_CHECK_EQUAL(events[1].step, 3); // the sink's first step: earlier files lose steps >= 3
  std::map<int64_t, float> reward;
  std::set<int64_t> histogram_steps;
  for (auto& e : events) {
    for (auto& [tag, x] : e.scalars)
      if (tag == "reward/mean")
        reward[e.step] = x;
    for (auto& [tag, hist] : e.histograms)
      if (tag == "hist/reward" && hist.num == 2)
        histogram_steps.insert(e.step);
  }
  BOOST_CHECK_CLOSE(reward[3], 0.75f, 1e-4);
  BOOST_CHECK_CLOSE(reward[4], 1.0f, 1e-4);
  BOOST_CHECK(histogram_steps == (std::set<int64_t>{3, 4}));
  auto lines = report::read_metrics_jsonl(dir / "metrics.jsonl");
  BOOST_REQUIRE_MESSAGE(lines, test::why(lines));
  BOOST_REQUIRE_EQUAL(lines->size(), 2u); // one line per step
  auto& three = lines->front();
  BOOST_CHECK_EQUAL(three.step, 3u);
  BOOST_CHECK_EQUAL(three.scalars.at("learner/loss"), 0.5); // held until the commit
  BOOST_CHECK_EQUAL(three.scalars.at("reward/mean"), 0.75);
  BOOST_CHECK_EQUAL(three.scalars.at("progress/done_frac"), 0.3);
  BOOST_CHECK((three.distributions.at("hist/reward") == std::vector<double>{0.0, 1.5}));
  BOOST_CHECK((lines->back().distributions.at("hist/reward") == std::vector<double>{0.0, 2.0}));
  // A held-out evaluation after step 4: a line of its own for that step.
  caf::anon_send(sink, metrics_atom::value,
                 std::vector<metric_record>{{4, "eval/reward/mean", 0.9, 1, "test", {}}});
  BOOST_REQUIRE(test::eventually(
    [&] { return report::read_metrics_jsonl(dir / "metrics.jsonl")->size() == 3; }, 10s));
  caf::anon_send_exit(sink, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(resume_follows_the_learner_checkpoint_and_drops_later_steps) {
  test::temp_dir dir;
  auto run = dir / "run";
  // The learner's checkpoint and coordinator.json agree (step 3 had only flat groups).
  dir.write("run/coordinator.json", "{\"step\":3,\"cursor\":6,\"policy_version\":2}\n");
  fake_learner_checkpoint(dir, /*version=*/2, /*step=*/2);
  dir.write("run/metrics.jsonl", jsonl_steps("reward/mean", {1, 2, 3, 4}) + "{\"step\":4,\"na");
  dir.write("run/traces.jsonl", jsonl_steps("t", {1, 1, 2, 2, 3, 3, 4}));
  auto p = prepare_resume(run, /*problems_per_step=*/2);
  BOOST_REQUIRE_MESSAGE(p, test::why(p));
  BOOST_CHECK_EQUAL(p->step, 3u);
  BOOST_CHECK_EQUAL(p->cursor, 6u);
  BOOST_CHECK(p->adjusted.empty());
  BOOST_CHECK_EQUAL(p->metrics_lines_removed, 2u); // step 4 and the torn line
  BOOST_CHECK_EQUAL(p->trace_lines_removed, 1u);
  BOOST_CHECK(steps_of(dir / "run/metrics.jsonl", "reward/mean")
              == (std::map<uint64_t, int>{{1, 1}, {2, 1}, {3, 1}}));

  // coordinator.json got ahead of the learner's newest checkpoint: back to that checkpoint.
  dir.write("run/coordinator.json", "{\"step\":3,\"cursor\":6,\"policy_version\":3}\n");
  p = prepare_resume(run, 2);
  BOOST_REQUIRE_MESSAGE(p, test::why(p));
  BOOST_CHECK_EQUAL(p->step, 2u);
  BOOST_CHECK_EQUAL(p->cursor, 4u);
  BOOST_CHECK_EQUAL(p->policy_version, 2u);
  BOOST_CHECK(contains(p->adjusted, "step 2"));
  auto cp = read_coordinator_checkpoint(run);
  BOOST_REQUIRE(cp);
  BOOST_CHECK_EQUAL(cp->step, 2u);
  BOOST_CHECK_EQUAL(cp->cursor, 4u);
  BOOST_CHECK(trace_steps(dir / "run/traces.jsonl") == (std::map<uint64_t, int>{{1, 2}, {2, 2}}));

  // traces.jsonl was rotated during step 3: its first lines are in traces.1.jsonl. Both files
  // lose the redone step, so it is counted once when it runs again.
  dir.write("run/traces.1.jsonl", jsonl_steps("t", {1, 1, 2, 2, 3}));
  dir.write("run/traces.jsonl", jsonl_steps("t", {3, 3}));
  p = prepare_resume(run, 2);
  BOOST_REQUIRE_MESSAGE(p, test::why(p));
  BOOST_CHECK_EQUAL(p->step, 2u);
  BOOST_CHECK_EQUAL(p->trace_lines_removed, 3u);
  BOOST_CHECK(trace_steps(dir / "run/traces.1.jsonl")
              == (std::map<uint64_t, int>{{1, 2}, {2, 2}}));
  BOOST_CHECK(trace_steps(dir / "run/traces.jsonl").empty());

  dir.write("run/coordinator.json", "{\"step\": \"three\"}");
  auto bad = prepare_resume(run, 2);
  BOOST_REQUIRE(!bad);
  BOOST_CHECK(contains(describe(bad.error()), "coordinator.json"));
}

BOOST_AUTO_TEST_CASE(an_earlier_run_is_named_and_removed_only_when_asked) {
  test::temp_dir dir;
  BOOST_CHECK(earlier_run_files(dir / "run").empty());
  dir.write("run/config.toml", "");
  dir.write("run/logs/local.log", "x");
  BOOST_CHECK(earlier_run_files(dir / "run").empty()); // config and logs are no run
  dir.write("run/coordinator.json", "{\"step\":4,\"cursor\":8,\"policy_version\":4}");
  dir.write("run/metrics.jsonl", "{}\n");
  dir.write("run/tensorboard/events.out.tfevents.1.h.kbrl", "x");
  auto files = earlier_run_files(dir / "run");
  BOOST_CHECK((files == std::vector<std::string>{"coordinator.json at step 4", "metrics.jsonl",
                                                 "tensorboard/"}));
  BOOST_REQUIRE(remove_earlier_run(dir / "run"));
  BOOST_CHECK(earlier_run_files(dir / "run").empty());
  BOOST_CHECK(fs::exists(dir / "run/config.toml"));
}

BOOST_AUTO_TEST_CASE(the_worker_board_hands_out_new_lists_once) {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto dummy = sys.spawn([]() -> caf::behavior { return {[](int) {}}; });
  worker_board board;
  std::vector<sampler_actor> samplers;
  std::vector<evaluator_supervisor_actor> evaluators;
  BOOST_CHECK_EQUAL(board.copy_if_newer(0, samplers, evaluators), 0u); // nothing yet
  BOOST_CHECK_EQUAL(board.missing(), "");
  board.set({caf::actor_cast<sampler_actor>(dummy), caf::actor_cast<sampler_actor>(dummy)},
            {caf::actor_cast<evaluator_supervisor_actor>(dummy)});
  auto seen = board.copy_if_newer(0, samplers, evaluators);
  BOOST_CHECK_EQUAL(seen, 1u);
  BOOST_CHECK_EQUAL(samplers.size(), 2u);
  BOOST_CHECK_EQUAL(evaluators.size(), 1u);
  BOOST_CHECK_EQUAL(board.missing(), "");
  samplers.clear();
  BOOST_CHECK_EQUAL(board.copy_if_newer(seen, samplers, evaluators), 1u);
  BOOST_CHECK(samplers.empty()); // not newer: left alone
  // The evaluator node was lost: an empty list is handed out too (episodes then wait).
  board.set({caf::actor_cast<sampler_actor>(dummy)}, {});
  BOOST_CHECK_EQUAL(board.missing(), "an evaluator");
  BOOST_CHECK_EQUAL(board.copy_if_newer(seen, samplers, evaluators), 2u);
  BOOST_CHECK_EQUAL(samplers.size(), 1u);
  BOOST_CHECK(evaluators.empty());
  board.set({}, {});
  BOOST_CHECK_EQUAL(board.missing(), "a sampler and an evaluator");
  caf::anon_send_exit(dummy, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(the_progress_line_says_how_the_run_goes) {
  std::vector<metric_record> m{{2, "reward/mean", 0.125, 0, "", {}},
                               {2, "reward/max", 1.3, 0, "", {}},
                               {2, "rate/correct", 0.25, 0, "", {}},
                               {2, "rate/compiled", 0.5, 0, "", {}},
                               {2, "rate/format", 0.75, 0, "", {}},
                               {2, "episodes", 16, 0, "", {}},
                               {2, "tokens", 48000, 0, "", {}},
                               {2, "groups/dropped_flat", 1, 0, "", {}}};
  auto line = progress_line(m, 2, 10, 40, 41);
  BOOST_CHECK_EQUAL(line,
                    "step 2/10: mean reward 0.125 (best 1.300), 25% correct, 50% compiled, 75% "
                    "well-formed; 16 episodes, 40 s for the step (24.0 episodes/min, 1200 tokens/s); 1 "
                    "group(s) with equal rewards not trained on; about 5 min 28 s left");
  BOOST_CHECK(!contains(progress_line(m, 10, 10, 40, 41), "left"));
  BOOST_CHECK_EQUAL(human_duration(7500), "2 h 5 min");
}

BOOST_AUTO_TEST_SUITE_END()

