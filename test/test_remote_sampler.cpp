// Over 800 lines: every misbehaviour of the fake server gets a case; they share one fixture.
// The remote sampler: an OpenAI-compatible client (vLLM, SGLang, llama.cpp server). Reply forms
// are read from fixtures; everything on the wire is tested against a fake server
// (test/data/remote/fake_openai_server.py) run as a real process on loopback sockets, which
// "generates" predictable tokens and misbehaves on command: slow replies, truncated JSON, 5xx
// and 429 bursts, refused requests, dropped connections. It counts the TCP connections it
// accepted and the most requests it served at once, so connection reuse and the concurrency
// limit are measured, not assumed.

#include "runtime/remote/http_client.hpp"
#include "runtime/io/elapsed.hpp"
#include "runtime/remote/openai_protocol.hpp"
#include "runtime/remote/remote_options.hpp"
#include "runtime/remote/remote_sampler.hpp"
#include "runtime/remote/retry_policy.hpp"
#include "messages/error_codes.hpp"
#include "helper_process.hpp"
#include "test_support.hpp"

#include <curl/curl.h>
#include <simdjson.h>

#include <boost/test/unit_test.hpp>

#include <arpa/inet.h>
#include <atomic>
#include <chrono>
#include <cmath>
#include <ctime>
#include <condition_variable>
#include <fcntl.h>
#include <fstream>
#include <future>
#include <mutex>
#include <netinet/in.h>
#include <numeric>
#include <signal.h>
#include <sstream>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

using namespace kbrl;
using namespace std::chrono_literals;
// Named one by one: the suite's namespace is called remote_sampler, like the class.
using kbrl::remote::body_excerpt;
using kbrl::remote::build_request_body;
using kbrl::remote::map_finish_reason;
using kbrl::remote::normalized_base_url;
using kbrl::remote::parse_generation_reply;
using kbrl::remote::parse_model_list;
using kbrl::remote::parse_remote_api;
using kbrl::remote::parse_retry_after;
using kbrl::remote::parse_token_id;
using kbrl::remote::remote_api;
using kbrl::remote::remote_sampler_options;
using kbrl::remote::reply_context;
using kbrl::remote::request_shape;
using kbrl::remote::resolved_api_key;
using kbrl::remote::retry_delay_s;
using kbrl::remote::retry_options;
using kbrl::remote::retryable_status;
using kbrl::remote::server_error_message;
using kbrl::remote::backoff_delay_s;
using sampler_type = kbrl::remote::remote_sampler;
using sampler_results = kbrl::remote::remote_sampler::results;
using kbrl::test::read_file_bytes;
using kbrl::test::contains;

namespace {

const std::string data_dir = std::string(KBRL_TEST_DATA) + "/remote";

/// Checks that `err` has `code` and its text contains every one of `parts`.
void check_error(const caf::error& err, errc code, std::initializer_list<std::string> parts) {
  const std::string text = describe(err);
  BOOST_CHECK_MESSAGE(has_code(err, code), "expected " << to_string(code) << ", got: " << text);
  for (const auto& part : parts)
    BOOST_CHECK_MESSAGE(contains(text, part), "\"" << part << "\" missing from: " << text);
}

/// "[1, 2, 3]" for a check's message (Boost.Test cannot print vectors).
template <class T>
std::string show(const std::vector<T>& xs) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < xs.size(); ++i)
    out << (i ? ", " : "") << xs[i];
  out << "]";
  return out.str();
}

/// Checks that two vectors are equal, printing both when they are not.
#define CHECK_SAME(a, b)                                                                          \
  do {                                                                                            \
    const auto& lhs_ = (a);                                                                       \
    const auto& rhs_ = (b);                                                                       \
    BOOST_CHECK_MESSAGE(lhs_ == rhs_, #a " is " << show(lhs_) << ", expected " << show(rhs_));    \
  } while (false)

// -- the fake server's generator, as its docstring defines it --------------------------------

constexpr int32_t fake_vocab = 100;
constexpr int32_t fake_eos = 2;

int32_t fake_base(const std::vector<int32_t>& prompt, uint64_t seed, int index, int offset = 0) {
  const int64_t sum = std::accumulate(prompt.begin(), prompt.end(), int64_t{0});
  return static_cast<int32_t>((sum + 7 * static_cast<int64_t>(seed) + 3 * index + offset)
                              % fake_vocab);
}

float fake_logprob(int32_t t) {
  return -static_cast<float>((t % 10) + 1) / 10.0f;
}

std::string fake_text(const std::vector<int32_t>& tokens) {
  std::string out;
  for (int32_t t : tokens)
    out += " w" + std::to_string(t);
  return out;
}

std::vector<int32_t> bytes_of(const std::string& text) {
  return std::vector<int32_t>(text.begin(), text.end());
}

// -- the fake server process -------------------------------------------------------------------

/// A JSON document with its parser.
struct json_doc {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  explicit json_doc(const std::string& text) {
    auto err = parser.parse(text).get(root);
    BOOST_REQUIRE_MESSAGE(!err, "not JSON: " << text);
  }
  int64_t integer(const char* key) const {
    int64_t x = -1;
    BOOST_REQUIRE_MESSAGE(!root[key].get(x), "no integer " << key);
    return x;
  }
};

/// Plain libcurl for the fake server's control port (kept apart from the code under test).
std::string http_call(const std::string& method, const std::string& url,
                      const std::string& body = "") {
  CURL* curl = curl_easy_init();
  BOOST_REQUIRE(curl != nullptr);
  std::string reply;
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 5000L);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION,
                   +[](char* data, size_t size, size_t count, void* user) {
                     static_cast<std::string*>(user)->append(data, size * count);
                     return size * count;
                   });
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &reply);
  if (method == "POST") {
    curl_easy_setopt(curl, CURLOPT_POST, 1L);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
  }
  const CURLcode rc = curl_easy_perform(curl);
  curl_easy_cleanup(curl);
  BOOST_REQUIRE_MESSAGE(rc == CURLE_OK, method << " " << url << ": " << curl_easy_strerror(rc));
  return reply;
}

class fake_server {
public:
  explicit fake_server(std::vector<std::string> flags = {}) : process_(command(flags)) {
    const auto& line = process_.first_line();
    BOOST_REQUIRE_MESSAGE(!line.empty(),
                          "the fake server did not report its ports within 10 s (or exited)");
    json_doc doc{line};
    port_ = doc.integer("port");
    control_port_ = doc.integer("control_port");
  }

  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  std::string control(const std::string& method, const std::string& path,
                      const std::string& body = "") const {
    return http_call(method, "http://127.0.0.1:" + std::to_string(control_port_) + path, body);
  }

  /// Queues faults: a JSON array of fault objects (see the server's docstring).
  void faults(const std::string& array) const {
    control("POST", "/faults", "{\"faults\": " + array + "}");
  }

  void delay(double seconds) const {
    control("POST", "/settings", "{\"delay_s\": " + std::to_string(seconds) + "}");
  }

  /// The server's statistics: connections, requests, max_concurrent, active, paths, recent.
  std::unique_ptr<json_doc> stats() const {
    return std::make_unique<json_doc>(control("GET", "/stats"));
  }

  /// The body of the last API request the server received.
  std::string last_body() const {
    auto s = stats();
    auto recent = s->root["recent"].get_array();
    BOOST_REQUIRE(!recent.error() && recent.value_unsafe().size() > 0);
    std::string_view body;
    auto arr = recent.value_unsafe();
    BOOST_REQUIRE(!arr.at(arr.size() - 1)["body"].get(body));
    return std::string{body};
  }

private:
  static std::vector<std::string> command(const std::vector<std::string>& flags) {
    std::vector<std::string> args = {"/usr/bin/python3", data_dir + "/fake_openai_server.py"};
    args.insert(args.end(), flags.begin(), flags.end());
    return args;
  }

