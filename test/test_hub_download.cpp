// Tests of hub downloads against a real HTTP server on loopback (test/data/hub/fake_hub.py, a
// separate Python process): the huggingface_hub cache layout, reuse of cached blobs, resuming
// after a dropped connection, tokens, 404/401/403/500 and network errors, offline mode, and
// checksum and size checks.

#include <boost/test/unit_test.hpp>

#include "messages/errors.hpp"
#include "runtime/hub/download_progress.hpp"
#include "runtime/hub/hub_cache.hpp"
#include "runtime/hub/hub_options.hpp"
#include "runtime/hub/resolve_model.hpp"
#include "runtime/model/model_config.hpp"
#include "runtime/model/model_files.hpp"
#include "runtime/model/random_checkpoint.hpp"
#include "runtime/model/safetensors_checkpoint.hpp"
#include "test_support.hpp"

#include <openssl/evp.h>
#include <simdjson.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace kbrl::hub;
using kbrl::test::temp_dir;
using kbrl::test::why;
using kbrl::test::contains;

namespace {

const std::string commit_a = "0123456789abcdef0123456789abcdef01234567";
const std::string commit_b = "89abcdef0123456789abcdef0123456789abcdef";

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string sha256_hex(const std::string& data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(data.data(), data.size(), digest, &n, EVP_sha256(), nullptr);
  std::string out;
  for (unsigned i = 0; i < n; ++i) {
    char buf[3];
    std::snprintf(buf, sizeof buf, "%02x", digest[i]);
    out += buf;
  }
  return out;
}

/// One request the server saw.
struct logged_request {
  std::string method, path, range, auth;
};

/// fake_hub.py running as a child process, serving `config_json`; stopped on destruction.
class fake_hub {
public:
  fake_hub(const temp_dir& dir, const std::string& config_json) {
    config_ = dir / ("hub-config-" + std::to_string(counter_++) + ".json");
    log_ = config_ + ".log";
    std::ofstream(config_) << config_json;
    int out[2];
    BOOST_REQUIRE(::pipe(out) == 0);
    const std::string script = std::string(KBRL_TEST_DATA) + "/hub/fake_hub.py";
    pid_ = ::fork();
    BOOST_REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::dup2(out[1], STDOUT_FILENO);
      ::close(out[0]);
      ::close(out[1]);
      ::execl("/usr/bin/python3", "python3", script.c_str(), config_.c_str(), log_.c_str(),
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(out[1]);
    // The first line is "port <n>" once the server listens; 10 s is far more than it needs.
    std::string line;
    pollfd p{out[0], POLLIN, 0};
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (line.find('\n') == std::string::npos && std::chrono::steady_clock::now() < deadline) {
      if (::poll(&p, 1, 100) <= 0)
        continue;
      char buf[64];
      auto n = ::read(out[0], buf, sizeof buf);
      if (n <= 0)
        break;
      line.append(buf, static_cast<std::size_t>(n));
    }
    ::close(out[0]);
    BOOST_REQUIRE_MESSAGE(line.rfind("port ", 0) == 0, "fake_hub.py did not start: " + line);
    port_ = std::stoi(line.substr(5));
  }

  ~fake_hub() {
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }

  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }

  /// Every request so far, in order.
  std::vector<logged_request> requests() const {
    std::vector<logged_request> out;
    std::ifstream in(log_);
    std::string line;
    simdjson::dom::parser parser;
    while (std::getline(in, line)) {
      simdjson::dom::element e;
      if (parser.parse(line).get(e))
        continue;
      auto text = [&](const char* key) {
        std::string_view v;
        return e[key].get(v) ? std::string{} : std::string(v);
      };
      out.push_back({text("method"), text("path"), text("range"), text("auth")});
    }
    return out;
  }

