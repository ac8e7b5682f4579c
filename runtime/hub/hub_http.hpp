#pragma once
// HTTP requests to the hub through libcurl: small GETs (the API), HEADs (file metadata) and
// file downloads that resume with a Range request. One request at a time per hub_http; separate
// objects may run in separate threads. Nothing here retries or interprets status codes: that is
// resolve_model's job; this layer reports exactly what happened.

#include "runtime/hub/hub_options.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <string>

namespace kbrl::hub {

/// What one request ended with.
struct http_reply {
  /// Empty if a reply arrived; else why none did (curl's words: "Couldn't connect to server:
  /// ...", "Transfer closed with 512 bytes remaining to read").
  std::string transport_error;
  /// True when transport_error is something a retry may cure (connection refused or dropped,
  /// timeout, stall); false for a malformed URL or a local write failure.
  bool retryable = false;
  /// HTTP status of the last response, 0 if none arrived.
  long status = 0;
  /// Headers of the last response, names in lower case.
  std::map<std::string, std::string> headers;
  /// Body of the last response (get()); for download(), the body of an error status (at most
  /// 4 KiB), the file gets the body of a 200 or 206.
  std::string body;
  /// The URL of the last response, after redirects.
  std::string final_url;

  /// A header's value, or "" if absent. `name` in lower case.
  std::string header(const std::string& name) const;
};

/// Called during a download with the bytes of the file present so far and the expected total
/// (0 if unknown).
using progress_callback = std::function<void(uint64_t done, uint64_t total)>;

/// A libcurl client with the options' token and timeouts.
class hub_http {
public:
  explicit hub_http(const hub_options& options);

  /// GET `url` following redirects; the body is kept in memory, at most `max_body` bytes (a
  /// larger body ends the request with a transport_error).
  http_reply get(const std::string& url, std::size_t max_body = 64u << 20);

  /// HEAD `url`. Redirects to a relative location (a renamed repository) are followed, others
  /// are not: the hub's first answer carries the file's metadata, and signed storage URLs may
  /// refuse HEAD.
  http_reply head(const std::string& url);

  /// GETs `url` (following redirects) into the file open as `fd`, which holds `offset` bytes of
  /// it already. With offset > 0 a "Range: bytes=<offset>-" request is sent: a 206 reply is
  /// appended at offset, a 200 reply (server ignored the range) rewrites the file from the
  /// start. A 206 whose Content-Range does not start at offset is refused (transport_error).
  /// The file is never written for other statuses.
  http_reply download(const std::string& url, int fd, uint64_t offset,
                      const progress_callback& progress);

private:
  hub_options options_;
};

/// `text` percent-encoded for use as one URL path segment ('/' encoded too).
std::string url_escape(const std::string& text);

} // namespace kbrl::hub
