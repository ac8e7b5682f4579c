// Embeddings from an OpenAI-compatible server. Reply forms are read from strings; everything on
// the wire runs against test/data/retrieval/fake_embedding_server.py, a real process on a
// loopback socket whose embeddings are predictable (value j = 1 + the number of bytes b of the
// text with b % dim == j) and which misbehaves on command: 503s before it is ready, a vector of
// the wrong length, a body that is not JSON, a refusal.

#include "runtime/retrieval/http_embedder.hpp"
#include "runtime/retrieval/index_store.hpp"
#include "runtime/retrieval/retriever.hpp"
#include "helper_process.hpp"
#include "test_support.hpp"

#include <curl/curl.h>
#include <simdjson.h>

#include <boost/test/unit_test.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

using namespace kbrl;
using namespace kbrl::retrieval;
using kbrl::test::temp_dir;
using kbrl::test::why;
using kbrl::test::contains;

namespace {

const std::string data_dir = std::string(KBRL_TEST_DATA) + "/retrieval";

/// The fake server as a child process; its port is read from its first stdout line.
class fake_embedding_server {
public:
  explicit fake_embedding_server(std::vector<std::string> flags = {}) : process_(command(flags)) {
    const auto& line = process_.first_line();
    const auto at = line.find("\"port\":");
    port_ = at == std::string::npos ? 0 : std::atoi(line.c_str() + at + 7);
    BOOST_REQUIRE_MESSAGE(port_ > 0, "the fake server said: " << line);
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  /// GET /stats with plain libcurl (the embedder's own HTTP stack would test itself).
  std::string stats() const {
    CURL* curl = curl_easy_init();
    BOOST_REQUIRE(curl != nullptr);
    std::string reply;
    const auto address = url() + "/stats";
    curl_easy_setopt(curl, CURLOPT_URL, address.c_str());
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 5000L);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION,
                     +[](char* data, size_t size, size_t count, void* user) {
                       static_cast<std::string*>(user)->append(data, size * count);
                       return size * count;
                     });
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &reply);
    const CURLcode rc = curl_easy_perform(curl);
    curl_easy_cleanup(curl);
    BOOST_REQUIRE_MESSAGE(rc == CURLE_OK, "GET /stats: " << curl_easy_strerror(rc));
    return reply;
  }

  /// An integer of the statistics (each call is a connection of its own, counted by the
  /// server: read "connections" first).
  int64_t stat(const char* key) const {
    simdjson::dom::parser parser;
    int64_t x = -1;
    const auto text = stats();
    BOOST_REQUIRE_MESSAGE(!parser.parse(text)[key].get(x), "no " << key << " in " << text);
    return x;
  }

  /// The batch sizes the server saw, sorted.
  std::vector<int64_t> batch_sizes() const {
    simdjson::dom::parser parser;
    simdjson::dom::array a;
    const auto text = stats();
    BOOST_REQUIRE(!parser.parse(text)["batch_sizes"].get(a));
    std::vector<int64_t> out;
    for (auto x : a)
      out.push_back(x.get_int64().value_unsafe());
    std::sort(out.begin(), out.end());
    return out;
  }

private:
  static std::vector<std::string> command(const std::vector<std::string>& flags) {
    std::vector<std::string> args = {"/usr/bin/python3", data_dir + "/fake_embedding_server.py"};
    args.insert(args.end(), flags.begin(), flags.end());
    return args;
  }

  test::helper_process process_;
  int port_ = 0;
};

/// What the fake server embeds `text` to, scaled to unit length.
std::vector<float> expected_embedding(const std::string& text, int dim) {
  std::vector<float> v(static_cast<size_t>(dim), 1.0f);
  for (unsigned char b : text)
    v[b % dim] += 1.0f;
  normalize_rows(v, dim);
  return v;
}