  /// How many requests had a path containing `part` (and the method, if given).
  std::size_t count(const std::string& part, const std::string& method = "") const {
    std::size_t n = 0;
    for (const auto& r : requests())
      n += contains(r.path, part) && (method.empty() || r.method == method);
    return n;
  }

private:
  static inline int counter_ = 0;
  std::string config_, log_;
  pid_t pid_ = -1;
  int port_ = 0;
};

/// A repository folder with a tiny Qwen2 model, tokenizer files, a chat template, and files a
/// model download must skip (README.md, pytorch_model.bin, onnx/model.onnx).
fs::path make_repo(const temp_dir& dir, const std::string& name, uint64_t max_shard_bytes = 0) {
  const auto repo = dir.path / "repos" / name;
  auto ok = kbrl::model::write_random_checkpoint(repo, kbrl::model::tiny_model_config("qwen2"),
                                                 /*seed=*/11, kbrl::model::st_dtype::f32,
                                                 max_shard_bytes);
  BOOST_REQUIRE_MESSAGE(ok, why(ok));
  std::ofstream(repo / "tokenizer.json") << R"({"version":"1.0","model":{"type":"BPE"}})";
  std::ofstream(repo / "tokenizer_config.json") << R"({"eos_token":"<|im_end|>"})";
  std::ofstream(repo / "chat_template.jinja") << "{{ messages }}";
  std::ofstream(repo / "README.md") << "# tiny\n";
  std::ofstream(repo / "pytorch_model.bin") << "not downloaded";
  fs::create_directories(repo / "onnx");
  std::ofstream(repo / "onnx" / "model.onnx") << "not downloaded";
  return repo;
}

/// The server config for one repository "Org/Tiny" with branch main and tag v1 at commit_a,
/// plus `extra` top-level keys.
std::string hub_config(const fs::path& repo, const std::string& extra = "") {
  return R"({"repos":{"Org/Tiny":{"dir":")" + repo.string() + R"(","sha":")" + commit_a
         + R"(","refs":{"main":")" + commit_a + R"(","v1":")" + commit_a + R"("}}})"
         + (extra.empty() ? "" : "," + extra) + "}";
}

hub_options options_for(const fake_hub& hub, const temp_dir& dir) {
  hub_options o;
  o.endpoint = hub.endpoint();
  o.cache_dir = dir.path / "cache";
  o.retry_backoff_s = 0.01;
  o.connect_timeout_s = 5;
  o.stall_timeout_s = 5;
  o.progress = progress_mode::lines;
  return o;
}

/// The text of a failed expected.
template <class T>
std::string failure(const caf::expected<T>& x) {
  BOOST_REQUIRE_MESSAGE(!x, "expected a failure");
  return kbrl::describe(x.error());
}

/// A loopback port with nothing listening on it.
int closed_port() {
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(s);
  return ntohs(addr.sin_port);
}

const std::vector<std::string> model_files = {"config.json", "generation_config.json",
                                              "tokenizer.json", "tokenizer_config.json",
                                              "chat_template.jinja", "model.safetensors"};

} // namespace

BOOST_AUTO_TEST_SUITE(hub_download)

BOOST_AUTO_TEST_CASE(downloads_into_the_huggingface_cache_layout) {
  temp_dir dir;
  const auto repo = make_repo(dir, "tiny");
  fake_hub hub(dir, hub_config(repo));
  const auto o = options_for(hub, dir);
  auto got = download_model({"Org/Tiny", "main"}, o);
  BOOST_REQUIRE_MESSAGE(got, why(got));

  const auto root = o.cache_dir / "models--Org--Tiny";
  BOOST_CHECK_EQUAL(got->dir, root / "snapshots" / commit_a);
  BOOST_CHECK_EQUAL(got->commit, commit_a);
  auto sorted = got->files;
  std::sort(sorted.begin(), sorted.end());
  auto expected = model_files;
  std::sort(expected.begin(), expected.end());
  BOOST_CHECK(sorted == expected);
  BOOST_CHECK(got->downloaded.size() == model_files.size());
  BOOST_CHECK_EQUAL(got->files.front(), "config.json"); // fetched first
  BOOST_CHECK_EQUAL(read_bytes(root / "refs" / "main"), commit_a);

  for (const auto& name : model_files) {
    const auto link = got->dir / name;
    BOOST_REQUIRE_MESSAGE(fs::is_symlink(link), name << " is not a symlink");
    const auto content = read_bytes(repo / name);
    BOOST_CHECK_MESSAGE(read_bytes(link) == content, name << " differs from the served file");
    // LFS files are named by SHA-256 (the server's X-Linked-Etag), others by git blob SHA-1.
    const auto target = fs::read_symlink(link).string();
    BOOST_CHECK_EQUAL(target.substr(0, 12), "../../blobs/");
    const auto blob = target.substr(12);
    if (name == "model.safetensors")
      BOOST_CHECK_EQUAL(blob, sha256_hex(content));
    else
      BOOST_CHECK_EQUAL(blob.size(), 40u);
    BOOST_CHECK(!fs::exists(root / "blobs" / (blob + ".incomplete")));
    BOOST_CHECK(fs::exists(o.cache_dir / ".locks" / "models--Org--Tiny" / (blob + ".lock")));
  }
  // Skipped: other formats, other folders, documentation.
  BOOST_CHECK(!fs::exists(got->dir / "README.md"));
  BOOST_CHECK_EQUAL(hub.count("pytorch_model.bin"), 0u);
  BOOST_CHECK_EQUAL(hub.count("onnx"), 0u);
  // The weights went through the redirect to storage, as on the real hub.
  BOOST_CHECK_EQUAL(hub.count("/cdn/", "GET"), 1u);
  BOOST_CHECK(hub.requests().front().path
              == "/api/models/Org/Tiny/revision/main?blobs=true");

  // What was fetched is a model kbrl can load.
  auto files = kbrl::model::find_model_files(got->dir);
  BOOST_REQUIRE_MESSAGE(files, why(files));
  BOOST_CHECK(files->tokenizer.has_value() && files->tokenizer_config.has_value());
  auto config = kbrl::model::load_model_config(files->config);
  BOOST_REQUIRE(config);
  auto ckpt = kbrl::model::safetensors_checkpoint::open_dir(got->dir);
  BOOST_REQUIRE(ckpt);
  BOOST_CHECK(kbrl::model::check_weights(*config, *ckpt));
}

