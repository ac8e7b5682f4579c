// The isolation and process layer of the evaluator, with a hostile stand-in worker: crashes
// become clear errors, hangs are killed at the deadline, output is bounded, and - where bwrap
// works - the worker has no network, cannot write outside its scratch space, and cannot fork
// without bound. The node that runs it is unharmed throughout.

#include "runtime/eval/worker_process.hpp"
#include "messages/error_codes.hpp"
#include "test_support.hpp"

#include <simdjson.h>

#include <boost/test/unit_test.hpp>

#include <cstdio>
#include <filesystem>
#include <netinet/in.h>
#include <thread>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

using namespace kbrl;
using namespace kbrl::eval;
using namespace std::chrono_literals;

namespace {

struct worker_fixture {
  test::temp_dir dir;
  worker_options opts;
  std::unique_ptr<worker_process> w;

  worker_fixture() {
    opts.python = "/usr/bin/python3";
    opts.script = std::string(KBRL_TEST_DATA) + "/workers/hostile_worker.py";
    opts.scratch_dir = dir / "scratch";
    opts.extensions_dir = dir / "extensions";
    opts.capture_bytes = 4096;
    opts.max_processes = 64;
  }

  void start() {
    auto started = worker_process::start(opts);
    BOOST_REQUIRE_MESSAGE(started, test::why(started));
    w = std::move(*started);
    auto hello = call(R"({"op":"hello","id":1})");
    BOOST_REQUIRE(hello.find("\"ok\": true") != std::string::npos);
  }

  std::string call(const std::string& req, std::chrono::milliseconds deadline = 10s) {
    auto answer = w->call(req, deadline);
    BOOST_REQUIRE_MESSAGE(answer, test::why(answer));
    return *answer;
  }

