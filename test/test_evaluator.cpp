// The evaluator supervisor and its evaluators with real worker processes (a stand-in worker
// whose behaviour the candidate's markers choose: #crash, #hang, #sticky, #slow N, #wrong), so
// these tests need no torch: every request gets exactly one answer, crashes and hangs become
// verdicts, the evaluator comes back with a fresh worker, queued requests run on it, a full
// queue answers busy, and a spent restart budget degrades the slot until its back-off passes.

#include "actors/evaluator_supervisor.hpp"
#include "messages/type_ids.hpp"
#include "cluster_fixture.hpp"
#include "test_support.hpp"

#include <caf/all.hpp>

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <thread>

using namespace kbrl;
using namespace std::chrono_literals;

namespace {

struct evaluator_fixture {
  test::temp_dir dir;
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  supervisor_settings settings;
  std::vector<std::string> build_env; ///< extra environment of the builders' workers
  uint32_t recycle_after = 200;       ///< evaluations before a worker is replaced

  evaluator_fixture() {
    register_message_types(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
    settings.queue_capacity = 16;
    settings.restart_limit = 5;
    settings.restart_window = 60s;
    settings.degraded_backoff = 1s;
    settings.request_margin = 5s;
  }

  evaluator_slot slot(int index) {
    evaluator_slot s;
    s.name = "n/evaluator." + std::to_string(index);
    s.engine.worker.python = "/usr/bin/python3";
    s.engine.worker.script = std::string(KBRL_TEST_DATA) + "/workers/hostile_worker.py";
    s.engine.worker.scratch_dir = dir / ("scratch" + std::to_string(index));
    s.engine.worker.extensions_dir = dir / "extensions";
    s.engine.worker.isolation = eval::isolation_mode::none;
    s.engine.start_timeout = 20s;
    s.engine.kill_grace = 500ms; // the hostile worker never answers a hang itself
    s.engine.recycle_after = recycle_after;
    return s;
  }

  evaluator_supervisor_actor spawn(int evaluators) {
    std::vector<evaluator_slot> slots;
    for (int i = 0; i < evaluators; ++i)
      slots.push_back(slot(i));
    actor_stats stats;
    stats.name = "n/evaluator-supervisor";
    stats.node = "n";
    stats.role = "evaluator-supervisor";
    auto builder_opts = slot(0).engine;
    builder_opts.worker.scratch_dir = dir / "builders";
    builder_opts.worker.extra_env = build_env;
    return sys->spawn(evaluator_supervisor, stats, settings, slots, builder_opts);
  }

  static eval_request request(uint64_t id, const std::string& marker, double timeout_s = 20) {
    eval_request r;
    r.id = id;
    // A candidate the static checks accept; the marker (a comment) steers the stand-in worker.
    r.candidate_source = "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
                         "    def forward(self, x):\n        return torch.clamp_min(x, 0.0)\n\n"
                         + marker + "\n";
    r.task.reference_source = "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
                              "    def forward(self, x):\n        return torch.relu(x)\n\n\n"
                              "def get_inputs():\n    return [torch.randn(4, 4)]\n\n\n"
                              "def get_init_inputs():\n    return []\n";
    r.task.backend = kernel_backend::torch;
    r.timing.correctness_trials = 2;
    r.timing.perf_trials = 5;
    r.timing.timeout_s = timeout_s;
    return r;
  }

  /// Sends every request at once, then collects each one's single answer (or error) by its own
  /// request id.
  std::map<uint64_t, caf::expected<eval_result>>
  evaluate_all(const evaluator_supervisor_actor& sup, const std::vector<eval_request>& reqs,
               std::chrono::seconds timeout = 60s) {
    caf::scoped_actor self{*sys};
    using handle_t = decltype(self->request(sup, timeout, evaluate_atom::value, reqs.front()));
    std::vector<handle_t> pending;
    for (auto& r : reqs)
      pending.push_back(self->request(sup, timeout, evaluate_atom::value, r));
    std::map<uint64_t, caf::expected<eval_result>> out;
    for (size_t i = 0; i < reqs.size(); ++i)
      pending[i].receive([&](eval_result& r) { out.emplace(reqs[i].id, std::move(r)); },
                         [&](caf::error& err) { out.emplace(reqs[i].id, std::move(err)); });
    return out;
  }

  eval_result evaluate_one(const evaluator_supervisor_actor& sup, const eval_request& req) {
    auto all = evaluate_all(sup, {req});
    auto& res = all.at(req.id);
    BOOST_REQUIRE_MESSAGE(res, test::why(res));
    return *res;
  }

  actor_status slot_status(const evaluator_supervisor_actor& sup, const std::string& name) {
    caf::scoped_actor self{*sys};
    actor_status out;
    self->request(sup, 10s, status_atom::value, name)
      .receive([&](actor_status& st) { out = std::move(st); },
               [&](caf::error& err) { BOOST_FAIL(sys->render(err)); });
    return out;
  }

  void stop(const evaluator_supervisor_actor& sup) {
    caf::anon_send_exit(sup, caf::exit_reason::user_shutdown);
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(evaluator, evaluator_fixture)

BOOST_AUTO_TEST_CASE(good_candidates_are_answered_and_reference_timing_is_reused) {
  auto sup = spawn(1);
  auto first = evaluate_one(sup, request(1, "# fine"));
  BOOST_CHECK(first.correct);
  BOOST_CHECK_EQUAL(first.evaluator, "n/evaluator.0");
  BOOST_CHECK_CLOSE(first.speedup, 2.0, /*tol %=*/1e-6);
  auto second = evaluate_one(sup, request(2, "# also fine"));
  BOOST_CHECK(second.correct);
  // The second candidate of the same problem reuses the reference's timing.
  BOOST_CHECK_EQUAL(second.reference_runtime.mean_ms, 4.0);
  BOOST_CHECK_CLOSE(second.speedup, 2.0, 1e-6);
  stop(sup);
}

BOOST_AUTO_TEST_CASE(a_crash_is_a_verdict_and_the_queue_runs_on_a_fresh_worker) {
  auto sup = spawn(1);
  evaluate_one(sup, request(1, "# warm up"));
  auto answers = evaluate_all(sup, {request(2, "#crash"), request(3, "# fine"),
                                    request(4, "#wrong")});
  BOOST_REQUIRE_EQUAL(answers.size(), 3u);
  BOOST_REQUIRE(answers.at(2));
  BOOST_CHECK(answers.at(2)->error == eval_error::crashed);
  BOOST_CHECK_MESSAGE(answers.at(2)->error_excerpt.find("worker") != std::string::npos,
                      answers.at(2)->error_excerpt);
  BOOST_REQUIRE(answers.at(3));
  BOOST_CHECK(answers.at(3)->correct);
  BOOST_REQUIRE(answers.at(4));
  BOOST_CHECK(answers.at(4)->error == eval_error::mismatch);
  auto st = slot_status(sup, "n/evaluator.0");
  BOOST_CHECK_EQUAL(st.restarts, 1u);
  BOOST_CHECK_MESSAGE(st.last_error.find("worker") != std::string::npos, st.last_error);
  stop(sup);
}

BOOST_AUTO_TEST_CASE(a_planned_recycle_replaces_the_worker_without_a_restart) {
  recycle_after = 2;
  auto sup = spawn(1);
  for (uint64_t id = 1; id <= 5; ++id)
    BOOST_CHECK(evaluate_one(sup, request(id, "# fine " + std::to_string(id))).correct);
  // Two recycles happened (after evaluations 2 and 4); none counts against the restart budget.
  auto st = slot_status(sup, "n/evaluator.0");
  BOOST_CHECK_EQUAL(st.restarts, 0u);
  BOOST_CHECK_EQUAL(st.state, "idle");
  stop(sup);
}

BOOST_AUTO_TEST_CASE(a_hang_times_out_and_the_next_candidate_still_runs) {
  auto sup = spawn(1);
  auto answers = evaluate_all(sup, {request(1, "#hang", /*timeout_s=*/1.5), request(2, "# ok")});
  BOOST_REQUIRE(answers.at(1));
  BOOST_CHECK(answers.at(1)->error == eval_error::timeout);
  BOOST_REQUIRE(answers.at(2));
  BOOST_CHECK(answers.at(2)->correct);
  stop(sup);
}

BOOST_AUTO_TEST_CASE(a_sticky_device_error_replaces_the_worker) {
  auto sup = spawn(1);
  auto sticky = evaluate_one(sup, request(1, "#sticky"));
  BOOST_CHECK(sticky.error == eval_error::runtime);
  auto after = evaluate_one(sup, request(2, "# ok"));
  BOOST_CHECK(after.correct);
  BOOST_CHECK_EQUAL(slot_status(sup, "n/evaluator.0").restarts, 1u);
  stop(sup);
}

BOOST_AUTO_TEST_CASE(a_worker_killed_between_requests_costs_no_verdict) {
  auto sup = spawn(1);
  evaluate_one(sup, request(1, "# ok"));
  caf::scoped_actor self{*sys};
  std::string said;
  self->request(sup, 10s, control_atom::value, std::string{"n/evaluator.0"},
                std::string{"kill-worker"}, std::vector<std::string>{})
    .receive([&](std::string& s) { said = s; }, [&](caf::error& e) { BOOST_FAIL(sys->render(e)); });
  BOOST_CHECK(said.find("killed worker pid") != std::string::npos);
  auto next = evaluate_one(sup, request(2, "# innocent"));
  BOOST_CHECK(next.correct);
  stop(sup);
}

BOOST_AUTO_TEST_CASE(a_worker_killed_mid_request_answers_that_request_once) {
  auto sup = spawn(1);
  evaluate_one(sup, request(1, "# ok"));
  caf::scoped_actor self{*sys};
  auto slow = self->request(sup, 60s, evaluate_atom::value, request(2, "#slow 5"));
  auto queued = self->request(sup, 60s, evaluate_atom::value, request(3, "# behind it"));
  // Kill -9 the stand-in worker while it evaluates, as the OOM killer or an operator would.
  std::this_thread::sleep_for(1s);
  auto pids = test::run_command({"pgrep", "-f", "hostile_worker.py"}).output;
  BOOST_REQUIRE_MESSAGE(!pids.empty(), "no worker process found");
  test::run_command({"pkill", "-9", "-f", "hostile_worker.py"});
  int answers = 0;
  slow.receive(
    [&](eval_result& r) {
      ++answers;
      BOOST_CHECK(r.error == eval_error::crashed);
      BOOST_CHECK_MESSAGE(r.error_excerpt.find("SIGKILL") != std::string::npos, r.error_excerpt);
    },
    [&](caf::error& e) { BOOST_FAIL(sys->render(e)); });
  queued.receive(
    [&](eval_result& r) {
      ++answers;
      BOOST_CHECK(r.correct); // re-run on the fresh worker
    },
    [&](caf::error& e) { BOOST_FAIL(sys->render(e)); });
  BOOST_CHECK_EQUAL(answers, 2);
  // No second answer for either request arrives later.
  bool extra = false;
  self->receive([&](eval_result&) { extra = true; }, caf::after(500ms) >> [] {});
  BOOST_CHECK(!extra);
  stop(sup);
}

BOOST_AUTO_TEST_CASE(requests_spread_over_evaluators_and_a_full_queue_says_busy) {
  settings.queue_capacity = 2;
  auto sup = spawn(2);
  std::vector<eval_request> reqs;
  for (uint64_t i = 1; i <= 8; ++i)
    reqs.push_back(request(i, "#slow 0.5"));
  auto answers = evaluate_all(sup, reqs);
  size_t busy = 0, correct = 0;
  std::set<std::string> evaluators;
  for (auto& [id, res] : answers) {
    if (!res) {
      BOOST_CHECK_MESSAGE(describe(res.error()).find("busy") != std::string::npos,
                          describe(res.error()));
      ++busy;
    } else {
      correct += res->correct ? 1 : 0;
      evaluators.insert(res->evaluator);
    }
  }
  BOOST_CHECK_EQUAL(busy + correct, 8u);
  BOOST_CHECK_GE(busy, 1u);
  BOOST_CHECK_EQUAL(evaluators.size(), 2u);
  stop(sup);
}

BOOST_AUTO_TEST_CASE(a_spent_restart_budget_degrades_until_the_back_off_passes) {
  settings.restart_limit = 1;
  auto sup = spawn(1);
  BOOST_CHECK(evaluate_one(sup, request(1, "#crash")).error == eval_error::crashed);
  BOOST_CHECK(evaluate_one(sup, request(2, "#crash")).error == eval_error::crashed);
  // Budget spent: degraded, and requests are answered (not lost) while it lasts.
  bool degraded = false;
  for (int i = 0; i < 50 && !degraded; ++i) {
    degraded = slot_status(sup, "n/evaluator.0").state == "degraded";
    if (!degraded)
      std::this_thread::sleep_for(20ms);
  }
  BOOST_REQUIRE(degraded);
  auto during = evaluate_one(sup, request(3, "# ok"));
  BOOST_CHECK(during.error == eval_error::infrastructure);
  std::this_thread::sleep_for(1500ms); // degraded_backoff = 1 s
  auto after = evaluate_one(sup, request(4, "# ok"));
  BOOST_CHECK(after.correct);
  stop(sup);
}

BOOST_AUTO_TEST_CASE(builders_build_each_source_once_and_answer_failed_builds_for_every_copy) {
  settings.build_workers = 2;
  build_env.push_back("KBRL_TEST_BUILD_LOG=1");
  auto sup = spawn(1);
  auto dup = [&](uint64_t id) { return request(id, "#build_slow 0.5 (a duplicate)"); };
  auto failing = [&](uint64_t id) { return request(id, "#build_fail"); };
  auto answers = evaluate_all(sup, {dup(1), dup(2), request(3, "#build_slow 0.5 (distinct)"),
                                    failing(4), dup(5), failing(6)});
  for (uint64_t id : {1, 2, 3, 5}) {
    BOOST_REQUIRE(answers.at(id));
    BOOST_CHECK_MESSAGE(answers.at(id)->correct, id << ": " << answers.at(id)->error_excerpt);
  }
  for (uint64_t id : {4, 6}) {
    BOOST_REQUIRE(answers.at(id));
    BOOST_CHECK(answers.at(id)->error == eval_error::compile);
    BOOST_CHECK(!answers.at(id)->compiled);
    BOOST_CHECK_EQUAL(answers.at(id)->id, id);
    BOOST_CHECK_MESSAGE(answers.at(id)->error_excerpt.find("expected ';'") != std::string::npos,
                        answers.at(id)->error_excerpt);
  }
  // Three distinct sources: three builds, whichever builder ran them.
  size_t builds = 0;
  for (auto b : {"builder.0", "builder.1"}) {
    std::ifstream in(dir / (std::string("builders/") + b + "/builds.log"));
    std::string line;
    while (std::getline(in, line))
      ++builds;
  }
  BOOST_CHECK_EQUAL(builds, 3u);
  // Failed builds never reached the GPU evaluator: it evaluated the four good ones only.
  BOOST_CHECK_EQUAL(slot_status(sup, "n/evaluator.0").messages_handled, 4u);
  // A later copy of a failed build is answered from the record, without building again.
  auto again = evaluate_one(sup, failing(7));
  BOOST_CHECK(again.error == eval_error::compile);
  stop(sup);
}

BOOST_AUTO_TEST_CASE(a_forged_answer_on_the_pipe_is_ignored_and_reported) {
  auto sup = spawn(1);
  auto forged = evaluate_one(sup, request(1, "#forge"));
  BOOST_CHECK(!forged.correct && !forged.kernelbench_correct);
  BOOST_CHECK_EQUAL(forged.speedup, 0.0);
  BOOST_CHECK(std::count(forged.hack_flags.begin(), forged.hack_flags.end(),
                         "protocol_violation") == 1);
  BOOST_CHECK_MESSAGE(forged.error_excerpt.find("forged") != std::string::npos,
                      forged.error_excerpt);
  // The next candidate gets its own answer, not a forged line left on the pipe, and no
  // reference time from the forgery (1000 ms would make its speedup 500x).
  auto honest = evaluate_one(sup, request(2, ""));
  BOOST_CHECK(honest.correct);
  BOOST_CHECK(honest.hack_flags.empty());
  BOOST_CHECK_LT(honest.speedup, 10.0);
  caf::anon_send_exit(sup, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(a_candidates_budget_is_scaled_to_its_problem_once_the_reference_is_timed) {
  // Issue 21: a hung candidate held an RL step for the whole 300 s. Once the problem's
  // reference was timed (4 ms here: 1 s per call), the worker is given base + calls x 1 s.
  auto sup = spawn(1);
  auto first = evaluate_one(sup, request(1, "#show_timeout", 300));
  BOOST_CHECK_EQUAL(first.error_excerpt, "timeout_s=300"); // nothing known of the problem yet
  auto req = request(2, "#show_timeout", 300);
  auto second = evaluate_one(sup, req);
  const auto& t = req.timing;
  const int64_t calls = t.correctness_trials + t.warmup_runs + t.perf_trials * 2 + 2;
  eval::engine_options defaults;
  BOOST_CHECK_EQUAL(second.error_excerpt,
                    "timeout_s=" + std::to_string(static_cast<int64_t>(
                                     defaults.scaled_timeout_base_s + calls)));
  BOOST_CHECK_EQUAL(eval::scaled_timeout_s(300, 60, 240, 17, 4.0), 300.0);  // a build to come
  BOOST_CHECK_EQUAL(eval::scaled_timeout_s(300, 60, 0, 17, 4.0), 77.0);
  BOOST_CHECK_EQUAL(eval::scaled_timeout_s(300, 60, 0, 10, 100.0), 110.0); // 5 s per call
  BOOST_CHECK_EQUAL(eval::scaled_timeout_s(30, 60, 0, 10, 1.0), 30.0);     // never more
  // A torch-backend candidate with a C++ extension keeps the build allowance until it is built
  // (on a slow machine its first build took longer than the plain budget).
  BOOST_CHECK(!eval::may_build_an_extension(kernel_backend::torch, "y = torch.relu(x)"));
  BOOST_CHECK(eval::may_build_an_extension(
    kernel_backend::torch, "from torch.utils.cpp_extension import load_inline"));
  BOOST_CHECK(eval::may_build_an_extension(kernel_backend::cuda, "y = torch.relu(x)"));
  caf::anon_send_exit(sup, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_SUITE_END()