BOOST_AUTO_TEST_CASE(a_second_run_downloads_nothing) {
  temp_dir dir;
  fake_hub hub(dir, hub_config(make_repo(dir, "tiny")));
  const auto o = options_for(hub, dir);
  BOOST_REQUIRE(download_model({"Org/Tiny", "main"}, o));
  const auto before = hub.requests().size();
  auto again = resolve_model("Org/Tiny", o);
  BOOST_REQUIRE_MESSAGE(again, why(again));
  BOOST_CHECK_EQUAL(*again, o.cache_dir / "models--Org--Tiny" / "snapshots" / commit_a);
  const auto after = hub.requests();
  BOOST_REQUIRE_EQUAL(after.size(), before + 1); // only the API: which commit is main now
  BOOST_CHECK(contains(after.back().path, "/api/models/Org/Tiny/revision/main"));
}

BOOST_AUTO_TEST_CASE(blobs_a_python_user_downloaded_are_reused) {
  temp_dir dir;
  const auto repo = make_repo(dir, "tiny");
  fake_hub hub(dir, hub_config(repo));
  const auto o = options_for(hub, dir);
  // As huggingface_hub leaves it after fetching only the weights of another commit.
  const auto weights = read_bytes(repo / "model.safetensors");
  const auto blobs = o.cache_dir / "models--Org--Tiny" / "blobs";
  fs::create_directories(blobs);
  std::ofstream(blobs / sha256_hex(weights), std::ios::binary) << weights;
  auto got = download_model({"Org/Tiny", "main"}, o);
  BOOST_REQUIRE_MESSAGE(got, why(got));
  BOOST_CHECK_EQUAL(hub.count("model.safetensors"), 0u);
  BOOST_CHECK_EQUAL(hub.count("/cdn/"), 0u);
  BOOST_CHECK(std::find(got->downloaded.begin(), got->downloaded.end(), "model.safetensors")
              == got->downloaded.end());
  BOOST_CHECK(read_bytes(got->dir / "model.safetensors") == weights);
}

BOOST_AUTO_TEST_CASE(a_dropped_connection_is_resumed_with_a_range_request) {
  temp_dir dir;
  const auto repo = make_repo(dir, "tiny");
  fake_hub hub(dir, hub_config(repo, R"("drop":{"file":"model.safetensors","after":10000,"times":1})"));
  auto got = download_model({"Org/Tiny", "main"}, options_for(hub, dir));
  BOOST_REQUIRE_MESSAGE(got, why(got));
  BOOST_CHECK(read_bytes(got->dir / "model.safetensors") == read_bytes(repo / "model.safetensors"));
  std::vector<std::string> ranges;
  for (const auto& r : hub.requests())
    if (contains(r.path, "/cdn/"))
      ranges.push_back(r.range);
  BOOST_CHECK(ranges == (std::vector<std::string>{"", "bytes=10000-"}));
}

