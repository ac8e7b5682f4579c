#include "runtime/hub/hub_http.hpp"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>

#include <unistd.h>

namespace kbrl::hub {

namespace {

/// Bytes of an error reply's body kept for the message.
constexpr std::size_t max_error_body = 4096;

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

/// The state of one request, shared with curl's callbacks.
struct transfer {
  http_reply reply;
  bool to_memory = true;         ///< get()/head(): the body goes to reply.body
  std::size_t max_body = 0;
  // download():
  int fd = -1;
  uint64_t offset = 0;           ///< bytes already in the file before this request
  bool started = false;          ///< the current response's first body byte has been seen
  bool into_file = false;        ///< the current response's body goes to the file
  uint64_t base = 0;             ///< file position where the current body starts
  const progress_callback* progress = nullptr;
  std::string local_error;       ///< set when a callback aborts the transfer
  bool local_retryable = false;
};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string trim(std::string s) {
  const char* space = " \t\r\n";
  s.erase(s.find_last_not_of(space) + 1);
  s.erase(0, s.find_first_not_of(space));
  return s;
}

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto& t = *static_cast<transfer*>(user);
  const std::string line(data, size * n);
  if (line.rfind("HTTP/", 0) == 0) { // a new response (after a redirect or 100-continue)
    t.reply.headers.clear();
    t.started = false;
    t.into_file = false;
    const auto space = line.find(' ');
    t.reply.status = space == std::string::npos ? 0 : std::atol(line.c_str() + space + 1);
    return size * n;
  }
  const auto colon = line.find(':');
  if (colon != std::string::npos)
    t.reply.headers[lower(trim(line.substr(0, colon)))] = trim(line.substr(colon + 1));
  return size * n;
}

bool write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    auto w = ::write(fd, data, size);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return false;
    data += w;
    size -= static_cast<size_t>(w);
  }
  return true;
}

/// Where the body of a 206 starts: the A of "bytes A-B/T"; -1 if unreadable.
long long range_start(const std::string& content_range) {
  const auto bytes = content_range.find("bytes ");
  if (bytes == std::string::npos)
    return -1;
  const char* p = content_range.c_str() + bytes + 6;
  if (!std::isdigit(static_cast<unsigned char>(*p)))
    return -1;
  return std::atoll(p);
}

/// Decides, at the first body byte of a response, where its body goes.
bool start_body(transfer& t) {
  t.started = true;
  const long status = t.reply.status;
  if (t.to_memory || (status != 200 && status != 206))
    return true; // error bodies (and redirect bodies) go to memory, bounded
  if (status == 206) {
    const auto start = range_start(t.reply.header("content-range"));
    if (t.offset == 0 || start != static_cast<long long>(t.offset)) {
      t.local_error = "the server answered a request for bytes from " + std::to_string(t.offset)
                      + " with Content-Range '" + t.reply.header("content-range") + "'";
      t.local_retryable = true;
      return false;
    }
    t.base = t.offset;
  } else { // 200: the whole file, from the start
    t.base = 0;
    if (::ftruncate(t.fd, 0) != 0) {
      t.local_error = std::string("cannot truncate the partial file: ") + std::strerror(errno);
      return false;
    }
  }
  if (::lseek(t.fd, static_cast<off_t>(t.base), SEEK_SET) < 0) {
    t.local_error = std::string("cannot seek in the partial file: ") + std::strerror(errno);
    return false;
  }
  t.into_file = true;
  return true;
}

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto& t = *static_cast<transfer*>(user);
  const size_t bytes = size * n;
  if (!t.started && !start_body(t))
    return 0; // aborts the transfer with CURLE_WRITE_ERROR; local_error says why
  if (t.into_file) {
    if (!write_all(t.fd, data, bytes)) {
      t.local_error = std::string("cannot write the partial file: ") + std::strerror(errno);
      return 0;
    }
    return bytes;
  }
  const std::size_t limit = t.to_memory ? t.max_body : max_error_body;
  if (t.reply.body.size() + bytes > limit) {
    if (!t.to_memory) { // an error page: keep its beginning
      t.reply.body.append(data, limit - std::min(limit, t.reply.body.size()));
      return bytes;
    }
    t.local_error = "the reply is larger than " + std::to_string(limit) + " bytes";
    return 0;
  }
  t.reply.body.append(data, bytes);
  return bytes;
}

int on_progress(void* user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t, curl_off_t) {
  auto& t = *static_cast<transfer*>(user);
  if (t.progress != nullptr && *t.progress && t.into_file)
    (*t.progress)(t.base + static_cast<uint64_t>(dlnow),
                  dltotal > 0 ? t.base + static_cast<uint64_t>(dltotal) : 0);
  return 0;
}

