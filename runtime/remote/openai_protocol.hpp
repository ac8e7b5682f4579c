#pragma once
// The JSON of the OpenAI-compatible API as vLLM, SGLang and llama.cpp server speak it: request
// bodies built from a generation_request, and replies read into generation_results. Pure
// functions (no network), so every reply form is tested on fixtures.
//
// Reply forms read:
//   completions  choices[].text, choices[].logprobs.{tokens, token_logprobs}; tokens are either
//                "token_id:123" (vLLM with return_tokens_as_token_ids) or token text (no ids);
//                choices[].token_ids (newer vLLM) gives ids directly when present
//   chat         choices[].message.content, choices[].logprobs.content[].{token, logprob}, tokens
//                as above
//   both         choices[].finish_reason "stop" / "length" (vLLM also "abort"), and vLLM's
//                choices[].stop_reason: an integer (a stop token id), a string (a stop string) or
//                null (end of sequence); usage.prompt_tokens
//
// finish_reason mapping:  "length" -> length;  "stop" with stop_reason a string -> stop_string;
// "stop" with stop_reason an integer, null or absent -> stop_token (servers that send no
// stop_reason cannot say which stop fired; end of sequence is the common case);  "abort" ->
// cancelled;  anything else -> error, with the server's word in `error`.

#include "messages/data.hpp"
#include "runtime/remote/remote_options.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kbrl::remote {

/// What a request body is built from, besides the generation_request itself.
struct request_shape {
  remote_api api = remote_api::completions;
  std::string model;              ///< the `model` field: base model or LoRA adapter name
  bool token_prompt = true;       ///< send prompt_tokens as `prompt: [ids]` (completions only)
  bool request_token_ids = true;  ///< send return_tokens_as_token_ids: true
  int32_t top_logprobs = 1;       ///< alternatives per position with the logprobs
  int32_t n = 1;                  ///< completions drawn for the prompt
};

/// The JSON body of POST /v1/completions or /v1/chat/completions for `request`. Always sends
/// model, prompt (or messages), max_tokens, temperature, top_p, n, seed (its low 63 bits: vLLM
/// takes a signed 64-bit seed) and logprobs; stop, stop_token_ids and top_k only when set
/// (non-empty / > 0). Fails with errc::invalid_argument when the request has no prompt the
/// shape can send (chat or text prompts need prompt_text; token prompts need prompt_tokens) or a
/// parameter is out of range (max_new_tokens < 1, top_p outside (0, 1], temperature < 0, n < 1).
caf::expected<std::string> build_request_body(const generation_request& request,
                                              const request_shape& shape);

/// What parse_generation_reply() needs to know about the request it answers.
struct reply_context {
  std::string url;                  ///< endpoint URL, named in errors
  long status = 200;                ///< HTTP status, named in errors
  remote_api api = remote_api::completions;
  uint64_t request_id = 0;          ///< copied into each result's id
  int32_t prompt_token_count = 0;   ///< used when the reply has no usage.prompt_tokens
  uint64_t policy_version = 0;      ///< copied into each result
  std::string sampler;              ///< copied into each result
  bool require_token_ids = false;   ///< fail when sampled tokens carry no ids
  size_t excerpt_bytes = 600;       ///< body bytes quoted in errors
};

/// Reads a completions or chat reply: one generation_result per choice, ordered by choice
/// index. Fails with errc::io_failure naming the URL, the HTTP status, what was wrong (with its
/// JSON path, e.g. "choices[1].logprobs.token_logprobs[3] is a string, expected a number") and a
/// bounded excerpt of the body, when the body is not JSON, has no choices, has fields of the
/// wrong type, has logprobs that do not line up with the tokens, or lacks logprobs. A body that
/// carries an `error` object fails with the server's message.
caf::expected<std::vector<generation_result>> parse_generation_reply(std::string_view body,
                                                                     const reply_context& ctx);

/// The ids of GET /v1/models ({"data": [{"id": ...}, ...]}), in the server's order. Fails like
/// parse_generation_reply() when the body is not of that shape.
caf::expected<std::vector<std::string>> parse_model_list(std::string_view body,
                                                         const std::string& url, long status,
                                                         size_t excerpt_bytes);

/// The token id of a vLLM "token_id:123" token, or nullopt for any other text.
std::optional<int32_t> parse_token_id(std::string_view token);

/// The message in an error body, in any of the forms servers use: {"error": {"message": ...}},
/// {"error": "..."}, {"message": ...} (older vLLM), {"detail": "..."} or
/// {"detail": [{"msg": ...}]} (FastAPI). nullopt when the body is none of these.
std::optional<std::string> server_error_message(std::string_view body);

/// Maps a finish_reason and vLLM's stop_reason (see the file comment). `stop_reason_kind` is
/// 'i' for an integer, 's' for a string, 'n' for null or absent.
finish_reason map_finish_reason(std::string_view finish, char stop_reason_kind);

} // namespace kbrl::remote