BOOST_AUTO_TEST_CASE(two_downloads_at_once_fetch_each_file_once) {
  // The blob lock serialises them: the second finds each blob in place and only links it.
  temp_dir dir;
  const auto repo = make_repo(dir, "tiny");
  fake_hub hub(dir, hub_config(repo));
  const auto o = options_for(hub, dir);
  caf::expected<resolved_model> first = caf::error{}, second = caf::error{};
  std::thread other([&] { second = download_model({"Org/Tiny", "main"}, o); });
  first = download_model({"Org/Tiny", "main"}, o);
  other.join();
  BOOST_REQUIRE_MESSAGE(first, why(first));
  BOOST_REQUIRE_MESSAGE(second, why(second));
  BOOST_CHECK_EQUAL(first->dir, second->dir);
  BOOST_CHECK_EQUAL(first->downloaded.size() + second->downloaded.size(), model_files.size());
  for (const auto& name : model_files)
    if (name != "model.safetensors")
      BOOST_CHECK_MESSAGE(hub.count("/" + name, "GET") == 1, name << " was fetched twice");
  BOOST_CHECK_EQUAL(hub.count("/cdn/", "GET"), 1u);
  BOOST_CHECK(read_bytes(first->dir / "model.safetensors") == read_bytes(repo / "model.safetensors"));
}

BOOST_AUTO_TEST_CASE(a_partial_file_from_an_earlier_run_is_resumed) {
  temp_dir dir;
  const auto repo = make_repo(dir, "tiny");
  fake_hub hub(dir, hub_config(repo, R"("drop":{"file":"model.safetensors","after":5000,"times":1})"));
  auto o = options_for(hub, dir);
  o.attempts = 1;
  const auto text = failure(download_model({"Org/Tiny", "main"}, o));
  BOOST_CHECK_MESSAGE(contains(text, "model.safetensors") && contains(text, "after 1 try"), text);
  const auto weights = read_bytes(repo / "model.safetensors");
  const auto partial = o.cache_dir / "models--Org--Tiny" / "blobs"
                       / (sha256_hex(weights) + ".incomplete");
  BOOST_REQUIRE(fs::exists(partial));
  BOOST_CHECK_EQUAL(fs::file_size(partial), 5000u);

  auto got = download_model({"Org/Tiny", "main"}, o);
  BOOST_REQUIRE_MESSAGE(got, why(got));
  BOOST_CHECK(read_bytes(got->dir / "model.safetensors") == weights);
  BOOST_CHECK(!fs::exists(partial));
  BOOST_CHECK_EQUAL(hub.requests().back().range, "bytes=5000-");
}

BOOST_AUTO_TEST_CASE(a_server_that_ignores_ranges_is_read_from_the_start) {
  temp_dir dir;
  const auto repo = make_repo(dir, "tiny");
  fake_hub hub(dir, hub_config(repo, R"("ignore_range":true,)"
                                     R"("drop":{"file":"model.safetensors","after":7000,"times":1})"));
  auto got = download_model({"Org/Tiny", "main"}, options_for(hub, dir));
  BOOST_REQUIRE_MESSAGE(got, why(got));
  BOOST_CHECK(read_bytes(got->dir / "model.safetensors") == read_bytes(repo / "model.safetensors"));
  BOOST_CHECK_EQUAL(hub.requests().back().range, "bytes=7000-"); // asked, and got a 200
}

BOOST_AUTO_TEST_CASE(sharded_checkpoints_fetch_the_shards_of_the_index) {
  temp_dir dir;
  const auto repo = make_repo(dir, "sharded", /*max_shard_bytes=*/60000);
  // A stray shard the index does not name (an original or an adapter) is not fetched.
  std::ofstream(repo / "consolidated.safetensors") << "stray";
  fake_hub hub(dir, hub_config(repo));
  auto got = download_model({"Org/Tiny", "main"}, options_for(hub, dir));
  BOOST_REQUIRE_MESSAGE(got, why(got));
  BOOST_CHECK(kbrl::model::missing_model_files(got->dir).empty());
  BOOST_CHECK_EQUAL(hub.count("consolidated"), 0u);
  std::size_t shards = 0;
  for (const auto& name : got->files)
    shards += name.rfind("model-0", 0) == 0;
  BOOST_CHECK_GT(shards, 1u);
  auto ckpt = kbrl::model::safetensors_checkpoint::open_dir(got->dir);
  BOOST_REQUIRE_MESSAGE(ckpt, why(ckpt));
  BOOST_CHECK(kbrl::model::check_weights(kbrl::model::tiny_model_config("qwen2"), *ckpt));
}