  test::helper_process process_;
  int64_t port_ = 0;
  int64_t control_port_ = 0;
};

/// Options for a sampler of `server` with quick retries.
remote_sampler_options options_for(const fake_server& server) {
  remote_sampler_options opts;
  opts.name = "test/sampler.0";
  opts.base_url = server.base_url() + "/v1/";
  opts.model = "fake-model";
  opts.max_in_flight = 8;
  opts.connect_timeout_s = 2;
  opts.request_timeout_s = 10;
  opts.retry.initial_backoff_s = 0.01;
  opts.retry.max_backoff_s = 0.05;
  return opts;
}

std::unique_ptr<sampler_type> make_sampler(const remote_sampler_options& opts) {
  auto sampler = sampler_type::create(opts);
  BOOST_REQUIRE_MESSAGE(sampler, test::why(sampler));
  return std::move(*sampler);
}

generation_request token_request(uint64_t id, std::vector<int32_t> prompt, int32_t max_tokens,
                                 uint64_t seed = 0) {
  generation_request req;
  req.id = id;
  req.prompt_tokens = std::move(prompt);
  req.params.max_new_tokens = max_tokens;
  req.params.seed = seed;
  req.trace = "test request " + std::to_string(id);
  return req;
}

reply_context fixture_context(remote_api api = remote_api::completions) {
  reply_context ctx;
  ctx.url = "http://inference:8000/v1/completions";
  ctx.status = 200;
  ctx.api = api;
  ctx.request_id = 77;
  ctx.prompt_token_count = 5;
  ctx.policy_version = 3;
  ctx.sampler = "node-a/sampler.0";
  ctx.excerpt_bytes = 120;
  return ctx;
}

} // namespace

BOOST_AUTO_TEST_SUITE(remote_sampler)

// -- settings ----------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(options_validation_names_every_wrong_field) {
  remote_sampler_options opts;
  opts.base_url = "inference:8000";
  opts.max_in_flight = 0;
  opts.connect_timeout_s = 20;
  opts.request_timeout_s = 10;
  opts.top_logprobs = 21;
  opts.retry.max_backoff_s = 0.1;
  auto ok = kbrl::remote::validate(opts);
  BOOST_REQUIRE(!ok);
  check_error(ok.error(), errc::invalid_config,
              {"remote_sampler_options.base_url: expected \"http://host:port\"",
               "got \"inference:8000\"", "remote_sampler_options.model",
               "remote_sampler_options.max_in_flight: expected 1..4096, got 0",
               "remote_sampler_options.request_timeout_s: expected more than connect_timeout_s",
               "remote_sampler_options.top_logprobs", "retry.max_backoff_s"});
  auto created = sampler_type::create(opts);
  BOOST_CHECK(!created);

  remote_sampler_options good;
  good.base_url = "https://inference.example:8443/v1/";
  good.model = "Qwen/Qwen2.5-Coder-7B-Instruct";
  BOOST_CHECK_MESSAGE(kbrl::remote::validate(good), test::why(kbrl::remote::validate(good)));
  BOOST_CHECK_EQUAL(normalized_base_url(good.base_url), "https://inference.example:8443");
  BOOST_CHECK_EQUAL(normalized_base_url("http://h:1/"), "http://h:1");
  BOOST_CHECK_EQUAL(normalized_base_url("http://h:1/v1"), "http://h:1");
  BOOST_CHECK(parse_remote_api("chat") && *parse_remote_api("chat") == remote_api::chat);
  BOOST_CHECK(!parse_remote_api("responses"));
}

BOOST_AUTO_TEST_CASE(api_key_comes_from_the_options_or_the_environment) {
  remote_sampler_options opts;
  ::setenv("OPENAI_API_KEY", "from-env", 1);
  BOOST_CHECK_EQUAL(resolved_api_key(opts), "from-env");
  opts.api_key = "from-options";
  BOOST_CHECK_EQUAL(resolved_api_key(opts), "from-options");
  ::unsetenv("OPENAI_API_KEY");
  opts.api_key.clear();
  BOOST_CHECK_EQUAL(resolved_api_key(opts), "");
}

// -- retry arithmetic --------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(backoff_doubles_with_jitter_up_to_its_cap) {
  retry_options r;
  r.initial_backoff_s = 0.5;
  r.max_backoff_s = 3;
  // unit 1 gives the full delay, unit 0 half of it.
  BOOST_CHECK_CLOSE(backoff_delay_s(r, 1, /*unit=*/1.0), 0.5, /*tol %=*/1e-9);
  BOOST_CHECK_CLOSE(backoff_delay_s(r, 2, 1.0), 1.0, 1e-9);
  BOOST_CHECK_CLOSE(backoff_delay_s(r, 3, 1.0), 2.0, 1e-9);
  BOOST_CHECK_CLOSE(backoff_delay_s(r, 4, 1.0), 3.0, 1e-9); // capped
  BOOST_CHECK_CLOSE(backoff_delay_s(r, 1000, 1.0), 3.0, 1e-9);
  BOOST_CHECK_CLOSE(backoff_delay_s(r, 2, 0.0), 0.5, 1e-9);
  BOOST_CHECK_CLOSE(backoff_delay_s(r, 2, 0.5), 0.75, 1e-9);
  // Retry-After wins over the back-off, up to its own cap.
  r.max_retry_after_s = 10;
  BOOST_CHECK_CLOSE(retry_delay_s(r, 1, 7.0, 0.0), 7.0, 1e-9);
  BOOST_CHECK_CLOSE(retry_delay_s(r, 1, 3600.0, 0.0), 10.0, 1e-9);
  BOOST_CHECK_CLOSE(retry_delay_s(r, 1, std::nullopt, 1.0), 0.5, 1e-9);

  for (long s : {429L, 500L, 502L, 503L, 504L})
    BOOST_CHECK_MESSAGE(retryable_status(s), s);
  for (long s : {200L, 400L, 401L, 403L, 404L, 408L, 422L})
    BOOST_CHECK_MESSAGE(!retryable_status(s), s);
}

BOOST_AUTO_TEST_CASE(retry_after_reads_seconds_and_http_dates) {
  const std::time_t now = 1445412480; // Wed, 21 Oct 2015 07:28:00 GMT
  BOOST_CHECK_CLOSE(*parse_retry_after(" 120\r\n", now), 120.0, 1e-9);
  BOOST_CHECK_CLOSE(*parse_retry_after("1.5", now), 1.5, 1e-9);
  BOOST_CHECK_CLOSE(*parse_retry_after("Wed, 21 Oct 2015 07:28:30 GMT", now), 30.0, 1e-9);
  BOOST_CHECK_CLOSE(*parse_retry_after("Wed, 21 Oct 2015 07:00:00 GMT", now), 0.0, 1e-9);
  BOOST_CHECK(!parse_retry_after("", now));
  BOOST_CHECK(!parse_retry_after("soon", now));
  BOOST_CHECK(!parse_retry_after("12abc", now));
}

