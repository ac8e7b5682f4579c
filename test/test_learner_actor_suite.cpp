// The learner actor on a tiny random model: trains on trajectory batches, publishes each version
// (adapter directory and bytes) to subscribers, refuses stale data, checkpoints and resumes, says
// why when it has no model, and a built-in sampler subscribed to it samples from the new version.
// (Suite name ends in _suite: kbrl::learner_actor is a type.)

#include "actors/learner.hpp"
#include "messages/status_details.hpp"
#include "actors/sampler.hpp"
#include "messages/type_ids.hpp"
#include "model_fixture.hpp"
#include "runtime/io/file_io.hpp"
#include "runtime/model/lora_adapter.hpp"
#include "test_support.hpp"

#include <caf/all.hpp>

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <filesystem>
#include <string>

using namespace kbrl;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

struct learner_fixture {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  test::temp_dir dir;
  std::string model_dir;

  learner_fixture() {
    register_message_types(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
    model_dir = dir / "model";
    BOOST_REQUIRE(model::write_random_checkpoint(model_dir, model::tiny_model_config("qwen2"),
                                                 /*seed=*/11));
    dir.write("model/tokenizer.json", test::byte_tokenizer_json());
  }

  train::learner_settings settings() const {
    train::learner_settings s;
    s.model = model_dir;
    s.dtype = "fp32";
    s.run_dir = dir / "run";
    s.trainer.lora_r = 4;
    s.trainer.lora_alpha = 8;
    s.trainer.adamw.lr = 1e-2;
    s.max_staleness = 1;
    s.checkpoint_every = 2;
    return s;
  }

  learner_actor spawn(train::learner_settings s) {
    actor_stats stats;
    stats.name = "test/learner";
    stats.role = "learner";
    stats.node = "test";
    return sys->spawn<caf::detached>(learner, stats, std::move(s), metrics_actor{});
  }
};

/// A group of trajectories sampled by `version`, one per score.
trajectory_batch batch_of(uint64_t id, uint64_t version, std::vector<double> scores) {
  trajectory_batch b;
  b.id = id;
  b.coordinator_step = id;
  for (std::size_t i = 0; i < scores.size(); ++i) {
    trajectory t;
    t.id = id * 100 + i;
    t.group_id = id;
    turn u;
    u.prompt_tokens = {5, 6, 7, static_cast<int32_t>(i)};
    u.completion_tokens = {static_cast<int32_t>(20 + i), 30, static_cast<int32_t>(40 + 3 * i)};
    u.logprobs = {-5.5f, -5.6f, -5.4f};
    u.score = scores[i];
    u.policy_version = version;
    t.turns.push_back(u);
    b.trajectories.push_back(t);
  }
  return b;
}

caf::expected<policy_update> train_on(caf::scoped_actor& self, const learner_actor& l,
                                   const trajectory_batch& b) {
  caf::expected<policy_update> out{caf::error{}};
  self->request(l, 60s, train_atom::value, b)
    .receive([&](policy_update& u) { out = std::move(u); },
             [&](caf::error& e) { out = std::move(e); });
  return out;
}

template <class Handle>
actor_status status_of(caf::scoped_actor& self, const Handle& h) {
  actor_status out;
  self->request(h, 60s, status_atom::value)
    .receive([&](actor_status& st) { out = st; }, [&](caf::error&) {});
  return out;
}

std::string detail_or_none(const actor_status& st, const std::string& key) {
  return kbrl::detail_of(st, key, "(no " + key + ")");
}

/// The next policy update sent to `self` (a subscriber), or version max on timeout.
policy_update next_update(caf::scoped_actor& self) {
  policy_update out;
  out.version = ~uint64_t{0};
  self->receive([&](policy_atom, policy_update& u) { out = std::move(u); },
                caf::after(60s) >> [] {});
  return out;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(learner_actor_suite, learner_fixture)

BOOST_AUTO_TEST_CASE(trains_publishes_refuses_stale_data_and_resumes) {
  auto l = spawn(settings());
  caf::scoped_actor self{*sys};
  self->send(l, subscribe_atom::value, caf::actor_cast<policy_listener_actor>(self));
  auto v0 = next_update(self);
  BOOST_REQUIRE_EQUAL(v0.version, 0u);
  BOOST_CHECK(fs::exists(fs::path(v0.adapter_dir) / model::lora_config_name));
  BOOST_CHECK_EQUAL(v0.base_model, model_dir);

  auto v1 = train_on(self, l, batch_of(1, 0, {1, 0, 0, 1}));
  BOOST_REQUIRE_MESSAGE(v1, test::why(v1));
  BOOST_CHECK_EQUAL(v1->version, 1u);
  BOOST_CHECK_EQUAL(v1->learner_step, 1u);
  // Subscribers get it too; the bytes are the adapter file, and the directory loads.
  auto pushed = next_update(self);
  BOOST_CHECK_EQUAL(pushed.version, 1u);
  auto bytes = io::read_text_file(fs::path(v1->adapter_dir) / model::lora_weights_name);
  BOOST_REQUIRE(bytes);
  BOOST_CHECK(std::string(v1->adapter_bytes.begin(), v1->adapter_bytes.end()) == *bytes);
  auto config = model::parse_lora_config(v1->adapter_config, "update");
  BOOST_REQUIRE_MESSAGE(config, test::why(config));
  BOOST_CHECK_EQUAL(config->r, 4);
  BOOST_CHECK_EQUAL(config->lora_alpha, 8.0);
  // The adapter names its base, so AutoPeftModelForCausalLM.from_pretrained(dir) finds it.
  BOOST_CHECK_EQUAL(config->base_model_name_or_path, model_dir);
  auto adapter = model::load_lora_adapter(v1->adapter_dir, model::tiny_model_config("qwen2"),
                                          at::TensorOptions().dtype(at::kFloat));
  BOOST_REQUIRE_MESSAGE(adapter, test::why(adapter));
  double b_norm = 0;
  for (auto& [name, f] : adapter->modules)
    b_norm += f.b.abs().sum().item<double>();
  BOOST_CHECK_GT(b_norm, 0); // the step moved B away from zero

  // Version 0 data is one version old now: still within max_staleness = 1.
  auto v2 = train_on(self, l, batch_of(2, 0, {0, 1, 1, 0}));
  BOOST_REQUIRE_MESSAGE(v2, test::why(v2));
  BOOST_CHECK_EQUAL(v2->version, 2u);
  BOOST_CHECK_EQUAL(next_update(self).version, 2u);
  BOOST_CHECK(fs::exists(dir / "run/learner/checkpoints/step-000002/trainer_state.json"));

  // Two versions old: refused, nothing changes.
  auto stale = train_on(self, l, batch_of(3, 0, {0, 1}));
  BOOST_REQUIRE(!stale);
  BOOST_CHECK_EQUAL(stale.error().code(), static_cast<uint8_t>(errc::invalid_argument));
  BOOST_CHECK_MESSAGE(test::why(stale).find("2 versions behind") != std::string::npos,
                      test::why(stale));
  // From the future: refused.
  auto future = train_on(self, l, batch_of(4, 9, {0, 1}));
  BOOST_REQUIRE(!future);
  BOOST_CHECK_NE(test::why(future).find("newer than the learner's 2"), std::string::npos);

  // Equal rewards carry no signal: no step, the current version again.
  auto flat = train_on(self, l, batch_of(5, 2, {1, 1, 1}));
  BOOST_REQUIRE_MESSAGE(flat, test::why(flat));
  BOOST_CHECK_EQUAL(flat->version, 2u);

  auto st = status_of(self, l);
  BOOST_CHECK_EQUAL(st.state, "idle");
  BOOST_CHECK_EQUAL(detail_or_none(st, "policy version"), "2");
  BOOST_CHECK_EQUAL(detail_or_none(st, "step"), "2");
  BOOST_CHECK_EQUAL(detail_or_none(st, "batches refused"), "2");
  BOOST_CHECK_EQUAL(detail_or_none(st, "batches without signal"), "1");
  BOOST_CHECK_EQUAL(detail_or_none(st, "groups dropped (equal rewards)"), "1");
  BOOST_CHECK_EQUAL(detail_or_none(st, "turns trained by sampling version"), "v0: 8");
  BOOST_CHECK_EQUAL(detail_or_none(st, "subscribers"), "1");
  for (auto key : {"loss", "gradient norm", "learning rate", "tokens per second",
                   "memory: resident", "memory: trainer state"})
    BOOST_CHECK_MESSAGE(detail_or_none(st, key).rfind("(no ", 0) != 0, "status lacks " << key);
  BOOST_CHECK(st.commands == std::vector<std::string>{"checkpoint"});

  std::string answer;
  self->request(l, 60s, control_atom::value, std::string("checkpoint"), std::vector<std::string>{})
    .receive([&](std::string& s) { answer = s; }, [&](caf::error& e) { answer = describe(e); });
  BOOST_CHECK_MESSAGE(answer.find("wrote checkpoint") != std::string::npos, answer);

  policy_update latest;
  self->request(l, 60s, policy_atom::value)
    .receive([&](policy_update& u) { latest = u; }, [&](caf::error&) {});
  BOOST_CHECK_EQUAL(latest.version, 2u);

  self->send_exit(l, caf::exit_reason::user_shutdown);
  self->wait_for(l);

  // A new learner on the same run directory resumes at version 2 and trains on from there.
  auto again = spawn(settings());
  auto resumed = status_of(self, again);
  BOOST_CHECK_EQUAL(detail_or_none(resumed, "policy version"), "2");
  BOOST_CHECK_MESSAGE(detail_or_none(resumed, "resumed from").find("step-000002") != std::string::npos,
                      detail_or_none(resumed, "resumed from"));
  auto v3 = train_on(self, again, batch_of(6, 2, {0, 0, 1}));
  BOOST_REQUIRE_MESSAGE(v3, test::why(v3));
  BOOST_CHECK_EQUAL(v3->version, 3u);
  self->send_exit(again, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(a_learner_without_a_model_says_why) {
  auto s = settings();
  s.model.clear();
  auto l = spawn(s);
  caf::scoped_actor self{*sys};
  auto st = status_of(self, l);
  BOOST_CHECK_EQUAL(st.state, "failed");
  BOOST_CHECK_MESSAGE(detail_or_none(st, "error").find("learner.model") != std::string::npos,
                      detail_or_none(st, "error"));
  auto refused = train_on(self, l, batch_of(1, 0, {0, 1}));
  BOOST_REQUIRE(!refused);
  BOOST_CHECK_EQUAL(refused.error().code(), static_cast<uint8_t>(errc::not_supported));
  self->send_exit(l, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(a_subscribed_builtin_sampler_samples_from_the_new_version) {
  sampling::sampler_settings ss;
  ss.backend = "builtin";
  ss.model = model_dir;
  ss.dtype = "fp32";
  ss.slots = 2;
  ss.max_seq_len = 64;
  actor_stats stats;
  stats.name = "test/sampler.0";
  stats.role = "sampler";
  auto sampler_handle = sys->spawn<caf::detached>(sampler, stats, ss);
  auto l = spawn(settings());
  caf::scoped_actor self{*sys};
  self->send(l, subscribe_atom::value, caf::actor_cast<policy_listener_actor>(sampler_handle));
  auto v1 = train_on(self, l, batch_of(1, 0, {1, 0, 0, 1}));
  BOOST_REQUIRE_MESSAGE(v1, test::why(v1));
  // The update was sent before the answer, so the sampler has it before this request.
  generation_request req;
  req.id = 1;
  req.prompt_tokens = {5, 6, 7};
  req.params.max_new_tokens = 2;
  generation_result res;
  self->request(sampler_handle, 60s, generate_atom::value, req)
    .receive([&](generation_result& r) { res = r; }, [&](caf::error& e) {
      BOOST_FAIL("generation failed: " << describe(e));
    });
  BOOST_CHECK_EQUAL(res.policy_version, 1u);
  BOOST_CHECK_EQUAL(detail_or_none(status_of(self, sampler_handle), "policy version"), "1");
  self->send_exit(l, caf::exit_reason::user_shutdown);
  self->send_exit(sampler_handle, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_SUITE_END()