BOOST_AUTO_TEST_CASE(tokens_are_sent_and_refusals_explained) {
  temp_dir dir;
  fake_hub hub(dir, hub_config(make_repo(dir, "tiny"), R"("token":"hf_secret")"));
  auto o = options_for(hub, dir);
  auto text = failure(download_model({"Org/Tiny", "main"}, o));
  BOOST_CHECK_MESSAGE(contains(text, "HTTP 401") && contains(text, "gated")
                        && contains(text, "set HF_TOKEN"),
                      text);
  o.token = "hf_wrong";
  text = failure(download_model({"Org/Tiny", "main"}, o));
  BOOST_CHECK_MESSAGE(contains(text, "HTTP 403") && contains(text, "was refused or lacks access"),
                      text);
  BOOST_CHECK(!contains(text, "hf_wrong")); // never echo a token
  o.token = "hf_bad\r\nX-Injected: 1";
  text = failure(download_model({"Org/Tiny", "main"}, o));
  BOOST_CHECK(contains(text, "contains spaces or control characters"));
  o.token = "hf_secret";
  auto got = download_model({"Org/Tiny", "main"}, o);
  BOOST_REQUIRE_MESSAGE(got, why(got));
  BOOST_CHECK_EQUAL(hub.requests().back().auth, "Bearer hf_secret");
}

BOOST_AUTO_TEST_CASE(missing_models_revisions_and_files_are_told_apart) {
  temp_dir dir;
  fake_hub hub(dir, hub_config(make_repo(dir, "tiny"),
                               R"("fail":[{"match":"/config.json","status":404,"times":-1}])"));
  const auto o = options_for(hub, dir);
  auto text = failure(download_model({"Org/Nope", "main"}, o));
  BOOST_CHECK_MESSAGE(contains(text, "no model Org/Nope on " + hub.endpoint() + " (HTTP 404)"),
                      text);
  text = failure(download_model({"Org/Tiny", "v9"}, o));
  BOOST_CHECK_MESSAGE(contains(text, "revision 'v9' of Org/Tiny does not exist"), text);
  text = failure(download_model({"Org/Tiny", "main"}, o));
  BOOST_CHECK_MESSAGE(contains(text, "file config.json does not exist in Org/Tiny"), text);
  // A 404 is an answer, not a hiccup: asked once.
  BOOST_CHECK_EQUAL(hub.count("/config.json"), 1u);
}

BOOST_AUTO_TEST_CASE(server_errors_are_retried_then_reported) {
  temp_dir dir;
  const auto repo = make_repo(dir, "tiny");
  {
    fake_hub hub(dir, hub_config(repo, R"("fail":[{"match":"/resolve/","status":500,"times":2}])"));
    auto got = download_model({"Org/Tiny", "main"}, options_for(hub, dir));
    BOOST_REQUIRE_MESSAGE(got, why(got));
    BOOST_CHECK_EQUAL(hub.count("/config.json"), 3u); // 500, 500, 200
  }
  temp_dir other;
  fake_hub hub(other, hub_config(repo, R"("fail":[{"match":"/api/","status":503,"times":-1}])"));
  const auto text = failure(download_model({"Org/Tiny", "main"}, options_for(hub, other)));
  BOOST_CHECK_MESSAGE(contains(text, "HTTP 503") && contains(text, "has no revision 'main'"), text);
  BOOST_CHECK_EQUAL(hub.count("/api/"), 3u);
}

BOOST_AUTO_TEST_CASE(an_unreachable_hub_falls_back_to_a_complete_cache) {
  temp_dir dir;
  auto o = [&] {
    fake_hub hub(dir, hub_config(make_repo(dir, "tiny")));
    auto opts = options_for(hub, dir);
    BOOST_REQUIRE(download_model({"Org/Tiny", "main"}, opts));
    return opts;
  }();
  o.endpoint = "http://127.0.0.1:" + std::to_string(closed_port());
  o.attempts = 2;
  auto got = download_model({"Org/Tiny", "main"}, o);
  BOOST_REQUIRE_MESSAGE(got, why(got));
  BOOST_CHECK(got->offline);
  BOOST_CHECK_EQUAL(got->commit, commit_a);

  o.cache_dir = dir.path / "empty-cache";
  const auto text = failure(download_model({"Org/Tiny", "main"}, o));
  BOOST_CHECK_MESSAGE(contains(text, "cannot fetch model Org/Tiny from " + o.endpoint)
                        && contains(text, "after 2 tries") && contains(text, "onnect")
                        && contains(text, "has no revision 'main'"),
                      text);
}

