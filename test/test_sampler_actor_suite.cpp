// The sampler actor: requests in, completions out, through a real backend. The remote backend
// talks to test/data/remote/fake_openai_server.py, a real process on loopback sockets whose
// "generation" is predictable: token k = (sum(prompt ids) + 7 * seed + offset + k) % 100, with
// offset 50 when the request names a LoRA adapter.

#include "actors/sampler.hpp"
#include "messages/status_details.hpp"
#include "messages/type_ids.hpp"
#include "cluster_fixture.hpp"
#include "model_fixture.hpp"
#include "runtime/model/generation_engine.hpp"
#include "runtime/model/lora_adapter.hpp"
#include "helper_process.hpp"
#include "test_support.hpp"

#include <caf/all.hpp>
#include <curl/curl.h>

#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

using namespace kbrl;
using namespace std::chrono_literals;

namespace {

/// The fake OpenAI server as a child process; its ports are read from its first stdout line.
class fake_openai_server {
public:
  fake_openai_server()
    : process_({"/usr/bin/python3", std::string(KBRL_TEST_DATA) + "/remote/fake_openai_server.py"}) {
    const auto& line = process_.first_line();
    port_ = number_after(line, "\"port\":");
    control_port_ = number_after(line, "\"control_port\":");
    BOOST_REQUIRE_MESSAGE(port_ > 0 && control_port_ > 0, "fake server said: " << line);
  }

  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  /// Every generation takes `seconds` from now on.
  void delay(double seconds) const {
    auto url = "http://127.0.0.1:" + std::to_string(control_port_) + "/settings";
    auto body = "{\"delay_s\": " + std::to_string(seconds) + "}";
    CURL* curl = curl_easy_init();
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, +[](char*, size_t n, size_t m, void*) { return n * m; });
    BOOST_REQUIRE(curl_easy_perform(curl) == CURLE_OK);
    curl_easy_cleanup(curl);
  }

  /// How many LoRA adapters the server was asked to load so far.
  int lora_loads() const {
    auto url = "http://127.0.0.1:" + std::to_string(control_port_) + "/stats";
    std::string body;
    CURL* curl = curl_easy_init();
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION,
                     +[](char* data, size_t n, size_t m, void* out) {
                       static_cast<std::string*>(out)->append(data, n * m);
                       return n * m;
                     });
    BOOST_REQUIRE(curl_easy_perform(curl) == CURLE_OK);
    curl_easy_cleanup(curl);
    return number_after(body, "\"/v1/load_lora_adapter\": ");
  }

private:
  static int number_after(const std::string& text, const std::string& key) {
    auto at = text.find(key);
    return at == std::string::npos ? 0 : std::atoi(text.c_str() + at + key.size());
  }
  test::helper_process process_;
  int port_ = 0, control_port_ = 0;
};

struct sampler_fixture {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  fake_openai_server server;