  simdjson::dom::element parse(const std::string& json) {
    simdjson::dom::element doc;
    BOOST_REQUIRE(!parser.parse(json).get(doc));
    return doc;
  }
  simdjson::dom::parser parser;
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(worker_processes, worker_fixture)

BOOST_AUTO_TEST_CASE(answers_in_order_and_reports_its_identity) {
  start();
  auto doc = parse(call(R"({"op":"echo","id":2,"payload":"a\nb"})"));
  std::string_view echo;
  BOOST_REQUIRE(!doc["echo"].get(echo));
  BOOST_CHECK_EQUAL(echo, "a\nb");
  BOOST_CHECK(w->alive());
  if (::geteuid() == 0) {
    // As root, the worker runs as nobody.
    auto hello = parse(call(R"({"op":"hello","id":3})"));
    int64_t uid = -1;
    BOOST_REQUIRE(!hello["uid"].get(uid));
    BOOST_CHECK_EQUAL(uid, 65534);
  }
}

BOOST_AUTO_TEST_CASE(lines_that_answer_another_request_are_dropped) {
  start();
  auto doc = parse(call(R"({"op":"stale","id":7})"));
  std::string_view echo;
  BOOST_REQUIRE(!doc["echo"].get(echo));
  BOOST_CHECK_EQUAL(echo, "real");
  BOOST_CHECK_EQUAL(w->stray_answers(), 2u);
  // and the protocol is in step afterwards
  BOOST_CHECK(call(R"({"op":"echo","id":8,"payload":2})").find("\"echo\": 2") != std::string::npos);
  BOOST_CHECK_EQUAL(w->stray_answers(), 2u);
}

BOOST_AUTO_TEST_CASE(a_segfault_is_a_clear_crash) {
  start();
  auto res = w->call(R"({"op":"segv","id":2})", 10s);
  BOOST_REQUIRE(!res);
  BOOST_CHECK(has_code(res.error(), errc::worker_crashed));
  // Under bwrap the sandbox's init reports the signal as an exit status; without it, directly.
  auto text = describe(res.error());
  BOOST_CHECK_MESSAGE(text.find("SIGSEGV") != std::string::npos
                        || text.find("exited with status") != std::string::npos,
                      text);
  BOOST_CHECK(!w->alive());
}

BOOST_AUTO_TEST_CASE(an_abort_is_a_clear_crash) {
  start();
  auto res = w->call(R"({"op":"abort","id":2})", 10s);
  BOOST_REQUIRE(!res);
  BOOST_CHECK(has_code(res.error(), errc::worker_crashed));
}

BOOST_AUTO_TEST_CASE(a_hang_is_killed_at_the_deadline) {
  start();
  auto t0 = std::chrono::steady_clock::now();
  auto res = w->call(R"({"op":"hang","id":2})", 1500ms);
  auto took = std::chrono::steady_clock::now() - t0;
  BOOST_REQUIRE(!res);
  BOOST_CHECK(has_code(res.error(), errc::timeout));
  BOOST_CHECK(took < 5s);
  BOOST_CHECK(!w->alive());
}

BOOST_AUTO_TEST_CASE(giant_output_is_bounded) {
  start();
  const uint64_t printed = 800 * 65537; // 800 lines of 64 KiB: 50 MiB
  auto doc = parse(call(R"({"op":"print","id":2,"bytes":)" + std::to_string(printed) + "}", 60s));
  bool ok = false;
  BOOST_CHECK(!doc["ok"].get(ok) && ok);
  // Give the drain thread a moment to read the rest of the pipe.
  captured_output out;
  for (int i = 0; i < 50 && out.total_bytes < printed; ++i) {
    std::this_thread::sleep_for(100ms);
    auto more = w->take_output();
    out.total_bytes += more.total_bytes;
    if (out.head.empty())
      out.head = more.head;
  }
  BOOST_CHECK_EQUAL(out.total_bytes, printed);
  BOOST_CHECK_LE(out.head.size(), 2048u);
  // And the protocol is intact after it.
  BOOST_CHECK(call(R"({"op":"echo","id":3,"payload":1})").find("\"echo\": 1")
              != std::string::npos);
}

BOOST_AUTO_TEST_CASE(isolation_blocks_network_writes_and_fork_storms) {
  if (resolve_isolation(isolation_mode::automatic) != isolation_mode::bwrap) {
    BOOST_TEST_MESSAGE("bwrap does not work on this machine: isolation checks skipped");
    return;
  }
  opts.isolation = isolation_mode::bwrap;
  // A listener on the host's loopback: the sandbox has its own network namespace.
  int srv = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  BOOST_REQUIRE(::bind(srv, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  BOOST_REQUIRE(::listen(srv, 4) == 0);
  socklen_t len = sizeof addr;
  ::getsockname(srv, reinterpret_cast<sockaddr*>(&addr), &len);
  start();
  BOOST_CHECK(w->isolation() == isolation_mode::bwrap);
  auto net = parse(call(R"({"op":"net","id":2,"port":)" + std::to_string(ntohs(addr.sin_port))
                        + "}"));
  bool reached = true;
  BOOST_REQUIRE(!net["reached"].get(reached));
  BOOST_CHECK(!reached);
  ::close(srv);

  // Next to the scratch folder, in the test's own temp folder: read-only inside the sandbox.
  auto outside = dir / "outside.txt";
  auto wr = parse(call(R"({"op":"write","id":3,"path":")" + outside + "\"}"));
  bool written = true;
  BOOST_REQUIRE(!wr["written"].get(written));
  BOOST_CHECK(!written);
  BOOST_CHECK(!std::filesystem::exists(outside));
  auto inside = parse(call(R"({"op":"write","id":4,"path":")" + opts.scratch_dir + "/in.txt\"}"));
  BOOST_REQUIRE(!inside["written"].get(written));
  BOOST_CHECK(written);

  auto storm = parse(call(R"({"op":"fork_storm","id":5,"count":5000})", 60s));
  int64_t started = 0;
  BOOST_REQUIRE(!storm["started"].get(started));
  BOOST_CHECK_LT(started, 5000);
  BOOST_TEST_MESSAGE("fork storm stopped after " << started << " processes");
  // Killing the worker takes its whole sandbox with it.
  w->kill();
  BOOST_CHECK(!w->alive());
}

/// A unix socket of the host at `path` (a stream listener, or a datagram sink); closed with the
/// object.
struct unix_listener {
  int fd = -1;
  explicit unix_listener(const std::string& path, int type = SOCK_STREAM) {
    fd = ::socket(AF_UNIX, type, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
    BOOST_REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    if (type == SOCK_STREAM)
      BOOST_REQUIRE(::listen(fd, 4) == 0);
  }
  ~unix_listener() { ::close(fd); }
};

BOOST_AUTO_TEST_CASE(host_unix_sockets_are_out_of_reach_in_every_mode) {
  // Sockets in the test's temp folder (under bwrap: visible, read-only; connecting to a socket
  // needs no write access): the seccomp filter refuses connect() and unix datagram sockets.
  auto path = dir / "host.sock";
  unix_listener host{path};
  auto dgram_path = dir / "host-dgram.sock";
  unix_listener dgram_host{dgram_path, SOCK_DGRAM};
  for (auto mode : {isolation_mode::none, resolve_isolation(isolation_mode::automatic)}) {
    opts.isolation = mode;
    start();
    auto got = parse(call(R"({"op":"unix","id":2,"path":")" + path + "\"}"));
    bool reached = true;
    BOOST_REQUIRE(!got["reached"].get(reached));
    BOOST_CHECK_MESSAGE(!reached, "isolation " << to_string(mode));
    auto dgram = parse(call(R"({"op":"unix_dgram","id":4,"path":")" + dgram_path + "\"}"));
    bool sent = true;
    BOOST_REQUIRE(!dgram["reached"].get(sent));
    BOOST_CHECK_MESSAGE(!sent, "datagram under isolation " << to_string(mode));
    auto pair = parse(call(R"({"op":"socketpair","id":3})"));
    bool works = false;
    BOOST_REQUIRE(!pair["works"].get(works));
    BOOST_CHECK_MESSAGE(works, "socketpair under isolation " << to_string(mode));
    w->kill();
  }
}

BOOST_AUTO_TEST_CASE(dev_shm_is_the_sandboxs_own) {
  if (resolve_isolation(isolation_mode::automatic) != isolation_mode::bwrap) {
    BOOST_TEST_MESSAGE("bwrap does not work on this machine: /dev/shm check skipped");
    return;
  }
  opts.isolation = isolation_mode::bwrap;
  start();
  auto name = "/dev/shm/kbrl-test-" + std::to_string(::getpid());
  auto wr = parse(call(R"({"op":"write","id":2,"path":")" + name + "\"}"));
  bool written = false;
  BOOST_REQUIRE(!wr["written"].get(written));
  BOOST_CHECK(written); // usable inside (NCCL and friends need it) ...
  BOOST_CHECK(!std::filesystem::exists(name)); // ... but not the host's
  std::filesystem::remove(name);
}

BOOST_AUTO_TEST_CASE(relative_folders_work_under_isolation) {
  // kbrl-node's default run folder is relative (runs/...): the worker layer must not care.
  auto cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir.path);
  opts.scratch_dir = "rel/scratch";
  opts.extensions_dir = "rel/extensions";
  start();
  std::filesystem::current_path(cwd);
  BOOST_CHECK(w->alive());
}

BOOST_AUTO_TEST_CASE(a_missing_interpreter_fails_to_start_clearly) {
  opts.python = "/nonexistent/python3";
  opts.isolation = isolation_mode::none;
  auto started = worker_process::start(opts);
  BOOST_REQUIRE(started); // the process starts; exec fails inside it
  auto res = (*started)->call(R"({"op":"hello","id":1})", 10s);
  BOOST_REQUIRE(!res);
  BOOST_CHECK(has_code(res.error(), errc::worker_crashed));
  BOOST_CHECK_MESSAGE(describe(res.error()).find("127") != std::string::npos,
                      describe(res.error()));
}

BOOST_AUTO_TEST_SUITE_END()