BOOST_AUTO_TEST_CASE(offline_mode_uses_only_the_cache_and_names_what_is_missing) {
  temp_dir dir;
  fake_hub hub(dir, hub_config(make_repo(dir, "tiny", /*max_shard_bytes=*/60000)));
  auto o = options_for(hub, dir);
  o.offline = true;
  auto text = failure(download_model({"Org/Tiny", "main"}, o));
  BOOST_CHECK_MESSAGE(contains(text, "HF_HUB_OFFLINE is set")
                        && contains(text, "no revision 'main' of Org/Tiny"),
                      text);
  o.offline = false;
  auto online = download_model({"Org/Tiny", "v1"}, o);
  BOOST_REQUIRE(online);
  BOOST_CHECK_EQUAL(read_bytes(o.cache_dir / "models--Org--Tiny" / "refs" / "v1"), commit_a);
  const auto requests = hub.requests().size();

  o.offline = true;
  auto got = download_model({"Org/Tiny", "v1"}, o);
  BOOST_REQUIRE_MESSAGE(got, why(got));
  BOOST_CHECK(got->offline);
  BOOST_CHECK_EQUAL(got->dir, online->dir);
  auto by_commit = resolve_model("Org/Tiny@" + commit_a, o);
  BOOST_REQUIRE_MESSAGE(by_commit, why(by_commit));
  BOOST_CHECK_EQUAL(hub.requests().size(), requests); // offline: not one request

  // A shard lost from the cache is named.
  std::string shard;
  for (const auto& name : online->files)
    if (name.rfind("model-00002", 0) == 0)
      shard = name;
  BOOST_REQUIRE(!shard.empty());
  fs::remove(fs::canonical(online->dir / shard));
  text = failure(download_model({"Org/Tiny", "v1"}, o));
  BOOST_CHECK_MESSAGE(contains(text, "lacks " + shard), text);
  // Online again, the lost blob is fetched anew.
  o.offline = false;
  auto healed = download_model({"Org/Tiny", "v1"}, o);
  BOOST_REQUIRE_MESSAGE(healed, why(healed));
  BOOST_CHECK(healed->downloaded == std::vector<std::string>{shard});
}

BOOST_AUTO_TEST_CASE(without_blob_ids_the_metadata_comes_from_head_requests) {
  temp_dir dir;
  const auto repo = make_repo(dir, "tiny");
  fake_hub hub(dir, hub_config(repo, R"("no_blob_ids":true)"));
  auto got = download_model({"Org/Tiny", "main"}, options_for(hub, dir));
  BOOST_REQUIRE_MESSAGE(got, why(got));
  BOOST_CHECK_EQUAL(hub.count("/resolve/", "HEAD"), model_files.size());
  const auto weights = read_bytes(repo / "model.safetensors");
  BOOST_CHECK(read_bytes(got->dir / "model.safetensors") == weights);
  BOOST_CHECK_EQUAL(fs::read_symlink(got->dir / "model.safetensors").filename().string(),
                    sha256_hex(weights));
}

BOOST_AUTO_TEST_CASE(a_corrupt_download_is_refused_and_removed) {
  temp_dir dir;
  const auto repo = make_repo(dir, "tiny");
  fake_hub hub(dir, hub_config(repo, R"("corrupt":"model.safetensors")"));
  const auto o = options_for(hub, dir);
  const auto text = failure(download_model({"Org/Tiny", "main"}, o));
  BOOST_CHECK_MESSAGE(contains(text, "Org/Tiny/model.safetensors is corrupt: its SHA-256 is"),
                      text);
  const auto blob = sha256_hex(read_bytes(repo / "model.safetensors"));
  const auto blobs = o.cache_dir / "models--Org--Tiny" / "blobs";
  BOOST_CHECK(!fs::exists(blobs / blob));
  BOOST_CHECK(!fs::exists(blobs / (blob + ".incomplete")));
}