http_embedder_options options_for(const fake_embedding_server& s) {
  http_embedder_options o;
  o.base_url = s.url() + "/v1";
  o.batch_size = 16;
  o.max_in_flight = 3;
  o.connect_timeout_s = 2;
  o.request_timeout_s = 10;
  o.retry.initial_backoff_s = 0.01;
  o.retry.max_backoff_s = 0.05;
  return o;
}

std::unique_ptr<http_embedder> make(const http_embedder_options& o) {
  auto e = http_embedder::create(o);
  BOOST_REQUIRE_MESSAGE(e, why(e));
  return std::move(*e);
}

std::vector<std::string> texts(size_t n) {
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i)
    out.push_back("def f" + std::to_string(i) + "(x):\n    return torch.relu(x) * "
                  + std::to_string(i * 7) + "\n");
  return out;
}

} // namespace

BOOST_AUTO_TEST_SUITE(retrieval_http)

BOOST_AUTO_TEST_CASE(replies_are_read_in_index_order_and_checked) {
  const std::string url = "http://h/v1/embeddings";
  auto ok = parse_embedding_reply(
    R"({"data": [{"index": 1, "embedding": [3, 4]}, {"index": 0, "embedding": [1.5, 0]}]})", 2, 0,
    url, 200);
  BOOST_REQUIRE_MESSAGE(ok, why(ok));
  BOOST_CHECK((*ok == std::vector<float>{1.5f, 0.0f, 3.0f, 4.0f}));
  auto no_index = parse_embedding_reply(R"({"data": [{"embedding": [1]}, {"embedding": [2]}]})",
                                        2, 1, url, 200);
  BOOST_REQUIRE(no_index);
  BOOST_CHECK((*no_index == std::vector<float>{1.0f, 2.0f}));
  struct bad_case {
    std::string body;
    size_t count;
    int32_t dim;
    long status;
    std::string expected;
  };
  const std::vector<bad_case> bad = {
    {"not json", 1, 0, 200, "the reply is not JSON"},
    {R"({"object": "list"})", 1, 0, 200, "no \"data\" array"},
    {R"({"data": [{"index": 0, "embedding": [1]}]})", 2, 0, 200, "holds 1 embeddings for 2 inputs"},
    {R"({"data": [{"index": 0, "embedding": [1]}, {"index": 0, "embedding": [2]}]})", 2, 0, 200,
     "data[1].index 0 appears twice"},
    {R"({"data": [{"index": 5, "embedding": [1]}]})", 1, 0, 200, "data[0].index is 5, expected 0..0"},
    {R"({"data": [{"index": 0, "embedding": [1, "x"]}]})", 1, 0, 200, "data[0].embedding[1] is not a number"},
    {R"({"data": [{"index": 0, "embedding": "AAAA"}]})", 1, 0, 200, "base64 encoding is not read"},
    {R"({"data": [{"index": 0, "embedding": [1, 2, 3]}]})", 1, 2, 200, "has 3 values, expected 2"},
    {R"({"data": [{"index": 0, "embedding": [1, 2]}, {"index": 1, "embedding": [1]}]})", 2, 0, 200,
     "data[1].embedding has 1 values, expected 2 (as the first one)"},
    {R"({"data": [{"index": 0, "embedding": [0, 0]}]})", 1, 0, 200, "all zeros"},
    {R"({"data": [{"index": 0, "embedding": []}]})", 1, 0, 200, "is empty"},
    {R"({"error": {"message": "context too long"}})", 1, 0, 400, "answered HTTP 400: context too long"},
    {"<html>bad gateway</html>", 1, 0, 502, "HTTP 502): the server refused the request; body: <html>"},
  };
  for (const auto& b : bad) {
    auto r = parse_embedding_reply(b.body, b.count, b.dim, url, b.status);
    BOOST_REQUIRE_MESSAGE(!r, "accepted: " << b.body);
    const auto text = describe(r.error());
    BOOST_CHECK_MESSAGE(contains(text, b.expected) && contains(text, url),
                        "\"" << b.expected << "\" missing from: " << text);
  }
}

