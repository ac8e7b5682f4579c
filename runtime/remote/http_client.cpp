#include "runtime/remote/http_client.hpp"

#include "messages/errors.hpp"
#include "runtime/remote/retry_policy.hpp"

#include <curl/curl.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <thread>
#include <unordered_map>

namespace kbrl::remote {

namespace {

using steady = std::chrono::steady_clock;

/// Connections kept beyond max_in_flight for control requests (http_request::control).
constexpr long control_lane = 4;

void init_curl_once() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_ALL); });
}

double seconds_between(steady::time_point from, steady::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

std::string seconds_text(double s) {
  std::ostringstream out;
  out << s;
  return out.str() + " s";
}

std::string attempts_text(int n) {
  return std::to_string(n) + (n == 1 ? " attempt" : " attempts");
}

/// A request between submit() and its callback.
struct job {
  http_request request;
  http_client::callback done;
  steady::time_point submitted;
  steady::time_point attempt_started;
  int attempts = 0;
  // The current attempt's reply, reset when an attempt starts.
  std::string body;
  std::string retry_after;
  bool too_large = false;
  size_t max_reply_bytes = 0;
  char curl_error[CURL_ERROR_SIZE] = {};
};

size_t on_body(char* data, size_t size, size_t count, void* user) {
  auto* j = static_cast<job*>(user);
  const size_t n = size * count;
  if (j->body.size() + n > j->max_reply_bytes) {
    j->too_large = true;
    return 0; // makes curl stop with CURLE_WRITE_ERROR
  }
  j->body.append(data, n);
  return n;
}

size_t on_header(char* data, size_t size, size_t count, void* user) {
  auto* j = static_cast<job*>(user);
  const size_t n = size * count;
  std::string_view line{data, n};
  if (line.rfind("HTTP/", 0) == 0) {
    // A new response starts (after a 100 Continue, say): forget the previous one's headers.
    j->retry_after.clear();
    return n;
  }
  const std::string_view name = "retry-after:";
  if (line.size() > name.size()) {
    bool match = true;
    for (size_t i = 0; i < name.size() && match; ++i)
      match = std::tolower(static_cast<unsigned char>(line[i])) == name[i];
    if (match)
      j->retry_after = std::string{line.substr(name.size())};
  }
  return n;
}

/// How a transport failure (no HTTP reply) is reported and whether it is worth retrying.
struct transport_failure {
  errc code;
  std::string what;
  bool retry;
};

transport_failure classify(CURLcode result, const job& j, double attempt_s, double timeout_s,
                           double connect_timeout_s) {
  switch (result) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
      return {errc::node_unreachable, "could not connect", true};
    case CURLE_OPERATION_TIMEDOUT:
      // curl reports both timeouts with one code. The connect timeout is shorter than the total
      // one, so an attempt that ended well before the total timeout hit the connect timeout.
      if (attempt_s < timeout_s * 0.98)
        return {errc::node_unreachable,
                "could not connect within " + seconds_text(connect_timeout_s), true};
      return {errc::timeout, "no complete reply within " + seconds_text(timeout_s), false};
    case CURLE_GOT_NOTHING:
      return {errc::io_failure, "the server closed the connection without replying", true};
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
      return {errc::io_failure, "the connection broke before the reply was complete", true};
    case CURLE_SEND_ERROR:
      return {errc::io_failure, "the connection broke while the request was sent", true};
    case CURLE_SSL_CONNECT_ERROR:
      return {errc::node_unreachable, "the TLS handshake failed", true};
    case CURLE_WRITE_ERROR:
      if (j.too_large)
        return {errc::io_failure,
                "the reply is larger than max_reply_bytes (" + std::to_string(j.max_reply_bytes)
                  + " bytes)",
                false};
      break;
    default:
      break;
  }
  return {errc::io_failure, "the transfer failed", false};
}

} // namespace

std::string body_excerpt(const std::string& body, size_t max_bytes) {
  std::string out = body.substr(0, std::min(body.size(), max_bytes));
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20)
      c = ' ';
  if (body.size() > max_bytes)
    out += "... [" + std::to_string(body.size() - max_bytes) + " more bytes]";
  return out;
}