BOOST_AUTO_TEST_CASE(repositories_without_safetensors_are_refused) {
  temp_dir dir;
  const auto repo = dir.path / "repos" / "bin-only";
  fs::create_directories(repo);
  std::ofstream(repo / "config.json") << "{}";
  std::ofstream(repo / "pytorch_model.bin") << "x";
  fake_hub hub(dir, hub_config(repo));
  auto got = download_model({"Org/Tiny", "main"}, options_for(hub, dir));
  BOOST_REQUIRE(!got);
  BOOST_CHECK_EQUAL(got.error().code(), static_cast<uint8_t>(kbrl::errc::not_supported));
  BOOST_CHECK(contains(kbrl::describe(got.error()), "has no safetensors weights"));
  BOOST_CHECK(contains(kbrl::describe(got.error()), "it has pytorch_model.bin"));
  BOOST_CHECK_EQUAL(hub.count("/resolve/"), 0u); // refused before downloading anything
}

BOOST_AUTO_TEST_CASE(local_directories_and_ids_are_told_apart) {
  temp_dir dir;
  const auto local = dir.path / "local-model";
  BOOST_REQUIRE(kbrl::model::write_random_checkpoint(local, kbrl::model::tiny_model_config("qwen3"),
                                                     /*seed=*/1));
  hub_options o;
  o.cache_dir = dir.path / "cache";
  o.endpoint = "http://127.0.0.1:" + std::to_string(closed_port());
  o.attempts = 1;
  auto got = resolve_model(local.string(), o);
  BOOST_REQUIRE_MESSAGE(got, why(got));
  BOOST_CHECK_EQUAL(*got, local);
  BOOST_CHECK(contains(failure(resolve_model((dir.path / "absent").string(), o)),
                       "no model directory"));
  BOOST_CHECK(contains(failure(resolve_model("./models/x", o)), "no model directory ./models/x"));
  fs::remove(local / "model.safetensors");
  BOOST_CHECK(contains(failure(resolve_model(local.string(), o)), "lacks model.safetensors"));
  // Shaped like an id: the hub is asked, and the message mentions the directory reading too.
  const auto text = failure(resolve_model("models/x", o));
  BOOST_CHECK_MESSAGE(contains(text, "cannot fetch model models/x")
                        && contains(text, "no local directory models/x exists either"),
                      text);
}

BOOST_AUTO_TEST_CASE(model_references) {
  auto r = parse_model_ref("Qwen/Qwen2.5-Coder-1.5B-Instruct");
  BOOST_REQUIRE(r);
  BOOST_CHECK_EQUAL(r->repo_id, "Qwen/Qwen2.5-Coder-1.5B-Instruct");
  BOOST_CHECK_EQUAL(r->revision, "main");
  r = parse_model_ref("meta-llama/Llama-3.2-1B@refs/pr/3");
  BOOST_REQUIRE(r);
  BOOST_CHECK_EQUAL(r->revision, "refs/pr/3");
  BOOST_CHECK_EQUAL(to_string(*r), "meta-llama/Llama-3.2-1B@refs/pr/3");
  BOOST_CHECK(parse_model_ref("gpt2"));
  for (const std::string bad : {"a/b/c", "Org/Na me", "Org/--x", "Org/x@", "Org/x@../../etc",
                                "/abs/path", "./rel", "~/m", "Org/.hidden", ""})
    BOOST_CHECK_MESSAGE(!parse_model_ref(bad), "accepted '" + bad + "'");
  BOOST_CHECK(is_commit_hash(commit_a));
  BOOST_CHECK(!is_commit_hash("main"));
  BOOST_CHECK(!is_commit_hash(std::string(40, 'g')));
}

BOOST_AUTO_TEST_CASE(options_come_from_the_huggingface_environment) {
  temp_dir dir;
  const char* names[] = {"HF_ENDPOINT", "HF_TOKEN", "HF_TOKEN_PATH", "HF_HOME", "HF_HUB_CACHE",
                         "HUGGINGFACE_HUB_CACHE", "HF_HUB_OFFLINE", "XDG_CACHE_HOME"};
  std::map<std::string, std::optional<std::string>> saved;
  for (auto n : names) {
    const char* v = std::getenv(n);
    saved[n] = v ? std::optional<std::string>(v) : std::nullopt;
    ::unsetenv(n);
  }
  ::setenv("HF_HOME", (dir.path / "hf").c_str(), 1);
  fs::create_directories(dir.path / "hf");
  std::ofstream(dir.path / "hf" / "token") << "hf_from_file\n";
  auto o = hub_options_from_environment();
  BOOST_CHECK_EQUAL(o.endpoint, "https://huggingface.co");
  BOOST_CHECK_EQUAL(o.cache_dir, dir.path / "hf" / "hub");
  BOOST_CHECK_EQUAL(o.token, "hf_from_file");
  BOOST_CHECK(!o.offline);

  ::setenv("HF_ENDPOINT", "http://mirror.example/", 1);
  ::setenv("HF_TOKEN", " hf_env ", 1);
  ::setenv("HF_HUB_CACHE", (dir.path / "c").c_str(), 1);
  ::setenv("HF_HUB_OFFLINE", "1", 1);
  o = hub_options_from_environment();
  BOOST_CHECK_EQUAL(o.endpoint, "http://mirror.example");
  BOOST_CHECK_EQUAL(o.token, "hf_env");
  BOOST_CHECK_EQUAL(o.cache_dir, dir.path / "c");
  BOOST_CHECK(o.offline);

  for (auto n : names) {
    if (saved[n])
      ::setenv(n, saved[n]->c_str(), 1);
    else
      ::unsetenv(n);
  }
}