// -- request bodies ----------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(completion_body_carries_every_sampling_parameter) {
  generation_request req = token_request(5, {11, 12, 13}, 64, /*seed=*/0xffffffffffffffffull);
  req.prompt_text = "ignored when tokens are sent";
  req.params.temperature = 0.7;
  req.params.top_p = 0.95;
  req.params.top_k = 40;
  req.params.stop_strings = {"</code>", "\n\n"};
  req.params.stop_token_ids = {151643, 151645};
  request_shape shape;
  shape.model = "policy-v3";
  shape.n = 4;
  auto body = build_request_body(req, shape);
  BOOST_REQUIRE_MESSAGE(body, test::why(body));
  json_doc doc{*body};
  auto& j = doc.root;
  BOOST_CHECK_EQUAL(std::string_view(j["model"].get_string().value_unsafe()), "policy-v3");
  auto prompt = j["prompt"].get_array().value_unsafe();
  BOOST_REQUIRE_EQUAL(prompt.size(), 3u);
  BOOST_CHECK_EQUAL(int64_t(prompt.at(2).get_int64().value_unsafe()), 13);
  BOOST_CHECK_EQUAL(int64_t(j["max_tokens"].get_int64().value_unsafe()), 64);
  BOOST_CHECK_CLOSE(double(j["temperature"].get_double().value_unsafe()), 0.7, 1e-9);
  BOOST_CHECK_CLOSE(double(j["top_p"].get_double().value_unsafe()), 0.95, 1e-9);
  BOOST_CHECK_EQUAL(int64_t(j["top_k"].get_int64().value_unsafe()), 40);
  BOOST_CHECK_EQUAL(int64_t(j["n"].get_int64().value_unsafe()), 4);
  // vLLM takes a signed 64-bit seed: the low 63 bits are sent.
  BOOST_CHECK_EQUAL(int64_t(j["seed"].get_int64().value_unsafe()), INT64_MAX);
  BOOST_CHECK_EQUAL(int64_t(j["logprobs"].get_int64().value_unsafe()), 1);
  BOOST_CHECK_EQUAL(j["stop"].get_array().value_unsafe().size(), 2u);
  BOOST_CHECK_EQUAL(std::string_view(j["stop"].at(1).get_string().value_unsafe()), "\n\n");
  BOOST_CHECK_EQUAL(int64_t(j["stop_token_ids"].at(1).get_int64().value_unsafe()), 151645);
  BOOST_CHECK(bool(j["return_tokens_as_token_ids"].get_bool().value_unsafe()));
  BOOST_CHECK(!bool(j["stream"].get_bool().value_unsafe()));

  // Without token prompts the text goes; unset options are left out.
  generation_request plain;
  plain.prompt_text = "def relu(x):";
  shape.token_prompt = false;
  shape.request_token_ids = false;
  shape.n = 1;
  body = build_request_body(plain, shape);
  BOOST_REQUIRE_MESSAGE(body, test::why(body));
  json_doc doc2{*body};
  BOOST_CHECK_EQUAL(std::string_view(doc2.root["prompt"].get_string().value_unsafe()),
                    "def relu(x):");
  BOOST_CHECK(doc2.root["top_k"].error());
  BOOST_CHECK(doc2.root["stop"].error());
  BOOST_CHECK(doc2.root["stop_token_ids"].error());
  BOOST_CHECK(doc2.root["return_tokens_as_token_ids"].error());
}

BOOST_AUTO_TEST_CASE(chat_body_sends_the_prompt_as_one_user_message) {
  generation_request req;
  req.prompt_text = "Write a CUDA kernel for ReLU.";
  request_shape shape;
  shape.api = remote_api::chat;
  shape.model = "base";
  shape.top_logprobs = 0;
  auto body = build_request_body(req, shape);
  BOOST_REQUIRE_MESSAGE(body, test::why(body));
  json_doc doc{*body};
  auto message = doc.root["messages"].at(0);
  BOOST_CHECK_EQUAL(std::string_view(message["role"].get_string().value_unsafe()), "user");
  BOOST_CHECK_EQUAL(std::string_view(message["content"].get_string().value_unsafe()),
                    req.prompt_text);
  BOOST_CHECK(bool(doc.root["logprobs"].get_bool().value_unsafe()));
  BOOST_CHECK_EQUAL(int64_t(doc.root["top_logprobs"].get_int64().value_unsafe()), 0);
  BOOST_CHECK(doc.root["prompt"].error());
}

BOOST_AUTO_TEST_CASE(requests_that_cannot_be_sent_are_refused_before_the_wire) {
  request_shape shape;
  generation_request none;
  none.id = 9;
  none.trace = "episode 4 turn 1";
  auto body = build_request_body(none, shape);
  BOOST_REQUIRE(!body);
  check_error(body.error(), errc::invalid_argument,
              {"generation request 9 (episode 4 turn 1)", "no prompt"});

  generation_request tokens_only = token_request(10, {1, 2}, 8);
  shape.api = remote_api::chat;
  body = build_request_body(tokens_only, shape);
  BOOST_REQUIRE(!body);
  check_error(body.error(), errc::invalid_argument, {"chat endpoint needs prompt_text"});
  shape.api = remote_api::completions;
  shape.token_prompt = false;
  body = build_request_body(tokens_only, shape);
  BOOST_REQUIRE(!body);
  check_error(body.error(), errc::invalid_argument, {"only prompt_tokens"});

  shape.token_prompt = true;
  tokens_only.params.top_p = 0;
  body = build_request_body(tokens_only, shape);
  BOOST_REQUIRE(!body);
  check_error(body.error(), errc::invalid_argument, {"top_p must be in (0, 1], got 0"});
  tokens_only.params.top_p = 1;
  tokens_only.params.max_new_tokens = 0;
  body = build_request_body(tokens_only, shape);
  BOOST_REQUIRE(!body);
  check_error(body.error(), errc::invalid_argument, {"max_new_tokens must be >= 1"});
}

// -- reply forms -------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(reads_vllm_completions_with_token_ids_and_stop_reasons) {
  auto results = parse_generation_reply(read_file_bytes(data_dir + "/vllm_completion.json"),
                                        fixture_context());
  BOOST_REQUIRE_MESSAGE(results, test::why(results));
  BOOST_REQUIRE_EQUAL(results->size(), 3u);
  const auto& r0 = (*results)[0]; // sorted by index although the reply lists index 2 first
  BOOST_CHECK_EQUAL(r0.completion_text, "x = 1");
  CHECK_SAME(r0.completion_tokens, (std::vector<int32_t>{87, 284, 151643}));
  CHECK_SAME(r0.logprobs, (std::vector<float>{-0.125f, 0.0f, -3.0f})); // exact in binary
  BOOST_CHECK(r0.finish == finish_reason::stop_token); // stop_reason 151643: a stop token id
  BOOST_CHECK_EQUAL(r0.id, 77u);
  BOOST_CHECK_EQUAL(r0.policy_version, 3u);
  BOOST_CHECK_EQUAL(r0.sampler, "node-a/sampler.0");
  BOOST_CHECK_EQUAL(r0.prompt_token_count, 17); // usage wins over what was sent
  BOOST_CHECK(r0.error.empty());
  const auto& r1 = (*results)[1];
  BOOST_CHECK_EQUAL(r1.completion_text, "def f():\n");
  BOOST_CHECK(r1.finish == finish_reason::stop_string); // stop_reason "</code>"
  CHECK_SAME(r1.completion_tokens, (std::vector<int32_t>{755}));
  const auto& r2 = (*results)[2];
  BOOST_CHECK(r2.finish == finish_reason::length);
  CHECK_SAME(r2.completion_tokens, (std::vector<int32_t>{264, 293}));
  CHECK_SAME(r2.logprobs, (std::vector<float>{-0.25f, -1.5f}));
}