bool retryable(CURLcode code) {
  switch (code) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
      return true;
    default:
      return false;
  }
}

using curl_ptr = std::unique_ptr<CURL, decltype(&curl_easy_cleanup)>;
using slist_ptr = std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)>;

/// Runs one request configured by `setup` on a fresh handle.
template <class Setup>
void perform(const hub_options& options, const std::string& url, transfer& t, Setup setup) {
  global_init();
  curl_ptr curl(curl_easy_init(), curl_easy_cleanup);
  if (!curl) {
    t.reply.transport_error = "cannot create a libcurl handle";
    return;
  }
  slist_ptr headers(nullptr, curl_slist_free_all);
  if (!options.token.empty())
    headers.reset(curl_slist_append(headers.release(),
                                    ("Authorization: Bearer " + options.token).c_str()));
  char error_buffer[CURL_ERROR_SIZE] = {0};
  CURL* h = curl.get();
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(h, CURLOPT_USERAGENT, "kbrl/" KBRL_VERSION);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, error_buffer);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, options.connect_timeout_s);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, options.stall_timeout_s);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(h, CURLOPT_BUFFERSIZE, 512L * 1024); // fewer, larger writes for weights
  setup(h);
  const CURLcode code = curl_easy_perform(h);
  char* final_url = nullptr;
  if (curl_easy_getinfo(h, CURLINFO_EFFECTIVE_URL, &final_url) == CURLE_OK && final_url)
    t.reply.final_url = final_url;
  if (code != CURLE_OK) {
    if (!t.local_error.empty()) {
      t.reply.transport_error = t.local_error;
      t.reply.retryable = t.local_retryable;
    } else {
      t.reply.transport_error = std::string(curl_easy_strerror(code))
                                + (error_buffer[0] ? std::string(": ") + error_buffer : "");
      t.reply.retryable = retryable(code);
    }
  }
}

/// "http://host:port" of a URL.
std::string origin(const std::string& url) {
  const auto scheme = url.find("://");
  if (scheme == std::string::npos)
    return url;
  return url.substr(0, url.find('/', scheme + 3));
}

} // namespace

std::string http_reply::header(const std::string& name) const {
  auto it = headers.find(name);
  return it == headers.end() ? std::string{} : it->second;
}

hub_http::hub_http(const hub_options& options) : options_(options) {}

http_reply hub_http::get(const std::string& url, std::size_t max_body) {
  transfer t;
  t.max_body = max_body;
  perform(options_, url, t, [](CURL* h) { curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L); });
  return std::move(t.reply);
}

http_reply hub_http::head(const std::string& url) {
  std::string current = url;
  for (int hop = 0;; ++hop) {
    transfer t;
    perform(options_, current, t, [](CURL* h) { curl_easy_setopt(h, CURLOPT_NOBODY, 1L); });
    const auto location = t.reply.header("location");
    // A redirect that already describes the file (X-Linked-Etag: the hub sending weights to
    // storage) is the answer; a relative one without it is the hub's own (a renamed repo).
    const bool relative_redirect = t.reply.status >= 300 && t.reply.status < 400
                                   && !location.empty() && location.front() == '/'
                                   && t.reply.header("x-linked-etag").empty();
    if (!relative_redirect || hop == 5)
      return std::move(t.reply);
    current = origin(current) + location;
  }
}

http_reply hub_http::download(const std::string& url, int fd, uint64_t offset,
                              const progress_callback& progress) {
  transfer t;
  t.to_memory = false;
  t.fd = fd;
  t.offset = offset;
  t.progress = &progress;
  const std::string range = "bytes=" + std::to_string(offset) + "-";
  perform(options_, url, t, [&](CURL* h) {
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
    if (offset > 0)
      curl_easy_setopt(h, CURLOPT_RANGE, range.c_str() + 6); // "N-"
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, &t);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
  });
  // A 200 with an empty body never reached on_body: the file is that empty body.
  if (t.reply.transport_error.empty() && t.reply.status == 200 && !t.started)
    if (::ftruncate(fd, 0) != 0)
      t.reply.transport_error = std::string("cannot truncate the file: ") + std::strerror(errno);
  return std::move(t.reply);
}

std::string url_escape(const std::string& text) {
  global_init();
  char* escaped = curl_easy_escape(nullptr, text.data(), static_cast<int>(text.size()));
  if (escaped == nullptr)
    return text;
  std::string out(escaped);
  curl_free(escaped);
  return out;
}

} // namespace kbrl::hub