BOOST_AUTO_TEST_CASE(progress_lines) {
  BOOST_CHECK_EQUAL(format_progress("model.safetensors", 812300000, 3968000000, 95100000),
                    "model.safetensors                            812.3 / 3968.0 MB     95.1 MB/s");
  BOOST_CHECK(contains(format_progress("config.json", 1500000, 0, 0), "1.5 MB"));
}

BOOST_AUTO_TEST_CASE(the_api_answer_is_checked) {
  auto listing = parse_repo_listing(
    R"({"sha":")" + commit_b + R"(","siblings":[{"rfilename":"config.json","size":10,"blobId":"ab"},)"
    R"({"rfilename":"model.safetensors","size":134,"blobId":"cd","lfs":{"sha256":"ef","size":99}}]})",
    "Org/X");
  BOOST_REQUIRE_MESSAGE(listing, why(listing));
  BOOST_CHECK_EQUAL(listing->commit, commit_b);
  BOOST_REQUIRE_EQUAL(listing->files.size(), 2u);
  BOOST_CHECK_EQUAL(listing->files[1].blob_id, "ef"); // LFS: named by SHA-256, sized by LFS
  BOOST_CHECK(listing->files[1].size == uint64_t{99});
  BOOST_CHECK(contains(failure(parse_repo_listing(R"({"sha":"main","siblings":[]})", "Org/X")),
                       "no 40-hex commit"));
  BOOST_CHECK(contains(failure(parse_repo_listing("<html>", "Org/X")), "not JSON"));
  BOOST_CHECK(contains(failure(parse_repo_listing(R"({"sha":")" + commit_b + R"("})", "Org/X")),
                       "no \"siblings\""));
}

BOOST_AUTO_TEST_SUITE_END()

// Measurements, in a suite of their own that is disabled: Boost.Test runs the disabled test
// cases of a suite that is selected by name (ctest selects the suite of this file).
BOOST_AUTO_TEST_SUITE(hub_download_measurements, *boost::unit_test::disabled())

// A measurement, not run by default (--run_test=hub_download_measurements): one
// 256 MB weight file through fake_hub.py on loopback, with and without the SHA-256 check.
BOOST_AUTO_TEST_CASE(measure_download_rate) {
  temp_dir dir;
  const auto repo = dir.path / "repos" / "big";
  fs::create_directories(repo);
  std::ofstream(repo / "config.json") << "{}";
  {
    std::ofstream out(repo / "model.safetensors", std::ios::binary);
    std::string chunk(1 << 20, 'x');
    for (int i = 0; i < 256; ++i) {
      chunk[0] = static_cast<char>(i);
      out << chunk;
    }
  }
  fake_hub hub(dir, hub_config(repo));
  for (bool verify : {true, false}) {
    auto o = options_for(hub, dir);
    o.cache_dir = dir.path / (verify ? "cache-verified" : "cache-plain");
    o.verify_sha256 = verify;
    const auto start = std::chrono::steady_clock::now();
    auto got = download_model({"Org/Tiny", "main"}, o);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    BOOST_REQUIRE_MESSAGE(got, why(got));
    BOOST_CHECK_EQUAL(fs::file_size(got->dir / "model.safetensors"), 256u << 20);
    BOOST_TEST_MESSAGE("256 MiB over loopback from fake_hub.py, SHA-256 check " << (verify ? "on" : "off")
                       << ": " << s << " s, " << 268.435456 / s << " MB/s");
  }
}

BOOST_AUTO_TEST_SUITE_END()
