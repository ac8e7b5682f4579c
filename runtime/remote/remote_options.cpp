#include "runtime/remote/remote_options.hpp"

#include "messages/errors.hpp"
#include "runtime/io/text.hpp"

#include <cmath>
#include <cstdlib>
#include <sstream>
#include <vector>

namespace kbrl::remote {

const char* to_string(remote_api api) {
  switch (api) {
    case remote_api::completions: return "completions";
    case remote_api::chat: return "chat";
  }
  return "unknown";
}

caf::expected<remote_api> parse_remote_api(const std::string& text) {
  if (text == "completions")
    return remote_api::completions;
  if (text == "chat")
    return remote_api::chat;
  return make_error(errc::invalid_config,
                    "remote sampler api: expected \"completions\" or \"chat\", got \"" + text
                      + "\"");
}

std::string normalized_base_url(const std::string& base_url) {
  std::string url = base_url;
  while (!url.empty() && url.back() == '/')
    url.pop_back();
  const std::string v1 = "/v1";
  if (url.size() >= v1.size() && url.compare(url.size() - v1.size(), v1.size(), v1) == 0)
    url.resize(url.size() - v1.size());
  while (!url.empty() && url.back() == '/')
    url.pop_back();
  return url;
}

std::string resolved_api_key(const remote_sampler_options& opts) {
  if (!opts.api_key.empty())
    return opts.api_key;
  const char* env = std::getenv("OPENAI_API_KEY");
  return env != nullptr ? std::string{env} : std::string{};
}

namespace {

std::string number_text(double x) {
  std::ostringstream out;
  out << x;
  return out.str();
}

/// True if `url` is http(s)://<something> after normalisation.
bool has_scheme_and_host(const std::string& url) {
  for (const char* scheme : {"http://", "https://"}) {
    const std::string s{scheme};
    if (url.compare(0, s.size(), s) == 0)
      return url.size() > s.size() && url[s.size()] != '/';
  }
  return false;
}

} // namespace

caf::expected<void> validate(const remote_sampler_options& opts) {
  std::vector<std::string> problems;
  auto wrong = [&](const char* field, const std::string& expected, const std::string& got) {
    problems.push_back(std::string{"remote_sampler_options."} + field + ": expected " + expected
                       + ", got " + got);
  };
  auto positive = [&](const char* field, double x) {
    if (!std::isfinite(x) || x <= 0)
      wrong(field, "a number of seconds > 0", number_text(x));
  };
  if (opts.name.empty())
    wrong("name", "a non-empty name", "\"\"");
  if (!has_scheme_and_host(normalized_base_url(opts.base_url)))
    wrong("base_url", "\"http://host:port\" or \"https://host:port\"",
          "\"" + opts.base_url + "\"");
  if (opts.model.empty())
    wrong("model", "the model name the server lists under /v1/models", "\"\"");
  if (opts.top_logprobs < 0 || opts.top_logprobs > 20)
    wrong("top_logprobs", "0..20", std::to_string(opts.top_logprobs));
  if (opts.max_in_flight < 1 || opts.max_in_flight > 4096)
    wrong("max_in_flight", "1..4096", std::to_string(opts.max_in_flight));
  positive("connect_timeout_s", opts.connect_timeout_s);
  positive("request_timeout_s", opts.request_timeout_s);
  positive("control_timeout_s", opts.control_timeout_s);
  if (std::isfinite(opts.connect_timeout_s) && std::isfinite(opts.request_timeout_s)
      && opts.request_timeout_s <= opts.connect_timeout_s)
    wrong("request_timeout_s",
          "more than connect_timeout_s (" + number_text(opts.connect_timeout_s) + ")",
          number_text(opts.request_timeout_s));
  if (opts.retry.max_retries < 0 || opts.retry.max_retries > 100)
    wrong("retry.max_retries", "0..100", std::to_string(opts.retry.max_retries));
  positive("retry.initial_backoff_s", opts.retry.initial_backoff_s);
  if (!std::isfinite(opts.retry.max_backoff_s)
      || opts.retry.max_backoff_s < opts.retry.initial_backoff_s)
    wrong("retry.max_backoff_s",
          "at least retry.initial_backoff_s (" + number_text(opts.retry.initial_backoff_s) + ")",
          number_text(opts.retry.max_backoff_s));
  if (!std::isfinite(opts.retry.max_retry_after_s) || opts.retry.max_retry_after_s < 0)
    wrong("retry.max_retry_after_s", "a number of seconds >= 0",
          number_text(opts.retry.max_retry_after_s));
  if (opts.max_reply_bytes < 1024)
    wrong("max_reply_bytes", "at least 1024", std::to_string(opts.max_reply_bytes));
  if (problems.empty())
    return {};
  return make_error(errc::invalid_config, join(problems, "\n"));
}

} // namespace kbrl::remote