BOOST_AUTO_TEST_CASE(options_are_validated_field_by_field) {
  http_embedder_options o;
  o.base_url = "localhost:8000";
  o.batch_size = 0;
  o.max_in_flight = 1000;
  auto e = http_embedder::create(o);
  BOOST_REQUIRE(!e);
  const auto text = describe(e.error());
  for (const char* part : {"http_embedder_options.base_url: expected \"http://host:port\"",
                           "http_embedder_options.batch_size: expected 1..4096, got 0",
                           "http_embedder_options.max_in_flight: expected 1..256, got 1000"})
    BOOST_CHECK_MESSAGE(contains(text, part), "\"" << part << "\" missing from: " << text);
}

BOOST_AUTO_TEST_CASE(texts_go_in_batches_and_come_back_in_order) {
  fake_embedding_server server;
  auto o = options_for(server);
  o.model = "bge-code-v1";
  auto e = make(o);
  BOOST_CHECK_EQUAL(e->identity().describe(), "http bge-code-v1, dimension unknown");
  const auto in = texts(70);
  auto v = e->embed(in);
  BOOST_REQUIRE_MESSAGE(v, why(v));
  BOOST_REQUIRE_EQUAL(v->size(), 70u * 8);
  for (size_t i = 0; i < in.size(); ++i) {
    auto want = expected_embedding(in[i], 8);
    for (size_t j = 0; j < 8; ++j)
      BOOST_CHECK_CLOSE((*v)[i * 8 + j], want[j], /*tol %=*/1e-4);
  }
  BOOST_CHECK_EQUAL(e->identity().dimension, 8); // learnt from the first reply
  // Kept alive and reused: no more connections than requests in flight (plus this query's).
  BOOST_CHECK_LE(server.stat("connections"), 3 + 1);
  BOOST_CHECK_EQUAL(server.stat("requests"), 5);
  BOOST_CHECK((server.batch_sizes() == std::vector<int64_t>{6, 16, 16, 16, 16}));
  BOOST_CHECK_MESSAGE(contains(server.stats(), "\"models\": [\"bge-code-v1\""), server.stats());
  BOOST_CHECK_LE(server.stat("max_concurrent"), 3); // max_in_flight
}

BOOST_AUTO_TEST_CASE(a_long_text_is_cut_at_a_character_boundary) {
  fake_embedding_server server;
  auto o = options_for(server);
  o.max_input_bytes = 10;
  auto e = make(o);
  auto v = e->embed({"abcdefghi\xc3\xa9xyz"}); // the 10th byte is inside "é"
  BOOST_REQUIRE_MESSAGE(v, why(v));
  const auto stats = server.stats();
  BOOST_CHECK_MESSAGE(contains(stats, "\"first_inputs\": [\"abcdefghi\"]"), stats);
  auto want = expected_embedding("abcdefghi", 8);
  BOOST_CHECK_CLOSE((*v)[0], want[0], /*tol %=*/1e-4);
}

BOOST_AUTO_TEST_CASE(a_server_warming_up_is_retried) {
  fake_embedding_server server({"--fail-first", "2", "--retry-after", "0"});
  auto e = make(options_for(server));
  auto v = e->embed(texts(3));
  BOOST_REQUIRE_MESSAGE(v, why(v));
  BOOST_CHECK_EQUAL(v->size(), 3u * 8);
  BOOST_CHECK_EQUAL(server.stat("requests"), 3);
}