struct http_client::impl {
  const http_client_options& opts;
  CURLM* multi = nullptr;
  curl_slist* headers = nullptr;

  // Shared with submitting threads.
  std::mutex mutex;
  std::deque<std::unique_ptr<job>> incoming;
  bool stopping = false;

  // Event thread only.
  std::deque<std::unique_ptr<job>> waiting;         ///< for a slot, in submission order
  std::deque<std::unique_ptr<job>> control_waiting; ///< control requests: started next turn
  std::multimap<steady::time_point, std::unique_ptr<job>> backing_off;
  std::unordered_map<CURL*, std::unique_ptr<job>> on_wire;
  size_t limited_on_wire = 0; ///< on_wire less the control requests
  const size_t limit = static_cast<size_t>(std::max<int32_t>(1, opts.max_in_flight));
  std::vector<CURL*> idle_handles;
  std::mt19937_64 rng{std::random_device{}()};

  std::atomic<uint64_t> submitted{0}, completed{0}, attempts{0}, retries{0},
    connections_opened{0}, in_flight{0}, max_in_flight_seen{0}, waiting_now{0};

  std::thread thread;

  explicit impl(const http_client_options& o) : opts(o) {
    init_curl_once();
    multi = curl_multi_init();
    const long pool = static_cast<long>(limit) + control_lane;
    curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, pool);
    curl_multi_setopt(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, pool);
    headers = curl_slist_append(headers, "Content-Type: application/json");
    headers = curl_slist_append(headers, "Accept: application/json");
    // No "Expect: 100-continue" round trip before large bodies.
    headers = curl_slist_append(headers, "Expect:");
    if (!opts.bearer_token.empty())
      headers =
        curl_slist_append(headers, ("Authorization: Bearer " + opts.bearer_token).c_str());
    thread = std::thread([this] { run(); });
  }

  ~impl() {
    {
      std::lock_guard<std::mutex> guard{mutex};
      stopping = true;
    }
    curl_multi_wakeup(multi);
    thread.join();
    for (CURL* e : idle_handles)
      curl_easy_cleanup(e);
    curl_multi_cleanup(multi);
    curl_slist_free_all(headers);
  }

  void submit(http_request request, callback done) {
    auto j = std::make_unique<job>();
    j->request = std::move(request);
    j->done = std::move(done);
    j->submitted = steady::now();
    j->max_reply_bytes = opts.max_reply_bytes;
    ++submitted;
    {
      std::lock_guard<std::mutex> guard{mutex};
      if (!stopping) {
        incoming.push_back(std::move(j));
        j = nullptr;
      }
    }
    if (j == nullptr) {
      curl_multi_wakeup(multi);
      return;
    }
    auto err = make_error(errc::io_failure, describe_request(*j) + ": the client is shutting down");
    fail(std::move(j), std::move(err));
  }

  static std::string describe_request(const job& j) {
    return j.request.method + " " + j.request.url;
  }

  double total_timeout_s(const job& j) const {
    return j.request.timeout_s > 0 ? j.request.timeout_s : opts.request_timeout_s;
  }

  void deliver(std::unique_ptr<job> j, long status, std::string content_type, caf::error err) {
    http_reply reply;
    reply.method = j->request.method;
    reply.url = j->request.url;
    reply.status = status;
    reply.body = std::move(j->body);
    reply.content_type = std::move(content_type);
    reply.attempts = j->attempts;
    reply.seconds = seconds_between(j->submitted, steady::now());
    reply.error = std::move(err);
    ++completed;
    try {
      j->done(std::move(reply));
    } catch (const std::exception& e) {
      spdlog::error("http client: a callback for {} threw: {}", describe_request(*j), e.what());
    } catch (...) {
      spdlog::error("http client: a callback for {} threw", describe_request(*j));
    }
  }

  void fail(std::unique_ptr<job> j, caf::error err) {
    j->body.clear();
    deliver(std::move(j), 0, "", std::move(err));
  }

  void start(std::unique_ptr<job> j) {
    CURL* e = nullptr;
    if (idle_handles.empty()) {
      e = curl_easy_init();
    } else {
      e = idle_handles.back();
      idle_handles.pop_back();
      curl_easy_reset(e);
    }
    if (e == nullptr) {
      auto err = make_error(errc::internal, describe_request(*j) + ": curl_easy_init failed");
      fail(std::move(j), std::move(err));
      return;
    }
    j->body.clear();
    j->retry_after.clear();
    j->too_large = false;
    j->curl_error[0] = '\0';
    const auto ms = [](double s) { return static_cast<long>(std::ceil(s * 1000)); };
    curl_easy_setopt(e, CURLOPT_URL, j->request.url.c_str());
    curl_easy_setopt(e, CURLOPT_PRIVATE, j.get());
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, ms(opts.connect_timeout_s));
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, ms(total_timeout_s(*j)));
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(e, CURLOPT_USERAGENT, "kbrl/" KBRL_VERSION);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, j->curl_error);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, j.get());
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, j.get());
    if (j->request.method == "POST") {
      curl_easy_setopt(e, CURLOPT_POST, 1L);
      curl_easy_setopt(e, CURLOPT_POSTFIELDS, j->request.body.data());
      curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
                       static_cast<curl_off_t>(j->request.body.size()));
    } else if (j->request.method != "GET") {
      curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, j->request.method.c_str());
    }
    j->attempts += 1;
    j->attempt_started = steady::now();
    ++attempts;
    if (j->attempts > 1)
      ++retries;
    if (curl_multi_add_handle(multi, e) != CURLM_OK) {
      idle_handles.push_back(e);
      auto err =
        make_error(errc::internal, describe_request(*j) + ": curl_multi_add_handle failed");
      fail(std::move(j), std::move(err));
      return;
    }
    if (!j->request.control)
      ++limited_on_wire;
    on_wire.emplace(e, std::move(j));
    in_flight = limited_on_wire;
    if (limited_on_wire > max_in_flight_seen)
      max_in_flight_seen = limited_on_wire;
  }

  void retry_later(std::unique_ptr<job> j, std::optional<double> retry_after) {
    std::uniform_real_distribution<double> unit{0.0, 1.0};
    const double delay = retry_delay_s(opts.retry, j->attempts, retry_after, unit(rng));
    const auto wait = std::chrono::duration<double>(delay);
    const auto due = steady::now() + std::chrono::duration_cast<steady::duration>(wait);
    backing_off.emplace(due, std::move(j));
  }

  void finish(CURL* e, CURLcode result) {
    auto it = on_wire.find(e);
    curl_multi_remove_handle(multi, e);
    if (it == on_wire.end()) {
      idle_handles.push_back(e);
      return;
    }
    std::unique_ptr<job> j = std::move(it->second);
    on_wire.erase(it);
    if (!j->request.control)
      --limited_on_wire;
    in_flight = limited_on_wire;
    long status = 0;
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
    char* content_type = nullptr;
    curl_easy_getinfo(e, CURLINFO_CONTENT_TYPE, &content_type);
    std::string type = content_type != nullptr ? content_type : "";
    long new_connections = 0;
    curl_easy_getinfo(e, CURLINFO_NUM_CONNECTS, &new_connections);
    connections_opened += static_cast<uint64_t>(std::max(0L, new_connections));
    idle_handles.push_back(e);
    const bool retries_left = j->attempts <= opts.retry.max_retries;
    if (result == CURLE_OK) {
      if (retryable_status(status) && retries_left) {
        spdlog::debug("http client: {} answered HTTP {} (attempt {}), retrying",
                      describe_request(*j), status, j->attempts);
        const auto retry_after = parse_retry_after(j->retry_after, std::time(nullptr));
        retry_later(std::move(j), retry_after);
        return;
      }
      deliver(std::move(j), status, std::move(type), caf::error{});
      return;
    }
    const double attempt_s = seconds_between(j->attempt_started, steady::now());
    const auto failure =
      classify(result, *j, attempt_s, total_timeout_s(*j), opts.connect_timeout_s);
    if (failure.retry && retries_left) {
      spdlog::debug("http client: {}: {} (attempt {}), retrying", describe_request(*j),
                    failure.what, j->attempts);
      retry_later(std::move(j), std::nullopt);
      return;
    }
    const std::string reason =
      j->curl_error[0] != '\0' ? std::string{j->curl_error} : curl_easy_strerror(result);
    auto err = make_error(failure.code, describe_request(*j) + ": " + failure.what + " (curl: "
                                          + reason + "); " + attempts_text(j->attempts));
    fail(std::move(j), std::move(err));
  }

  void run() {
    for (;;) {
      {
        std::lock_guard<std::mutex> guard{mutex};
        if (stopping)
          break;
        for (auto& j : incoming)
          (j->request.control ? control_waiting : waiting).push_back(std::move(j));
        incoming.clear();
      }
      // Control requests go at once; retries that are due go before anything still waiting
      // (they were submitted earlier).
      const auto now = steady::now();
      for (auto it = backing_off.begin(); it != backing_off.end() && it->first <= now;) {
        if (!it->second->request.control && limited_on_wire >= limit) {
          ++it;
          continue;
        }
        auto node = backing_off.extract(it++);
        start(std::move(node.mapped()));
      }
      for (auto& j : control_waiting)
        start(std::move(j));
      control_waiting.clear();
      while (limited_on_wire < limit && !waiting.empty()) {
        auto j = std::move(waiting.front());
        waiting.pop_front();
        start(std::move(j));
      }
      int running = 0;
      curl_multi_perform(multi, &running);
      int left = 0;
      while (CURLMsg* msg = curl_multi_info_read(multi, &left))
        if (msg->msg == CURLMSG_DONE)
          finish(msg->easy_handle, msg->data.result);
      waiting_now = waiting.size() + backing_off.size();
      curl_multi_poll(multi, nullptr, 0, wait_ms(), nullptr);
    }
    shut_down();
  }

  /// How long the event loop may sleep: until curl has something to do (curl_multi_poll knows
  /// that), a new request arrives (curl_multi_wakeup), or the next retry that could start is due.
  /// A due retry with no free slot waits for a transfer to end, which wakes the loop anyway.
  int wait_ms() const {
    long long ms = 1000;
    if (limited_on_wire < limit && !waiting.empty())
      return 0;
    for (const auto& [due, j] : backing_off) {
      if (!j->request.control && limited_on_wire >= limit)
        continue;
      const auto until = due - steady::now();
      ms = std::min<long long>(
        ms, std::chrono::duration_cast<std::chrono::milliseconds>(until).count() + 1);
      break; // ordered by due time: the first that could start is the next wake-up
    }
    return static_cast<int>(std::max<long long>(ms, 0));
  }

  /// Fails everything not yet done; runs on the event thread after `stopping` was set.
  void shut_down() {
    std::deque<std::unique_ptr<job>> rest;
    for (auto& [e, j] : on_wire) {
      curl_multi_remove_handle(multi, e);
      idle_handles.push_back(e);
      rest.push_back(std::move(j));
    }
    on_wire.clear();
    limited_on_wire = 0;
    in_flight = 0;
    for (auto& [due, j] : backing_off)
      rest.push_back(std::move(j));
    backing_off.clear();
    for (auto& j : waiting)
      rest.push_back(std::move(j));
    waiting.clear();
    {
      std::lock_guard<std::mutex> guard{mutex};
      for (auto& j : incoming)
        rest.push_back(std::move(j));
      incoming.clear();
    }
    waiting_now = 0;
    for (auto& j : rest) {
      auto err = make_error(errc::io_failure, describe_request(*j)
                                                + ": the client shut down before the request "
                                                  "finished; "
                                                + attempts_text(j->attempts));
      fail(std::move(j), std::move(err));
    }
  }
};

http_client::http_client(http_client_options opts) : opts_(std::move(opts)) {
  impl_ = std::make_unique<impl>(opts_);
}

http_client::~http_client() = default;

void http_client::submit(http_request request, callback done) {
  impl_->submit(std::move(request), std::move(done));
}

http_client_stats http_client::stats() const {
  http_client_stats s;
  s.submitted = impl_->submitted;
  s.completed = impl_->completed;
  s.attempts = impl_->attempts;
  s.retries = impl_->retries;
  s.connections_opened = impl_->connections_opened;
  s.in_flight = impl_->in_flight;
  s.max_in_flight_seen = impl_->max_in_flight_seen;
  s.waiting = impl_->waiting_now;
  return s;
}

} // namespace kbrl::remote
