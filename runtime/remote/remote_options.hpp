#pragma once
// The settings of a remote sampler: a client of one OpenAI-compatible inference server (vLLM,
// SGLang, llama.cpp server). Every field states its meaning, unit and default; validate() checks
// them all and names each field that is wrong. The run config's sampler.remote_* keys fill them
// (sampling::sampler_settings_from, runtime/sampler/sampler_settings.cpp).

#include <caf/expected.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

namespace kbrl::remote {

/// Which endpoint draws completions.
enum class remote_api : uint8_t {
  completions, ///< POST /v1/completions: raw prompt (text or token ids) in, text out
  chat,        ///< POST /v1/chat/completions: prompt_text sent as one user message; the server
               ///< applies its chat template (token-id prompts are not possible here)
};

/// "completions" or "chat".
const char* to_string(remote_api api);

/// Parses "completions" or "chat".
caf::expected<remote_api> parse_remote_api(const std::string& text);

/// How the retries of one HTTP request are spaced. A request is retried after a connection
/// failure (refused, reset, closed without a reply, connect timeout), HTTP 429 and HTTP 5xx; never
/// after another 4xx, a malformed reply or the request's own total timeout.
struct retry_options {
  /// Attempts after the first; 0 disables retries. Default 4 (five attempts in all).
  int32_t max_retries = 4;
  /// Delay before the first retry, in seconds, before jitter; doubles on every further retry.
  /// > 0. Default 0.5.
  double initial_backoff_s = 0.5;
  /// Cap of the doubled delay, in seconds; >= initial_backoff_s. Default 16.
  double max_backoff_s = 16;
  /// Longest wait a server's Retry-After header can impose, in seconds; a longer one is cut to
  /// this. >= 0. Default 60.
  double max_retry_after_s = 60;
};

/// Everything a remote sampler needs to reach its server and draw completions.
struct remote_sampler_options {
  /// Name stamped on every generation_result (`sampler`), e.g. "node-a/sampler.0". Default
  /// "remote".
  std::string name = "remote";
  /// Server root, "http://host:port" or "https://..."; a trailing "/" or "/v1" is dropped, the
  /// client appends "/v1/completions" etc. Required.
  std::string base_url;
  /// Model name as the server lists it under GET /v1/models (vLLM: --served-model-name, else
  /// the model path). Requests use it until use_model() switches to a LoRA adapter. Required.
  std::string model;
  /// Sent as "Authorization: Bearer <key>". Empty (default): the environment variable
  /// OPENAI_API_KEY when set, else no Authorization header.
  std::string api_key;
  /// Completions or chat endpoint. Default completions.
  remote_api api = remote_api::completions;
  /// Send a request's prompt_tokens as `prompt: [ids]` (vLLM and SGLang accept this; it skips
  /// re-tokenisation, so the learner sees exactly the tokens sampled from). A request with only
  /// prompt_text is sent as text. If the server refuses a token prompt with HTTP 400 and the
  /// request also has prompt_text, it is re-sent as text, and later requests go as text
  /// directly. Ignored for chat. Default true.
  bool use_token_prompts = true;
  /// Ask for sampled tokens as ids: sends `return_tokens_as_token_ids: true` (a vLLM extension;
  /// the logprob tokens then read "token_id:123"). Servers without it answer with token text,
  /// and completion_tokens stays empty. Default true.
  bool request_token_ids = true;
  /// Fail a reply whose sampled tokens carry no ids (see request_token_ids), instead of
  /// returning empty completion_tokens. Default false.
  bool require_token_ids = false;
  /// Alternatives per position requested with the logprobs (`logprobs` for completions,
  /// `top_logprobs` for chat). Only the sampled token's logprob is kept; 1 is the smallest value
  /// every server answers with the sampled token's logprob (llama.cpp returns none for 0). 0..20.
  /// Default 1.
  int32_t top_logprobs = 1;
  /// At most this many requests are on the wire at once; further ones wait in order. Also the
  /// size of the keep-alive connection pool. 1..4096. Default 64.
  int32_t max_in_flight = 64;
  /// Seconds allowed to open a TCP (and TLS) connection. > 0. Default 10.
  double connect_timeout_s = 10;
  /// Seconds allowed for one attempt from start to the last byte of the reply (a long generation
  /// needs minutes); the connect time counts. > connect_timeout_s. Default 900.
  double request_timeout_s = 900;
  /// Seconds allowed for one attempt of the control calls (GET /v1/models, LoRA load/unload).
  /// > 0. Default 120 (loading an adapter reads it from disk).
  double control_timeout_s = 120;
  /// Retry spacing and budget.
  retry_options retry;
  /// Largest reply body accepted, in bytes; a larger one fails the request. Default 64 MiB.
  size_t max_reply_bytes = 64u << 20;
  /// Bytes of a bad reply's body quoted in error texts. Default 600.
  size_t error_excerpt_bytes = 600;
};

/// Checks every field; fails with errc::invalid_config listing each wrong field
/// ("remote_sampler_options.max_in_flight: expected 1..4096, got 0"), one per line.
caf::expected<void> validate(const remote_sampler_options& opts);

/// base_url without a trailing "/" or "/v1": "http://h:8000/v1/" -> "http://h:8000".
std::string normalized_base_url(const std::string& base_url);

/// opts.api_key, or OPENAI_API_KEY from the environment when that is empty.
std::string resolved_api_key(const remote_sampler_options& opts);

} // namespace kbrl::remote