  sampler_fixture() {
    register_message_types(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
  }

  sampling::sampler_settings remote_settings() const {
    sampling::sampler_settings s;
    s.backend = "remote";
    s.remote.base_url = server.base_url();
    s.remote.model = "fake-model";
    return s;
  }

  sampler_actor spawn(sampling::sampler_settings s) {
    actor_stats stats;
    stats.name = "test/sampler.0";
    stats.role = "sampler";
    stats.node = "test";
    return sys->spawn<caf::detached>(sampler, stats, std::move(s));
  }
};

generation_request prompt(uint64_t id, std::vector<int32_t> tokens, int32_t max_new = 4) {
  generation_request r;
  r.id = id;
  r.prompt_tokens = std::move(tokens);
  r.params.max_new_tokens = max_new;
  r.params.seed = 0;
  return r;
}

caf::expected<generation_result> generate(caf::scoped_actor& self, const sampler_actor& s,
                                          const generation_request& req) {
  caf::expected<generation_result> out{caf::error{}};
  self->request(s, 20s, generate_atom::value, req)
    .receive([&](generation_result& r) { out = std::move(r); },
             [&](caf::error& e) { out = std::move(e); });
  return out;
}

std::string status_detail_of(const actor_status& st, const std::string& key) {
  return detail_of(st, key, "(no " + key + ")");
}

actor_status status_of(caf::scoped_actor& self, const sampler_actor& s) {
  actor_status out;
  self->request(s, 10s, status_atom::value).receive([&](actor_status& st) { out = st; },
                                                    [&](caf::error&) {});
  return out;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(sampler_actor_suite, sampler_fixture)

BOOST_AUTO_TEST_CASE(a_remote_backend_answers_with_the_requesters_id_and_the_samplers_name) {
  auto s = spawn(remote_settings());
  caf::scoped_actor self{*sys};
  auto res = generate(self, s, prompt(77, {10, 20}));
  BOOST_REQUIRE_MESSAGE(res, test::why(res));
  BOOST_CHECK_EQUAL(res->id, 77u);
  BOOST_CHECK_EQUAL(res->sampler, "test/sampler.0");
  BOOST_CHECK(res->completion_tokens == (std::vector<int32_t>{30, 31, 32, 33}));
  BOOST_CHECK_EQUAL(res->logprobs.size(), 4u);
  BOOST_CHECK(res->finish == finish_reason::length);
  auto st = status_of(self, s);
  BOOST_CHECK_EQUAL(st.state, "idle");
  BOOST_CHECK_EQUAL(status_detail_of(st, "backend"), "remote");
  BOOST_CHECK_EQUAL(status_detail_of(st, "completions"), "1");
  BOOST_CHECK_EQUAL(status_detail_of(st, "queue"), "0 / 1024");
  self->send_exit(s, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(a_full_queue_answers_busy_and_the_held_requests_still_finish) {
  auto settings = remote_settings();
  settings.queue_capacity = 2;
  server.delay(0.5);
  auto s = spawn(settings);
  caf::scoped_actor self{*sys};
  // Three requests at once, each from its own thread: two are held, the third is refused.
  std::vector<caf::expected<generation_result>> answers(3, caf::error{});
  std::vector<std::thread> clients;
  for (size_t i = 0; i < 3; ++i)
    clients.emplace_back([&, i] {
      caf::scoped_actor client{*sys};
      answers[i] = generate(client, s, prompt(i + 1, {static_cast<int32_t>(i + 1)}));
    });
  for (auto& t : clients)
    t.join();
  BOOST_REQUIRE_EQUAL(answers.size(), 3u);
  size_t busy = 0, done = 0;
  for (auto& a : answers) {
    if (a)
      ++done;
    else if (describe(a.error()).find("busy") != std::string::npos)
      ++busy;
  }
  BOOST_CHECK_EQUAL(done, 2u);
  BOOST_CHECK_EQUAL(busy, 1u);
  BOOST_CHECK_EQUAL(status_detail_of(status_of(self, s), "refused busy"), "1");
  self->send_exit(s, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(a_policy_update_loads_the_adapter_on_the_server_and_later_requests_use_it) {
  test::temp_dir dir;
  dir.write("v3/adapter_config.json", "{\"r\": 8, \"lora_alpha\": 16}");
  auto s = spawn(remote_settings());
  caf::scoped_actor self{*sys};
  policy_update update;
  update.version = 3;
  update.adapter_dir = dir / "v3";
  self->send(s, policy_atom::value, update);
  auto res = generate(self, s, prompt(5, {10, 20}, 2));
  BOOST_REQUIRE_MESSAGE(res, test::why(res));
  BOOST_CHECK(res->completion_tokens == (std::vector<int32_t>{80, 81})); // offset 50: an adapter
  BOOST_CHECK_EQUAL(res->policy_version, 3u);
  BOOST_CHECK_EQUAL(status_detail_of(status_of(self, s), "policy version"), "3");
  // The same update again (an RL run sends it from the learner and from the coordinator) is
  // not loaded a second time.
  BOOST_CHECK_EQUAL(server.lora_loads(), 1);
  self->send(s, policy_atom::value, update);
  BOOST_CHECK_EQUAL(status_detail_of(status_of(self, s), "policy version"), "3");
  BOOST_CHECK_EQUAL(server.lora_loads(), 1);
  // A request for version 5 or newer waits for that update, then runs on it.
  std::vector<int32_t> waited;
  std::thread client([&] {
    caf::scoped_actor c{*sys};
    auto req = prompt(6, {10, 20}, 2);
    req.min_policy_version = 5;
    auto r = generate(c, s, req);
    if (r)
      waited = r->completion_tokens;
  });
  BOOST_CHECK(test::eventually(
    [&] { return status_detail_of(status_of(self, s), "waiting for a newer policy") == "1"; },
    10s));
  dir.write("v5/adapter_config.json", "{\"r\": 8, \"lora_alpha\": 16}");
  update.version = 5;
  update.adapter_dir = dir / "v5";
  self->send(s, policy_atom::value, update);
  client.join();
  BOOST_CHECK(waited == (std::vector<int32_t>{80, 81}));
  // An update the server cannot load leaves the sampler on version 5 and says why.
  update.version = 6;
  update.adapter_dir = dir / "missing";
  self->send(s, policy_atom::value, update);
  auto st = status_of(self, s);
  BOOST_CHECK_EQUAL(status_detail_of(st, "policy version"), "5");
  BOOST_CHECK_MESSAGE(st.last_error.find("policy version 6 not applied") != std::string::npos,
                      st.last_error);
  self->send_exit(s, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(a_sampler_without_a_backend_says_which_setting_is_wrong) {
  caf::scoped_actor self{*sys};
  auto settings = remote_settings();
  settings.remote.base_url.clear();
  auto remote = spawn(settings);
  auto st = status_of(self, remote);
  BOOST_CHECK_EQUAL(st.state, "failed");
  BOOST_CHECK_MESSAGE(status_detail_of(st, "error").find("sampler.remote_url") != std::string::npos,
                      status_detail_of(st, "error"));
  auto res = generate(self, remote, prompt(1, {1}));
  BOOST_REQUIRE(!res);
  BOOST_CHECK_MESSAGE(describe(res.error()).find("sampler.remote_url") != std::string::npos,
                      describe(res.error()));

  sampling::sampler_settings builtin; // no model given
  auto local = spawn(builtin);
  auto why = status_detail_of(status_of(self, local), "error");
  BOOST_CHECK_MESSAGE(why.find("sampler.model") != std::string::npos, why);
  self->send_exit(remote, caf::exit_reason::user_shutdown);
  self->send_exit(local, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(the_builtin_backend_samples_as_the_engine_does_and_swaps_adapters) {
  // A tiny random Qwen2 with a byte tokenizer, the way a user's model directory looks.
  test::temp_dir dir;
  auto config = model::tiny_model_config("qwen2");
  auto model_dir = dir / "model";
  BOOST_REQUIRE(model::write_random_checkpoint(model_dir, config, 11));
  dir.write("model/tokenizer.json", test::byte_tokenizer_json());
  model::lora_config lc;
  lc.r = 4;
  lc.lora_alpha = 8;
  lc.target_modules = {"q_proj", "v_proj", "down_proj"};
  auto adapter = model::random_lora_adapter(config, lc, 5, 0.2);
  BOOST_REQUIRE(model::write_lora_adapter(dir / "adapter-v1", adapter));

  generation_request req = prompt(41, {5, 6, 7, 8}, 12);
  req.params.temperature = 0; // greedy: the same tokens however the batch is made up

  // What the engine itself gives, without and with the adapter.
  auto reference = model::transformer::load(model_dir);
  BOOST_REQUIRE(reference);
  auto engine = model::generation_engine::create(*reference, test::byte_tokenizer());
  BOOST_REQUIRE(engine);
  auto base_tokens = engine->generate({req}).front().completion_tokens;
  BOOST_REQUIRE(engine->set_adapter(&adapter, 1));
  auto adapted_tokens = engine->generate({req}).front().completion_tokens;

  sampling::sampler_settings settings;
  settings.model = model_dir;
  settings.dtype = "fp32";
  settings.slots = 4;
  settings.max_seq_len = 64;
  auto s = spawn(settings);
  caf::scoped_actor self{*sys};
  auto res = generate(self, s, req);
  BOOST_REQUIRE_MESSAGE(res, test::why(res));
  BOOST_CHECK_EQUAL(res->id, 41u);
  BOOST_CHECK(res->completion_tokens == base_tokens);
  BOOST_CHECK_EQUAL(res->policy_version, 0u);
  BOOST_CHECK_EQUAL(res->logprobs.size(), res->completion_tokens.size());

  policy_update update;
  update.version = 1;
  update.adapter_dir = dir / "adapter-v1";
  self->send(s, policy_atom::value, update);
  auto after = generate(self, s, req);
  BOOST_REQUIRE_MESSAGE(after, test::why(after));
  BOOST_CHECK_EQUAL(after->policy_version, 1u);
  BOOST_CHECK(after->completion_tokens == adapted_tokens);
  // The same adapter sent as bytes, as a learner on another node does.
  auto slurp = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  auto weights = test::read_file(dir / "adapter-v1/adapter_model.safetensors");
  update.version = 2;
  update.adapter_dir = "/nonexistent/on/this/node";
  update.adapter_bytes.assign(weights.begin(), weights.end());
  update.adapter_config = test::read_file(dir / "adapter-v1/adapter_config.json");
  self->send(s, policy_atom::value, update);
  auto by_bytes = generate(self, s, req);
  BOOST_REQUIRE_MESSAGE(by_bytes, test::why(by_bytes));
  BOOST_CHECK_EQUAL(by_bytes->policy_version, 2u);
  BOOST_CHECK(by_bytes->completion_tokens == adapted_tokens);
  auto st = status_of(self, s);
  BOOST_CHECK_EQUAL(status_detail_of(st, "backend"), "builtin");
  BOOST_CHECK_EQUAL(status_detail_of(st, "policy version"), "2");
  // The engine thread updates its occupancy after the step that delivered the answer.
  BOOST_CHECK(test::eventually(
    [&] { return status_detail_of(status_of(self, s), "batch occupancy") == "0 / 4"; }, 10s));
  self->send_exit(s, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_SUITE_END()
