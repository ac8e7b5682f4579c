#pragma once
// A small concurrent HTTP/1.1 client on libcurl's multi interface, made for talking JSON to one
// inference server from many threads at once.
//
// One event thread drives every transfer. At most `max_in_flight` requests are on the wire; the
// rest wait in submission order. Control requests (http_request::control) skip that queue and
// limit. Connections are kept alive and reused across requests (the multi handle's connection
// cache holds max_in_flight of them, plus a few for control requests). Failed attempts are
// retried as retry_policy.hpp says, waiting without holding a slot or a thread.
//
// Life of a request:
//
//   submit ──> waiting ──(slot free)──> on the wire ──> done: callback(reply)
//                 ^                          │
//                 └── back-off (Retry-After, │ connection failure, connect timeout,
//                     or doubled + jitter) <─┘ HTTP 429 / 5xx, while retries are left
//
// Thread-safety: submit() and stats() may be called from any thread. Callbacks run on the event
// thread, one at a time: they must be quick and must not block (hand the reply to another thread,
// send a message, fulfil a promise). Each submitted request gets exactly one callback, also when
// the client is destroyed first (then with an io_failure error).

#include "runtime/remote/remote_options.hpp"

#include <caf/error.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace kbrl::remote {

/// One HTTP request.
struct http_request {
  std::string method = "GET"; ///< "GET" or "POST"
  std::string url;            ///< absolute URL
  std::string body;           ///< POST body, sent as application/json
  double timeout_s = 0;       ///< total time of one attempt, seconds; 0: the client's default
  /// A short control call (list models, load an adapter) that must not wait behind long
  /// generations: it skips the queue and is not counted against max_in_flight.
  bool control = false;
};

/// How a request ended, after its last attempt.
struct http_reply {
  std::string method;       ///< as requested
  std::string url;          ///< as requested
  long status = 0;          ///< HTTP status of the last attempt; 0 if no reply arrived
  std::string body;         ///< body of the last attempt's reply
  std::string content_type; ///< its Content-Type, "" if none
  int attempts = 0;         ///< attempts made, retries included
  double seconds = 0;       ///< from submit() to now, back-off waits included
  /// Set when no HTTP reply could be had at all: errc::node_unreachable (could not connect),
  /// errc::timeout (the attempt passed its total timeout), errc::io_failure (connection closed or
  /// broken mid-reply, reply too large, client shut down). The text names method and URL, the
  /// attempts made and curl's reason. HTTP error statuses are not errors here: see `status`.
  caf::error error;
};

/// Settings of an http_client. Timeouts are per attempt.
struct http_client_options {
  int32_t max_in_flight = 64;     ///< requests on the wire at once, and kept-alive connections
  double connect_timeout_s = 10;  ///< seconds to open a connection
  double request_timeout_s = 900; ///< default total seconds of one attempt
  retry_options retry;            ///< retry budget and spacing
  std::string bearer_token;       ///< "Authorization: Bearer <token>" when non-empty
  size_t max_reply_bytes = 64u << 20; ///< larger replies fail with io_failure
};

/// Counters since the client started. Read with http_client::stats().
struct http_client_stats {
  uint64_t submitted = 0;         ///< requests handed to submit()
  uint64_t completed = 0;         ///< callbacks made
  uint64_t attempts = 0;          ///< transfers started, retries included
  uint64_t retries = 0;           ///< attempts after a first one
  uint64_t connections_opened = 0;///< new TCP connections (the rest reused kept-alive ones)
  uint64_t in_flight = 0;         ///< transfers on the wire now, control requests left out
  uint64_t max_in_flight_seen = 0;///< most of those on the wire at once so far
  uint64_t waiting = 0;           ///< requests waiting for a slot or in back-off now
};

/// See the file comment.
class http_client {
public:
  using callback = std::function<void(http_reply)>;

  /// Starts the event thread. Precondition: opts.max_in_flight >= 1 and the timeouts > 0
  /// (remote_sampler_options' validate() checks the settings this is built from).
  explicit http_client(http_client_options opts);

  /// Fails every request not yet done with io_failure ("client shut down"), then joins the
  /// event thread. Must not be called from a callback.
  ~http_client();

  http_client(const http_client&) = delete;
  http_client& operator=(const http_client&) = delete;

  /// Queues `request`; `done` runs on the event thread when it ends (see the file comment).
  void submit(http_request request, callback done);

  /// A snapshot of the counters.
  http_client_stats stats() const;

  const http_client_options& options() const { return opts_; }

private:
  struct impl;
  http_client_options opts_;
  std::unique_ptr<impl> impl_;
};

/// The body cut to `max_bytes` for an error text: control characters become spaces, and a cut
/// body ends with "... [N more bytes]".
std::string body_excerpt(const std::string& body, size_t max_bytes);

} // namespace kbrl::remote