BOOST_AUTO_TEST_CASE(reads_plain_completions_whose_tokens_are_text) {
  const std::string body = read_file_bytes(data_dir + "/plain_completion.json");
  auto results = parse_generation_reply(body, fixture_context());
  BOOST_REQUIRE_MESSAGE(results, test::why(results));
  BOOST_REQUIRE_EQUAL(results->size(), 1u);
  const auto& r = results->front();
  BOOST_CHECK_EQUAL(r.completion_text, " Hello world");
  BOOST_CHECK(r.completion_tokens.empty()); // text tokens carry no ids
  CHECK_SAME(r.logprobs, (std::vector<float>{-0.5f, -0.75f, -0.0625f}));
  BOOST_CHECK(r.finish == finish_reason::stop_token); // no stop_reason: end of sequence
  BOOST_CHECK_EQUAL(r.prompt_token_count, 5); // no usage: what was sent

  auto ctx = fixture_context();
  ctx.require_token_ids = true;
  auto strict = parse_generation_reply(body, ctx);
  BOOST_REQUIRE(!strict);
  check_error(strict.error(), errc::io_failure,
              {"choices[0]: the sampled tokens carry no token ids", "return_tokens_as_token_ids"});
}

BOOST_AUTO_TEST_CASE(reads_chat_replies_and_the_token_ids_field) {
  auto chat = parse_generation_reply(read_file_bytes(data_dir + "/chat_token_ids.json"),
                                     fixture_context(remote_api::chat));
  BOOST_REQUIRE_MESSAGE(chat, test::why(chat));
  const auto& c = chat->front();
  BOOST_CHECK_EQUAL(c.completion_text, "```python\nimport torch");
  CHECK_SAME(c.completion_tokens, (std::vector<int32_t>{73594, 12669, 198, 474, 7834}));
  CHECK_SAME(c.logprobs, (std::vector<float>{-0.03125f, -0.25f, -1.0f, -0.5f, -0.125f}));
  BOOST_CHECK(c.finish == finish_reason::length);
  BOOST_CHECK_EQUAL(c.prompt_token_count, 42);

  auto ids = parse_generation_reply(read_file_bytes(data_dir + "/completion_token_ids_field.json"),
                                    fixture_context());
  BOOST_REQUIRE_MESSAGE(ids, test::why(ids));
  CHECK_SAME(ids->front().completion_tokens, (std::vector<int32_t>{9834, 2}));
  CHECK_SAME(ids->front().logprobs, (std::vector<float>{-0.5f, -0.25f}));
}

BOOST_AUTO_TEST_CASE(finish_reasons_map_to_kbrl_reasons) {
  BOOST_CHECK(map_finish_reason("length", 'n') == finish_reason::length);
  BOOST_CHECK(map_finish_reason("stop", 'n') == finish_reason::stop_token);
  BOOST_CHECK(map_finish_reason("stop", 'i') == finish_reason::stop_token);
  BOOST_CHECK(map_finish_reason("stop", 's') == finish_reason::stop_string);
  BOOST_CHECK(map_finish_reason("abort", 'n') == finish_reason::cancelled);
  BOOST_CHECK(map_finish_reason("content_filter", 'n') == finish_reason::error);
  auto r = parse_generation_reply(
    R"({"choices": [{"text": "", "finish_reason": "content_filter",
                     "logprobs": {"tokens": [], "token_logprobs": []}}]})",
    fixture_context());
  BOOST_REQUIRE_MESSAGE(r, test::why(r));
  BOOST_CHECK(r->front().finish == finish_reason::error);
  BOOST_CHECK(contains(r->front().error, "content_filter"));
  BOOST_CHECK_EQUAL(parse_token_id("token_id:0").value_or(-1), 0);
  BOOST_CHECK_EQUAL(parse_token_id("token_id:151643").value_or(-1), 151643);
  BOOST_CHECK(!parse_token_id("token_id:"));
  BOOST_CHECK(!parse_token_id("token_id:-3"));
  BOOST_CHECK(!parse_token_id("token_id:99999999999"));
  BOOST_CHECK(!parse_token_id(" token"));
}

BOOST_AUTO_TEST_CASE(malformed_replies_fail_with_url_status_what_and_an_excerpt) {
  const auto ctx = fixture_context();
  const std::string url = "malformed reply from http://inference:8000/v1/completions (HTTP 200)";
  struct bad_case {
    std::string body;
    std::string what;
  };
  const std::string good = read_file_bytes(data_dir + "/vllm_completion.json");
  const std::vector<bad_case> cases = {
    {good.substr(0, good.size() / 2), "the body is not valid JSON"},
    {"[1, 2]", "the body is an array, expected a JSON object"},
    {R"({"id": "x"})", "it has no \"choices\""},
    {R"({"choices": {}})", "choices is an object, expected an array"},
    {R"({"choices": []})", "choices is empty"},
    {R"({"choices": [{"text": 5, "finish_reason": "stop"}]})",
     "choices[0].text is an integer, expected a string"},
    {R"({"choices": [{"text": "a", "finish_reason": null,
                      "logprobs": {"tokens": [], "token_logprobs": []}}]})",
     "choices[0].finish_reason is missing or null"},
    {R"({"choices": [{"text": "a", "finish_reason": "stop"}]})",
     "choices[0].logprobs is missing or null"},
    {R"({"choices": [{"text": "a", "finish_reason": "stop", "stop_reason": [1],
                      "logprobs": {"tokens": [], "token_logprobs": []}}]})",
     "choices[0].stop_reason is an array"},
    {R"({"choices": [{"text": "a", "finish_reason": "stop",
                      "logprobs": {"tokens": ["token_id:1"], "token_logprobs": ["-0.5"]}}]})",
     "choices[0].logprobs.token_logprobs[0] is a string, expected a number"},
    {R"({"choices": [{"text": "a", "finish_reason": "stop",
                      "logprobs": {"tokens": ["token_id:1", "token_id:2"],
                                   "token_logprobs": [-1]}}]})",
     "choices[0].logprobs.tokens has 2 entries but token_logprobs has 1"},
    {R"({"choices": [{"text": "a", "finish_reason": "stop",
                      "logprobs": {"tokens": ["token_id:1", "b"], "token_logprobs": [-1, -2]}}]})",
     "choices[0].logprobs.tokens[1] is \"b\", not of the form \"token_id:N\""},
    {R"({"choices": [{"text": "a", "finish_reason": "stop", "index": "zero",
                      "logprobs": {"tokens": [], "token_logprobs": []}}]})",
     "choices[0].index is a string"},
  };
  for (const auto& c : cases) {
    auto r = parse_generation_reply(c.body, ctx);
    BOOST_REQUIRE_MESSAGE(!r, "accepted: " << c.body);
    const std::string text = describe(r.error());
    BOOST_CHECK_MESSAGE(has_code(r.error(), errc::io_failure), text);
    BOOST_CHECK_MESSAGE(contains(text, url), text);
    BOOST_CHECK_MESSAGE(contains(text, c.what), "\"" << c.what << "\" missing from: " << text);
    BOOST_CHECK_MESSAGE(contains(text, "body: "), text);
  }
  // The excerpt is bounded: a 100 kB body is quoted by its first 120 bytes.
  std::string huge = R"({"choices": 1, "padding": ")" + std::string(100000, 'x') + "\"}";
  auto r = parse_generation_reply(huge, ctx);
  BOOST_REQUIRE(!r);
  const std::string text = describe(r.error());
  BOOST_CHECK_LT(text.size(), 600u);
  BOOST_CHECK_MESSAGE(contains(text, "more bytes]"), text);

  // An error object in a 200 reply is the server's word, not a parse failure.
  auto e = parse_generation_reply(R"({"error": {"message": "prompt too long", "code": 400}})", ctx);
  BOOST_REQUIRE(!e);
  check_error(e.error(), errc::io_failure, {"answered with an error", "prompt too long"});

  auto models = parse_model_list(R"({"data": [{"id": "a"}, {"object": "model"}]})",
                                 "http://m/v1/models", 200, /*excerpt_bytes=*/100);
  BOOST_REQUIRE(!models);
  check_error(models.error(), errc::io_failure, {"http://m/v1/models", "data[1].id is missing"});
}