BOOST_AUTO_TEST_CASE(bad_replies_fail_the_call_naming_the_batch) {
  {
    fake_embedding_server server({"--wrong-dim-at", "2"});
    auto o = options_for(server);
    o.max_in_flight = 1; // request 2 is the second batch
    auto e = make(o);
    auto v = e->embed(texts(40));
    BOOST_REQUIRE(!v);
    const auto text = describe(v.error());
    BOOST_CHECK_MESSAGE(contains(text, "has 7 values, expected 8") && contains(text, "texts 16..31"),
                        text);
  }
  {
    fake_embedding_server server({"--garbage-at", "1"});
    auto v = make(options_for(server))->embed(texts(2));
    BOOST_REQUIRE(!v);
    BOOST_CHECK_MESSAGE(contains(describe(v.error()), "the reply is not JSON"),
                        describe(v.error()));
  }
  {
    fake_embedding_server server({"--drop-item-at", "1"});
    auto v = make(options_for(server))->embed(texts(2));
    BOOST_REQUIRE(!v);
    BOOST_CHECK_MESSAGE(contains(describe(v.error()), "holds 1 embeddings for 2 inputs"),
                        describe(v.error()));
  }
  {
    fake_embedding_server server({"--error-400"});
    auto v = make(options_for(server))->embed(texts(2));
    BOOST_REQUIRE(!v);
    BOOST_CHECK_MESSAGE(contains(describe(v.error()), "answered HTTP 400: input too long"),
                        describe(v.error()));
    BOOST_CHECK_EQUAL(server.stat("requests"), 1); // a 400 is not retried
  }
  {
    fake_embedding_server server({"--dim", "8"});
    auto o = options_for(server);
    o.dimension = 16; // what an index built elsewhere expects
    auto v = make(o)->embed(texts(1));
    BOOST_REQUIRE(!v);
    BOOST_CHECK_MESSAGE(contains(describe(v.error()), "has 8 values, expected 16"),
                        describe(v.error()));
  }
}

BOOST_AUTO_TEST_CASE(an_unreachable_server_is_an_error_not_a_hang) {
  // A port that was free a moment ago: connections are refused.
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  BOOST_REQUIRE(::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  socklen_t len = sizeof addr;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(s);
  http_embedder_options o;
  o.base_url = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  o.retry.max_retries = 1;
  o.retry.initial_backoff_s = 0.01;
  o.retry.max_backoff_s = 0.01;
  auto v = make(o)->embed({"x"});
  BOOST_REQUIRE(!v);
  BOOST_CHECK_MESSAGE(contains(describe(v.error()), "node_unreachable"), describe(v.error()));
}

BOOST_AUTO_TEST_CASE(an_index_built_through_a_server_is_queried_through_it) {
  fake_embedding_server server({"--dim", "16", "--require-model", "code-embedder"});
  temp_dir dir;
  build_options b;
  b.corpus_path = data_dir + "/sakana_sample.jsonl";
  b.mapping = sakana_mapping();
  b.output_dir = dir / "index";
  b.embedder_spec = "http:" + server.url();
  b.embedding.http.model = "code-embedder";
  b.embedding.http.retry.initial_backoff_s = 0.01;
  auto s = build_index(b);
  BOOST_REQUIRE_MESSAGE(s, why(s));
  BOOST_CHECK_EQUAL(s->embedder.describe(), "http code-embedder, dimension 16");
  BOOST_CHECK(!std::filesystem::exists(dir / "index/idf.bin"));

  retriever_options o;
  o.index_dir = dir / "index"; // the manifest knows the URL and the model
  auto r = retriever::open(o);
  BOOST_REQUIRE_MESSAGE(r, why(r));
  problem p;
  p.reference_source = "import torch\nreturn torch.relu(x)\n";
  auto found = (*r)->retrieve(p, 1);
  BOOST_REQUIRE_MESSAGE(found, why(found));
  BOOST_CHECK_EQUAL(found->size(), 1u);
  BOOST_CHECK_MESSAGE(contains(server.stats(), "\"code-embedder\""), server.stats());

  // Another model behind the same URL is another embedder.
  o.embedding.http.model = "other-model";
  auto other = retriever::open(o);
  BOOST_REQUIRE(!other);
  BOOST_CHECK_MESSAGE(contains(describe(other.error()), "refusing to search it with http other-model"),
                      describe(other.error()));
}

BOOST_AUTO_TEST_SUITE_END()
