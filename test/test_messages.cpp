// Every type that crosses nodes survives serialisation through the registered type IDs.
// A type missing from the ID block works between local actors and fails only across nodes,
// so each one is round-tripped here the way the middleman does it: inside a caf::message.

#include "messages/type_ids.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/deep_to_string.hpp>
#include <caf/message.hpp>

#include <boost/test/unit_test.hpp>

#include <typeinfo>

namespace {

struct message_fixture {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  message_fixture() {
    kbrl::register_message_types(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
  }

  /// Serialises x as a message, reads it back as a message, returns the element.
  template <class T>
  T round_trip(const T& x) {
    std::vector<char> buf;
    caf::binary_serializer sink{*sys, buf};
    auto msg = caf::make_message(x);
    if (auto err = sink(msg))
      BOOST_FAIL("serialising " << typeid(T).name() << " failed: " << kbrl::describe(err));
    caf::binary_deserializer source{*sys, buf};
    caf::message copy;
    if (auto err = source(copy))
      BOOST_FAIL("deserialising " << typeid(T).name()
                                  << " failed: " << kbrl::describe(err));
    BOOST_REQUIRE(copy.match_elements<T>());
    return copy.get_as<T>(0);
  }

  template <class T>
  void check(const T& x) {
    auto y = round_trip(x);
    BOOST_CHECK_EQUAL(caf::deep_to_string(x), caf::deep_to_string(y));
  }
};

kbrl::problem sample_problem() {
  kbrl::problem p;
  p.id = "level1/19_ReLU";
  p.level = 1;
  p.number = 19;
  p.name = "19_ReLU";
  p.reference_source = "class Model(nn.Module): ...\n\tunicode: \xc3\xa9";
  p.backend = kbrl::kernel_backend::triton;
  p.precision = kbrl::kernel_precision::bf16;
  p.source_hash = "abc123";
  return p;
}

kbrl::eval_result sample_eval_result() {
  kbrl::eval_result r;
  r.id = 77;
  r.compiled = true;
  r.correct = false;
  r.trials_passed = 3;
  r.trials_total = 5;
  r.error = kbrl::eval_error::mismatch;
  r.error_excerpt = "max abs diff 0.5";
  r.trials = {{true, 0.0, 0.0, "", true, 0.0, 0.0}, {false, 0.5, 0.01, "shape ok", true, 0.25, 0.125}};
  r.kernel_runtime = {1.5, 0.1, 1.4, 1.9, 100};
  r.reference_runtime = {3.0, 0.2, 2.8, 3.5, 100};
  r.speedup = 2.0;
  r.hack_flags = {"try_except"};
  r.device = "NVIDIA H200 (gpu 0)";
  r.evaluator = "gpu1/evaluator.0";
  r.compile_seconds = 31.5;
  r.total_seconds = 40.25;
  r.kernelbench_correct = true;
  r.kernelbench_trials_passed = 5;
  r.strict_correct = false;
  r.time_coverage = 0.625;
  r.kernels = {{"relu_kernel(float*, int)", 0.12, true}, {"at::native::copy", 0.05, false}};
  r.phases = {{"compile", 2.5}, {"coverage", 0.75}};
  r.timing_input_sets = 2;
  r.timing_note = "timed with 2 input set(s) instead of 3";
  r.isolation = "process";
  r.timing_events_ms = 150.5;
  r.timing_wall_ms = 160.25;
  r.timing_overhead_ms = 1.5;
  r.reference_shared = true;
  return r;
}

kbrl::trajectory sample_trajectory() {
  kbrl::trajectory t;
  t.id = 9;
  t.group_id = 3;
  t.problem_id = "level2/1";
  kbrl::turn a;
  a.index = 0;
  a.prompt_tokens = {1, 2, 3};
  a.completion_tokens = {4, 5};
  a.logprobs = {-0.5f, -1.25f};
  a.completion_text = "<KERNEL>...</KERNEL>";
  a.verdict = sample_eval_result();
  a.score = 0.3;
  a.return_value = 0.42;
  a.advantage = -0.1;
  a.policy_version = 12;
  a.retries = 1;
  t.turns = {a, a};
  t.policy_versions = {11, 12};
  t.end_reason = "max_turns";
  return t;
}

kbrl::node_info sample_node_info(caf::actor_system& sys) {
  kbrl::node_info n;
  n.name = "gpu1";
  n.host = "10.0.0.2";
  n.port = 4243;
  n.roles = {"evaluator"};
  n.gpus = {0, 1};
  n.pid = 4242;
  n.kbrl_version = "0.1.0";
  n.torch_version = "2.11";
  n.devices = "2 x NVIDIA H200";
  n.actors = {{"gpu1/evaluator-supervisor", "evaluator-supervisor", caf::actor{}}};
  return n;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(messages, message_fixture)

BOOST_AUTO_TEST_CASE(problem_and_generation_round_trip) {
  check(sample_problem());
  kbrl::sampling_params sp{0.7, 0.95, 50, 2048, 1234, {"</KERNEL>"}, {151645}};
  check(sp);
  kbrl::generation_request req{5, "prompt", {1, 2}, sp, 3, "episode 1 turn 0"};
  check(req);
  auto back = round_trip(req);
  BOOST_CHECK_EQUAL(back.params.top_k, 50);
  BOOST_CHECK_EQUAL(back.trace, "episode 1 turn 0");
  kbrl::generation_result res{5,   "text", {7, 8}, {-0.1f, -0.2f}, kbrl::finish_reason::stop_string,
                              4,   100,    1.5,    "gpu0/sampler.0", ""};
  check(res);
  BOOST_CHECK(round_trip(res).finish == kbrl::finish_reason::stop_string);
}

BOOST_AUTO_TEST_CASE(evaluation_round_trip) {
  kbrl::timing_options t;
  t.perf_trials = 7;
  t.compare_torch_compile = true;
  check(t);
  check(kbrl::runtime_stats{1, 2, 3, 4, 5});
  check(kbrl::trial_result{true, 1e-5, 1e-6, "ok", true, 1e-4, 1e-5});
  check(kbrl::kernel_time{"relu_kernel", 0.5, true});
  check(kbrl::phase_time{"coverage", 1.25});
  kbrl::eval_request req{11, "class ModelNew: ...", sample_problem(), t, "trace"};
  check(req);
  BOOST_CHECK_EQUAL(round_trip(req).task.reference_source, sample_problem().reference_source);
  auto r = sample_eval_result();
  check(r);
  auto back = round_trip(r);
  BOOST_CHECK(back.error == kbrl::eval_error::mismatch);
  BOOST_CHECK_EQUAL(back.total_seconds, 40.25);
  BOOST_CHECK_EQUAL(back.trials.size(), 2u);
  BOOST_CHECK(back.kernelbench_correct);
  BOOST_CHECK_EQUAL(back.kernelbench_trials_passed, 5);
  BOOST_CHECK_EQUAL(back.time_coverage, 0.625);
  BOOST_REQUIRE_EQUAL(back.kernels.size(), 2u);
  BOOST_CHECK_EQUAL(back.kernels[0].name, "relu_kernel(float*, int)");
  BOOST_CHECK(back.kernels[0].own && !back.kernels[1].own);
  BOOST_REQUIRE_EQUAL(back.phases.size(), 2u);
  BOOST_CHECK_EQUAL(back.phases[1].phase, "coverage");
  BOOST_CHECK_EQUAL(back.phases[1].seconds, 0.75);
  BOOST_CHECK_EQUAL(back.trials[1].norm_rel_diff, 0.125);
  BOOST_CHECK_EQUAL(back.timing_note, r.timing_note);
  BOOST_CHECK_EQUAL(back.isolation, "process");
  BOOST_CHECK_EQUAL(back.timing_wall_ms, 160.25);
  BOOST_CHECK(back.reference_shared);
  // A builder node's answer: the verdict and the library's bytes, binary included.
  kbrl::build_output built{r, {{"relu/kbrl-library.json", "{}"}, {"relu/relu.so", {"\x7f" "ELF\0\xff", 6}}}};
  check(built.files[1]);
  check(built);
  auto built_back = round_trip(built);
  BOOST_REQUIRE_EQUAL(built_back.files.size(), 2u);
  BOOST_CHECK_EQUAL(built_back.files[1].bytes, built.files[1].bytes);
  BOOST_CHECK_EQUAL(built_back.files[1].bytes.size(), 6u);
  BOOST_CHECK_EQUAL(built_back.verdict.id, 77u);
}

BOOST_AUTO_TEST_CASE(episode_policy_metric_round_trip) {
  auto t = sample_trajectory();
  check(t.turns[0]);
  check(t);
  kbrl::trajectory_batch batch{1, 2, {t, t}};
  check(batch);
  BOOST_CHECK_EQUAL(round_trip(batch).trajectories[1].turns[1].verdict.speedup, 2.0);
  kbrl::policy_update u{3, 30, "Qwen/Qwen2.5-Coder-7B-Instruct", "/runs/x/step-30", {0, 1, 255},
                        R"({"r": 16, "lora_alpha": 32})"};
  check(u);
  BOOST_CHECK_EQUAL(round_trip(u).adapter_bytes.back(), 255);
  BOOST_CHECK_EQUAL(round_trip(u).adapter_config, u.adapter_config);
  kbrl::metric_record m{3, "train/loss", 0.25, 1700000000000, "head/learner", {}};
  check(m);
  check(std::vector<kbrl::metric_record>{m, m});
  check(kbrl::metric_record{3, "hist/reward", 2, 1700000000000, "head/coordinator", {0.5, -1}});
  check(std::vector<kbrl::trajectory>{t});
  check(kbrl::retrieved_example{"k1", "ref", "kernel", kbrl::kernel_backend::cuda, 0.9, 1.7});
  check(std::vector<kbrl::retrieved_example>{{"k1", "", "", kbrl::kernel_backend::hip, 0, 0}});
}

BOOST_AUTO_TEST_CASE(node_and_status_round_trip) {
  kbrl::actor_status st{"gpu1/evaluator.0", "evaluator", "gpu1", "restarting",
                        kbrl::actor_health::starting, 3, 120, 2, "worker died: SIGSEGV",
                        1700000000000, {{"queue", "3"}}, {"restart"}};
  check(st);
  BOOST_CHECK(round_trip(st).health == kbrl::actor_health::starting);
  check(kbrl::status_detail{"k", "v"});
  check(std::vector<kbrl::actor_status>{st});
  auto info = sample_node_info(*sys);
  check(info);
  kbrl::node_record rec{info, kbrl::node_state::down, 1, 2, 3, 2, "no heartbeat for 5.0 s"};
  check(rec);
  kbrl::membership_view view{"c", "head", 4, {rec, rec}};
  check(view);
  BOOST_CHECK(round_trip(view).nodes[1].state == kbrl::node_state::down);
  kbrl::node_status ns{info, 123, {st}};
  check(ns);
  check(std::vector<std::string>{"a", "b"});
  check(std::vector<uint8_t>{1, 2});
}

BOOST_AUTO_TEST_CASE(typed_handles_round_trip) {
  // Invalid handles still exercise the registered type names of every interface.
  check(kbrl::status_actor{});
  check(kbrl::actor_host_actor{});
  check(kbrl::membership_listener_actor{});
  check(kbrl::policy_listener_actor{});
  check(kbrl::membership_actor{});
  check(kbrl::node_actor{});
  check(kbrl::sampler_actor{});
  check(kbrl::evaluator_actor{});
  check(kbrl::evaluator_supervisor_actor{});
  check(kbrl::builder_actor{});
  check(kbrl::build_service_actor{});
  check(kbrl::learner_actor{});
  check(kbrl::coordinator_actor{});
  check(kbrl::episode_actor{});
  check(kbrl::retriever_actor{});
  check(kbrl::metrics_actor{});
}

BOOST_AUTO_TEST_CASE(unregistered_type_fails_to_serialise) {
  // The failure the round trips above guard against: a system without kbrl's block cannot
  // carry kbrl::problem (CAF logs the error and writes a message that does not come back).
  caf::actor_system_config bare_cfg;
  caf::actor_system bare{bare_cfg};
  std::vector<char> buf;
  caf::binary_serializer sink{bare, buf};
  auto msg = caf::make_message(sample_problem());
  auto write_err = sink(msg);
  caf::binary_deserializer source{bare, buf};
  caf::message copy;
  auto read_err = source(copy);
  BOOST_CHECK(write_err || read_err || !copy.match_elements<kbrl::problem>());
}

BOOST_AUTO_TEST_CASE(errors_render_for_people) {
  auto err = kbrl::make_error(kbrl::errc::invalid_config, "cluster.toml:3: cluster.name: expected a string");
  BOOST_CHECK_EQUAL(kbrl::describe(err),
                    "invalid_config: cluster.toml:3: cluster.name: expected a string");
  caf::error none;
  BOOST_CHECK_EQUAL(kbrl::describe(none), "no error");
  BOOST_CHECK_EQUAL(sys->render(err),
                    "invalid_config: cluster.toml:3: cluster.name: expected a string");
}

BOOST_AUTO_TEST_SUITE_END()