BOOST_AUTO_TEST_CASE(server_error_messages_are_found_in_every_form) {
  auto message = [](const char* body) { return server_error_message(body).value_or("(none)"); };
  BOOST_CHECK_EQUAL(message(R"({"error": {"message": "m1", "code": 400}})"), "m1");
  BOOST_CHECK_EQUAL(message(R"({"error": "Unauthorized"})"), "Unauthorized");
  BOOST_CHECK_EQUAL(message(R"({"object": "error", "message": "m3"})"), "m3");
  BOOST_CHECK_EQUAL(message(R"({"detail": "Not Found"})"), "Not Found");
  BOOST_CHECK_EQUAL(message(R"({"detail": [{"msg": "field required"}, {"msg": "bad n"}]})"),
                    "field required; bad n");
  BOOST_CHECK(!server_error_message("<html>502 Bad Gateway</html>"));
  BOOST_CHECK_EQUAL(body_excerpt("a\nb", 10), "a b");
  BOOST_CHECK_EQUAL(body_excerpt("abcdef", 3), "abc... [3 more bytes]");
}

// -- against the fake server -------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(checks_the_server_and_its_model_at_start_up) {
  fake_server server;
  auto opts = options_for(server);
  auto sampler = make_sampler(opts);
  auto ok = sampler->check_model();
  BOOST_CHECK_MESSAGE(ok, test::why(ok));
  auto models = sampler->list_models();
  BOOST_REQUIRE_MESSAGE(models, test::why(models));
  CHECK_SAME(*models, (std::vector<std::string>{"fake-model"}));

  opts.model = "Qwen/Qwen2.5-Coder-7B";
  auto wrong = make_sampler(opts);
  auto absent = wrong->check_model();
  BOOST_REQUIRE(!absent);
  check_error(absent.error(), errc::invalid_config,
              {server.base_url(), "does not serve model \"Qwen/Qwen2.5-Coder-7B\"",
               "it lists: fake-model"});
}

BOOST_AUTO_TEST_CASE(an_unreachable_server_is_named_after_the_retries) {
  // A port that was free a moment ago: connections are refused.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  BOOST_REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  BOOST_REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  ::close(fd);
  remote_sampler_options opts;
  opts.base_url = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  opts.model = "m";
  opts.retry.max_retries = 2;
  opts.retry.initial_backoff_s = 0.01;
  opts.retry.max_backoff_s = 0.02;
  auto sampler = make_sampler(opts);
  auto ok = sampler->check_model();
  BOOST_REQUIRE(!ok);
  check_error(ok.error(), errc::node_unreachable,
              {"GET " + opts.base_url + "/v1/models", "could not connect", "3 attempts"});
  auto generated = sampler->generate(token_request(1, {1}, 4));
  BOOST_REQUIRE(!generated);
  check_error(generated.error(), errc::node_unreachable,
              {"POST " + opts.base_url + "/v1/completions", "could not connect"});
  BOOST_CHECK_EQUAL(sampler->stats().http.retries, 4u);
}

BOOST_AUTO_TEST_CASE(a_server_that_never_accepts_hits_the_connect_timeout) {
  // A listener with a full accept queue: the kernel drops further SYNs, so connecting hangs.
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  BOOST_REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  BOOST_REQUIRE(::listen(listener, 0) == 0);
  BOOST_REQUIRE(::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  std::vector<int> fillers;
  for (int i = 0; i < 3; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    (void)::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    fillers.push_back(fd);
  }
  std::this_thread::sleep_for(100ms);
  remote_sampler_options opts;
  opts.base_url = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  opts.model = "m";
  opts.connect_timeout_s = 0.2;
  opts.request_timeout_s = 5;
  opts.retry.max_retries = 1;
  opts.retry.initial_backoff_s = 0.01;
  opts.retry.max_backoff_s = 0.01;
  auto sampler = make_sampler(opts);
  const auto start = std::chrono::steady_clock::now();
  auto r = sampler->generate(token_request(1, {1}, 4));
  const double waited = seconds_since(start);
  BOOST_REQUIRE(!r);
  check_error(r.error(), errc::node_unreachable,
              {"could not connect within 0.2 s", "2 attempts"});
  BOOST_CHECK_GE(waited, 0.35); // two connect timeouts, not the 5 s request timeout
  BOOST_CHECK_LT(waited, 2.0);
  for (int fd : fillers)
    ::close(fd);
  ::close(listener);
}

BOOST_AUTO_TEST_CASE(generates_from_token_prompts_with_ids_and_logprobs) {
  fake_server server;
  auto sampler = make_sampler(options_for(server));
  const std::vector<int32_t> prompt = {101, 2023, 318};
  auto req = token_request(42, prompt, 5, /*seed=*/3);
  req.params.temperature = 0.8;
  req.params.top_k = 20;
  auto results = sampler->generate(req, /*n=*/3);
  BOOST_REQUIRE_MESSAGE(results, test::why(results));
  BOOST_REQUIRE_EQUAL(results->size(), 3u);
  for (int i = 0; i < 3; ++i) {
    const auto& r = (*results)[i];
    const int32_t base = fake_base(prompt, 3, i);
    std::vector<int32_t> tokens;
    std::vector<float> logprobs;
    for (int k = 0; k < 5; ++k) {
      tokens.push_back((base + k) % fake_vocab);
      logprobs.push_back(fake_logprob(tokens.back()));
    }
    BOOST_REQUIRE_MESSAGE(std::find(tokens.begin(), tokens.end(), fake_eos) == tokens.end(),
                          "the test prompt must avoid EOS");
    CHECK_SAME(r.completion_tokens, tokens);
    CHECK_SAME(r.logprobs, logprobs);
    BOOST_CHECK_EQUAL(r.completion_text, fake_text(tokens));
    BOOST_CHECK(r.finish == finish_reason::length);
    BOOST_CHECK_EQUAL(r.id, 42u);
    BOOST_CHECK_EQUAL(r.prompt_token_count, 3);
    BOOST_CHECK_EQUAL(r.sampler, "test/sampler.0");
    BOOST_CHECK_GT(r.seconds, 0.0);
  }
  // What went on the wire.
  json_doc sent{server.last_body()};
  BOOST_CHECK_EQUAL(sent.root["prompt"].get_array().value_unsafe().size(), 3u);
  BOOST_CHECK_EQUAL(int64_t(sent.root["n"].get_int64().value_unsafe()), 3);
  BOOST_CHECK_EQUAL(int64_t(sent.root["seed"].get_int64().value_unsafe()), 3);
  BOOST_CHECK_EQUAL(int64_t(sent.root["top_k"].get_int64().value_unsafe()), 20);
  BOOST_CHECK(bool(sent.root["return_tokens_as_token_ids"].get_bool().value_unsafe()));
  auto stats = sampler->stats();
  BOOST_CHECK_EQUAL(stats.completions, 3u);
  BOOST_CHECK_EQUAL(stats.failures, 0u);
}

BOOST_AUTO_TEST_CASE(stop_tokens_stop_strings_and_end_of_sequence) {
  fake_server server;
  auto sampler = make_sampler(options_for(server));
  const std::vector<int32_t> prompt = {10, 20}; // base 30 at seed 0, choice 0
  BOOST_REQUIRE_EQUAL(fake_base(prompt, 0, 0), 30);

  auto req = token_request(1, prompt, 10);
  req.params.stop_token_ids = {33};
  auto r = sampler->generate(req);
  BOOST_REQUIRE_MESSAGE(r, test::why(r));
  BOOST_CHECK(r->front().finish == finish_reason::stop_token);
  CHECK_SAME(r->front().completion_tokens, (std::vector<int32_t>{30, 31, 32, 33}));
  BOOST_CHECK_EQUAL(r->front().completion_text, " w30 w31 w32");

  req.params.stop_token_ids.clear();
  req.params.stop_strings = {"w32"};
  r = sampler->generate(req);
  BOOST_REQUIRE_MESSAGE(r, test::why(r));
  BOOST_CHECK(r->front().finish == finish_reason::stop_string);
  BOOST_CHECK_EQUAL(r->front().completion_text, " w30 w31 ");
  BOOST_CHECK_EQUAL(r->front().completion_tokens.size(), 3u);
  json_doc sent{server.last_body()};
  BOOST_CHECK_EQUAL(std::string_view(sent.root["stop"].at(0).get_string().value_unsafe()), "w32");

  // Seed 24 moves the base to (30 + 7 * 24) % 100 = 98: 98, 99, 0, 1, then EOS (2).
  auto eos = token_request(2, prompt, 10, /*seed=*/24);
  r = sampler->generate(eos);
  BOOST_REQUIRE_MESSAGE(r, test::why(r));
  BOOST_CHECK(r->front().finish == finish_reason::stop_token);
  CHECK_SAME(r->front().completion_tokens, (std::vector<int32_t>{98, 99, 0, 1, 2}));
  BOOST_CHECK_EQUAL(r->front().completion_text, " w98 w99 w0 w1");
}

BOOST_AUTO_TEST_CASE(chat_and_text_prompts_and_plain_servers) {
  fake_server server;
  auto opts = options_for(server);
  opts.api = remote_api::chat;
  auto chat = make_sampler(opts);
  generation_request req;
  req.id = 8;
  req.prompt_text = "hi";
  req.params.max_new_tokens = 3;
  auto r = chat->generate(req);
  BOOST_REQUIRE_MESSAGE(r, test::why(r));
  const int32_t base = fake_base(bytes_of("hi"), 0, 0);
  CHECK_SAME(r->front().completion_tokens,
                    (std::vector<int32_t>{base, (base + 1) % 100, (base + 2) % 100}));
  BOOST_CHECK_EQUAL(r->front().completion_text,
                    fake_text({base, (base + 1) % 100, (base + 2) % 100}));
  BOOST_CHECK_EQUAL(r->front().prompt_token_count, 2);

  opts.api = remote_api::completions;
  opts.use_token_prompts = false;
  auto text = make_sampler(opts);
  req.prompt_tokens = {1, 2, 3}; // not sent: token prompts are off
  r = text->generate(req);
  BOOST_REQUIRE_MESSAGE(r, test::why(r));
  BOOST_CHECK_EQUAL(r->front().completion_tokens.front(), base);
  json_doc sent{server.last_body()};
  BOOST_CHECK_EQUAL(std::string_view(sent.root["prompt"].get_string().value_unsafe()), "hi");

  fake_server plain{{"--plain"}};
  auto plain_opts = options_for(plain);
  auto p = make_sampler(plain_opts);
  r = p->generate(token_request(3, {10, 20}, 4));
  BOOST_REQUIRE_MESSAGE(r, test::why(r));
  BOOST_CHECK(r->front().completion_tokens.empty());
  BOOST_CHECK_EQUAL(r->front().logprobs.size(), 4u);
  plain_opts.require_token_ids = true;
  auto strict = make_sampler(plain_opts);
  r = strict->generate(token_request(3, {10, 20}, 4));
  BOOST_REQUIRE(!r);
  check_error(r.error(), errc::io_failure, {plain.base_url(), "carry no token ids"});
}

BOOST_AUTO_TEST_CASE(a_server_that_refuses_token_prompts_gets_text) {
  fake_server server{{"--no-token-prompts"}};
  auto sampler = make_sampler(options_for(server));
  auto req = token_request(4, {104, 105}, 3);
  req.prompt_text = "hi"; // the same prompt as text ('h' = 104, 'i' = 105)
  auto r = sampler->generate(req);
  BOOST_REQUIRE_MESSAGE(r, test::why(r));
  BOOST_CHECK_EQUAL(r->front().completion_tokens.front(), fake_base({104, 105}, 0, 0));
  auto s = sampler->stats();
  BOOST_CHECK_EQUAL(s.text_fallbacks, 1u);
  BOOST_CHECK(s.token_prompts_refused);
  // Later requests go as text at once: one more request on the server, not two.
  std::promise<sampler_results> done;
  sampler->submit(req, [&](sampler_results x) { done.set_value(std::move(x)); });
  auto later = done.get_future().get();
  BOOST_REQUIRE_MESSAGE(later, test::why(later));
  BOOST_CHECK_EQUAL(server.stats()->integer("requests"), 3);
  // A request with only tokens cannot fall back: the server's refusal is the answer.
  fake_server strict{{"--no-token-prompts"}};
  auto fresh = make_sampler(options_for(strict));
  auto refused = fresh->generate(token_request(5, {1, 2}, 3));
  BOOST_REQUIRE(!refused);
  check_error(refused.error(), errc::invalid_argument,
              {"HTTP 400 after 1 attempt", "prompt must be a string"});
}

BOOST_AUTO_TEST_CASE(server_errors_are_retried_until_they_pass) {
  fake_server server;
  auto sampler = make_sampler(options_for(server));
  server.faults(R"([{"kind": "status", "status": 500}, {"kind": "status", "status": 503}])");
  auto r = sampler->generate(token_request(1, {10, 20}, 3));
  BOOST_REQUIRE_MESSAGE(r, test::why(r));
  BOOST_CHECK_EQUAL(r->front().completion_tokens.front(), 30);
  BOOST_CHECK_EQUAL(server.stats()->integer("requests"), 3);
  BOOST_CHECK_EQUAL(sampler->stats().http.retries, 2u);

  // Past the retry budget the last answer is the error.
  auto opts = options_for(server);
  opts.retry.max_retries = 1;
  auto impatient = make_sampler(opts);
  server.faults(R"([{"kind": "status", "status": 502}, {"kind": "status", "status": 502,
                     "body": "<html>bad gateway</html>"}])");
  r = impatient->generate(token_request(2, {10, 20}, 3));
  BOOST_REQUIRE(!r);
  check_error(r.error(), errc::io_failure,
              {"POST " + server.base_url() + "/v1/completions", "HTTP 502 after 2 attempts",
               "<html>bad gateway</html>"});
}

BOOST_AUTO_TEST_CASE(rate_limits_wait_as_long_as_retry_after_says) {
  fake_server server;
  auto sampler = make_sampler(options_for(server)); // back-off alone would wait <= 0.05 s
  server.faults(R"([{"kind": "status", "status": 429, "retry_after": "1"}])");
  const auto start = std::chrono::steady_clock::now();
  auto r = sampler->generate(token_request(1, {10, 20}, 3));
  const double waited = seconds_since(start);
  BOOST_REQUIRE_MESSAGE(r, test::why(r));
  BOOST_CHECK_GE(waited, 0.95);
  BOOST_CHECK_LT(waited, 5.0);
  BOOST_CHECK_EQUAL(server.stats()->integer("requests"), 2);
}

BOOST_AUTO_TEST_CASE(client_errors_are_not_retried) {
  fake_server server;
  auto sampler = make_sampler(options_for(server));
  server.faults(R"([{"kind": "status", "status": 400}])");
  auto r = sampler->generate(token_request(1, {10, 20}, 3));
  BOOST_REQUIRE(!r);
  check_error(r.error(), errc::invalid_argument,
              {"HTTP 400 after 1 attempt", "injected failure 400"});
  BOOST_CHECK_EQUAL(server.stats()->integer("requests"), 1);
  BOOST_CHECK_EQUAL(sampler->stats().failures, 1u);

  // A model the server does not have: its 404 message is quoted.
  sampler->use_model("no-such-adapter", 9);
  r = sampler->generate(token_request(2, {10, 20}, 3));
  BOOST_REQUIRE(!r);
  check_error(r.error(), errc::invalid_argument,
              {"HTTP 404", "The model `no-such-adapter` does not exist."});
  BOOST_CHECK_EQUAL(server.stats()->integer("requests"), 2);
}

BOOST_AUTO_TEST_CASE(a_slow_reply_times_out) {
  fake_server server;
  auto opts = options_for(server);
  opts.connect_timeout_s = 0.2;
  opts.request_timeout_s = 0.5;
  auto sampler = make_sampler(opts);
  server.faults(R"([{"kind": "slow", "delay_s": 3}])");
  const auto start = std::chrono::steady_clock::now();
  auto r = sampler->generate(token_request(1, {10, 20}, 3));
  const double waited = seconds_since(start);
  BOOST_REQUIRE(!r);
  check_error(r.error(), errc::timeout,
              {"POST " + server.base_url() + "/v1/completions", "no complete reply within 0.5 s",
               "1 attempt"});
  BOOST_CHECK_GE(waited, 0.45);
  BOOST_CHECK_LT(waited, 2.0); // not the server's 3 s, and not retried
  // The sampler is still usable after a timeout.
  auto again = sampler->generate(token_request(2, {10, 20}, 3));
  BOOST_CHECK_MESSAGE(again, test::why(again));
}

BOOST_AUTO_TEST_CASE(dropped_connections_are_retried_and_named_when_they_persist) {
  fake_server server;
  auto sampler = make_sampler(options_for(server));
  server.faults(R"([{"kind": "close"}, {"kind": "partial"}])");
  auto r = sampler->generate(token_request(1, {10, 20}, 3));
  BOOST_REQUIRE_MESSAGE(r, test::why(r));
  BOOST_CHECK_EQUAL(server.stats()->integer("requests"), 3);
  BOOST_CHECK_EQUAL(sampler->stats().http.retries, 2u);

  auto opts = options_for(server);
  opts.retry.max_retries = 2;
  auto impatient = make_sampler(opts);
  server.faults(R"([{"kind": "close"}, {"kind": "close"}, {"kind": "close"}])");
  r = impatient->generate(token_request(2, {10, 20}, 3));
  BOOST_REQUIRE(!r);
  check_error(r.error(), errc::io_failure,
              {"POST " + server.base_url() + "/v1/completions",
               "the server closed the connection without replying", "3 attempts"});
}

BOOST_AUTO_TEST_CASE(truncated_json_is_a_clear_error_and_not_retried) {
  fake_server server;
  auto sampler = make_sampler(options_for(server));
  server.faults(R"([{"kind": "truncate"}])");
  auto r = sampler->generate(token_request(1, {10, 20}, 3));
  BOOST_REQUIRE(!r);
  check_error(r.error(), errc::io_failure,
              {"malformed reply from " + server.base_url() + "/v1/completions (HTTP 200)",
               "not valid JSON", "body: {\"id\": \"cmpl-fake\""});
  BOOST_CHECK_EQUAL(server.stats()->integer("requests"), 1);

  server.faults(R"([{"kind": "body", "body": "{\"object\": \"text_completion\"}"}])");
  r = sampler->generate(token_request(2, {10, 20}, 3));
  BOOST_REQUIRE(!r);
  check_error(r.error(), errc::io_failure, {"it has no \"choices\""});
}

BOOST_AUTO_TEST_CASE(the_concurrency_limit_bounds_requests_on_the_wire) {
  fake_server server;
  server.delay(0.05);
  auto opts = options_for(server);
  opts.max_in_flight = 4;
  auto sampler = make_sampler(opts);
  constexpr int threads = 3, per_thread = 8;
  std::mutex mutex;
  std::condition_variable all_done;
  int answered = 0, good = 0;
  std::vector<int> calls(threads * per_thread, 0);
  std::vector<std::thread> submitters;
  for (int t = 0; t < threads; ++t)
    submitters.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        const int id = t * per_thread + i;
        sampler->submit(token_request(id, {10, id}, 2), [&, id](sampler_results r) {
          std::lock_guard<std::mutex> guard{mutex};
          ++calls[id];
          if (r && r->size() == 1 && r->front().id == static_cast<uint64_t>(id)
              && r->front().completion_tokens.front() == fake_base({10, id}, 0, 0))
            ++good;
          if (++answered == threads * per_thread)
            all_done.notify_all();
        });
      }
    });
  for (auto& t : submitters)
    t.join();
  {
    std::unique_lock<std::mutex> lock{mutex};
    BOOST_REQUIRE(all_done.wait_for(lock, 20s, [&] { return answered == threads * per_thread; }));
  }
  BOOST_CHECK_EQUAL(good, threads * per_thread);
  BOOST_CHECK(std::all_of(calls.begin(), calls.end(), [](int c) { return c == 1; }));
  auto stats = server.stats();
  const int64_t max_concurrent = stats->integer("max_concurrent");
  const int64_t connections = stats->integer("connections");
  BOOST_TEST_MESSAGE("24 requests, max_in_flight 4: server saw at most " << max_concurrent
                     << " at once over " << connections << " connections");
  BOOST_CHECK_LE(max_concurrent, 4);
  BOOST_CHECK_GE(max_concurrent, 2); // the limit is used, not just respected
  BOOST_CHECK_LE(connections, 4);    // kept-alive connections carried all 24 requests
  BOOST_CHECK_EQUAL(stats->integer("requests"), 24);
  auto own = sampler->stats();
  BOOST_CHECK_LE(own.http.max_in_flight_seen, 4u);
  BOOST_CHECK_EQUAL(own.http.connections_opened, static_cast<uint64_t>(connections));
}

BOOST_AUTO_TEST_CASE(callbacks_may_make_blocking_calls) {
  fake_server server;
  auto sampler = make_sampler(options_for(server));
  std::promise<std::string> done;
  sampler->submit(token_request(1, {10, 20}, 2), [&](sampler_results first) {
    // On the completion thread: a blocking call waits on the HTTP thread, so this cannot
    // deadlock.
    auto second = sampler->generate(token_request(2, {10, 21}, 2));
    auto models = sampler->list_models();
    done.set_value(first && second && models ? "ok"
                   : !first                  ? describe(first.error())
                   : !second                 ? describe(second.error())
                                             : describe(models.error()));
  });
  auto future = done.get_future();
  BOOST_REQUIRE(future.wait_for(10s) == std::future_status::ready);
  BOOST_CHECK_EQUAL(future.get(), "ok");
}

BOOST_AUTO_TEST_CASE(control_calls_do_not_wait_behind_generations) {
  fake_server server;
  auto opts = options_for(server);
  opts.max_in_flight = 1;
  auto sampler = make_sampler(opts);
  server.faults(R"([{"kind": "slow", "delay_s": 1.5, "path": "/v1/completions"}])");
  std::promise<sampler_results> slow, queued;
  sampler->submit(token_request(1, {10, 20}, 2),
                  [&](sampler_results r) { slow.set_value(std::move(r)); });
  sampler->submit(token_request(2, {10, 20}, 2),
                  [&](sampler_results r) { queued.set_value(std::move(r)); });
  std::this_thread::sleep_for(100ms); // the one slot is taken, the second request waits
  BOOST_CHECK_EQUAL(sampler->stats().http.waiting, 1u);
  const auto start = std::chrono::steady_clock::now();
  auto models = sampler->list_models(); // an adapter load would pass the queue the same way
  BOOST_REQUIRE_MESSAGE(models, test::why(models));
  BOOST_CHECK_LT(seconds_since(start), 1.0);
  auto first = slow.get_future().get();
  auto second = queued.get_future().get();
  BOOST_CHECK_MESSAGE(first, test::why(first));
  BOOST_CHECK_MESSAGE(second, test::why(second));
  BOOST_CHECK_EQUAL(sampler->stats().http.max_in_flight_seen, 1u);
}

BOOST_AUTO_TEST_CASE(a_retry_waiting_for_a_slot_does_not_spin) {
  fake_server server;
  auto opts = options_for(server);
  opts.max_in_flight = 1;
  auto sampler = make_sampler(opts);
  // The first request fails and backs off for ~10 ms; the second takes the only slot for 1 s, so
  // the first one's retry is due long before it can start.
  server.faults(R"([{"kind": "status", "status": 500}, {"kind": "slow", "delay_s": 1.0}])");
  std::promise<sampler_results> a, b;
  const std::clock_t cpu_start = std::clock();
  sampler->submit(token_request(1, {10, 20}, 2),
                  [&](sampler_results r) { a.set_value(std::move(r)); });
  sampler->submit(token_request(2, {10, 20}, 2),
                  [&](sampler_results r) { b.set_value(std::move(r)); });
  auto first = a.get_future().get();
  auto second = b.get_future().get();
  const double cpu_s = double(std::clock() - cpu_start) / CLOCKS_PER_SEC;
  BOOST_CHECK_MESSAGE(first, test::why(first));
  BOOST_CHECK_MESSAGE(second, test::why(second));
  BOOST_CHECK_EQUAL(sampler->stats().http.retries, 1u);
  BOOST_TEST_MESSAGE("CPU time while a retry waited 1 s for a slot: " << cpu_s << " s");
  BOOST_CHECK_LT(cpu_s, 0.3); // a busy-waiting event loop would burn about 1 s
}

BOOST_AUTO_TEST_CASE(sequential_requests_reuse_one_connection) {
  fake_server server;
  auto sampler = make_sampler(options_for(server));
  BOOST_REQUIRE(sampler->check_model());
  for (int i = 0; i < 10; ++i) {
    auto r = sampler->generate(token_request(i, {10, i}, 2));
    BOOST_REQUIRE_MESSAGE(r, test::why(r));
  }
  auto stats = server.stats();
  BOOST_CHECK_EQUAL(stats->integer("requests"), 11);
  BOOST_CHECK_EQUAL(stats->integer("connections"), 1);
}

BOOST_AUTO_TEST_CASE(lora_adapters_load_serve_and_unload) {
  test::temp_dir dir;
  const std::string adapter = dir.write("v3/adapter_config.json", R"({"r": 8})");
  const std::string adapter_dir = dir / "v3";
  fake_server server;
  auto sampler = make_sampler(options_for(server));
  auto loaded = sampler->load_lora_adapter("policy-v3", adapter_dir);
  BOOST_REQUIRE_MESSAGE(loaded, test::why(loaded));
  json_doc sent{server.last_body()};
  BOOST_CHECK_EQUAL(std::string_view(sent.root["lora_path"].get_string().value_unsafe()),
                    adapter_dir);
  auto models = sampler->list_models();
  BOOST_REQUIRE_MESSAGE(models, test::why(models));
  CHECK_SAME(*models, (std::vector<std::string>{"fake-model", "policy-v3"}));

  sampler->use_model("policy-v3", 3);
  BOOST_CHECK_EQUAL(sampler->current_model(), "policy-v3");
  BOOST_CHECK_MESSAGE(sampler->check_model(), "the adapter is listed");
  auto r = sampler->generate(token_request(1, {10, 20}, 2));
  BOOST_REQUIRE_MESSAGE(r, test::why(r));
  BOOST_CHECK_EQUAL(r->front().completion_tokens.front(), fake_base({10, 20}, 0, 0, 50));
  BOOST_CHECK_EQUAL(r->front().policy_version, 3u);

  auto twice = sampler->load_lora_adapter("policy-v3", adapter_dir);
  BOOST_REQUIRE(!twice);
  check_error(twice.error(), errc::invalid_argument,
              {"refused to load LoRA adapter \"policy-v3\"", "HTTP 400", "already been loaded"});
  auto missing = sampler->load_lora_adapter("policy-v4", dir / "nowhere");
  BOOST_REQUIRE(!missing);
  check_error(missing.error(), errc::invalid_argument, {"HTTP 404", "No adapter found"});

  auto unloaded = sampler->unload_lora_adapter("policy-v3");
  BOOST_REQUIRE_MESSAGE(unloaded, test::why(unloaded));
  models = sampler->list_models();
  BOOST_REQUIRE(models);
  CHECK_SAME(*models, (std::vector<std::string>{"fake-model"}));
  auto again = sampler->unload_lora_adapter("policy-v3");
  BOOST_REQUIRE(!again);
  check_error(again.error(), errc::invalid_argument,
              {"refused to unload", "cannot be found"});
}

BOOST_AUTO_TEST_CASE(a_server_without_runtime_lora_says_how_to_enable_it) {
  fake_server server{{"--no-lora"}};
  auto sampler = make_sampler(options_for(server));
  auto r = sampler->load_lora_adapter("policy-v1", "/tmp/adapter");
  BOOST_REQUIRE(!r);
  check_error(r.error(), errc::not_supported,
              {server.base_url() + "/v1/load_lora_adapter", "HTTP 404", "--enable-lora",
               "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True"});
  auto u = sampler->unload_lora_adapter("policy-v1");
  BOOST_REQUIRE(!u);
  check_error(u.error(), errc::not_supported, {"no unload endpoint"});
}

BOOST_AUTO_TEST_CASE(the_api_key_is_sent_as_a_bearer_token) {
  fake_server server{{"--api-key", "s3cret"}};
  auto opts = options_for(server);
  ::unsetenv("OPENAI_API_KEY");
  auto anonymous = make_sampler(opts);
  auto r = anonymous->check_model();
  BOOST_REQUIRE(!r);
  check_error(r.error(), errc::invalid_config,
              {"HTTP 401", "api_key or OPENAI_API_KEY", "Unauthorized"});

  opts.api_key = "s3cret";
  auto keyed = make_sampler(opts);
  BOOST_CHECK_MESSAGE(keyed->check_model(), "the key from the options is accepted");

  opts.api_key.clear();
  ::setenv("OPENAI_API_KEY", "s3cret", 1);
  auto from_env = make_sampler(opts);
  ::unsetenv("OPENAI_API_KEY");
  auto g = from_env->generate(token_request(1, {10, 20}, 2));
  BOOST_CHECK_MESSAGE(g, test::why(g));
}

BOOST_AUTO_TEST_CASE(shutting_down_answers_every_request_once) {
  fake_server server;
  server.delay(2.0);
  auto opts = options_for(server);
  opts.max_in_flight = 2;
  auto sampler = make_sampler(opts);
  std::mutex mutex;
  std::vector<int> calls(6, 0);
  std::vector<std::string> errors;
  for (int i = 0; i < 6; ++i)
    sampler->submit(token_request(i, {10, 20}, 2), [&, i](sampler_results r) {
      std::lock_guard<std::mutex> guard{mutex};
      ++calls[i];
      if (!r)
        errors.push_back(describe(r.error()));
    });
  std::this_thread::sleep_for(200ms); // two on the wire, four waiting
  const auto start = std::chrono::steady_clock::now();
  sampler.reset();
  BOOST_CHECK_LT(seconds_since(start), 1.5); // did not wait for the slow server
  BOOST_CHECK(std::all_of(calls.begin(), calls.end(), [](int c) { return c == 1; }));
  BOOST_REQUIRE_EQUAL(errors.size(), 6u);
  for (const auto& e : errors)
    BOOST_CHECK_MESSAGE(contains(e, "shut down before the request finished"), e);
}

BOOST_AUTO_TEST_SUITE_END()
