#include "runtime/remote/openai_protocol.hpp"

#include "messages/errors.hpp"
#include "runtime/io/json_writer.hpp"
#include "runtime/remote/http_client.hpp"

#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

namespace kbrl::remote {

namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

std::string number_text(double x) {
  std::ostringstream out;
  out << x;
  return out.str();
}

/// "a string", "an array", ... for "X is <kind>, expected ..." texts.
std::string kind_of(element e) {
  switch (e.type()) {
    case element_type::ARRAY: return "an array";
    case element_type::OBJECT: return "an object";
    case element_type::INT64:
    case element_type::UINT64: return "an integer";
    case element_type::DOUBLE: return "a number";
    case element_type::STRING: return "a string";
    case element_type::BOOL: return "a boolean";
    case element_type::NULL_VALUE: return "null";
  }
  return "unknown";
}

/// The array `e` by value (iterating a temporary simdjson_result's array would dangle).
/// Precondition: e.is_array(); anything else gives an empty array.
simdjson::dom::array elements_of(element e) {
  simdjson::dom::array out;
  if (e.get_array().get(out))
    return simdjson::dom::array{};
  return out;
}

bool is_number(element e) {
  const auto t = e.type();
  return t == element_type::INT64 || t == element_type::UINT64 || t == element_type::DOUBLE;
}

/// The field `key` of object `obj`, or nullopt when absent.
std::optional<element> field(element obj, std::string_view key) {
  element out;
  if (obj.at_key(key).get(out))
    return std::nullopt;
  return out;
}

/// The field, treating null like absent.
std::optional<element> present(element obj, std::string_view key) {
  auto out = field(obj, key);
  if (out && out->is_null())
    return std::nullopt;
  return out;
}

/// Collects a reply's first problem as an error naming the URL, status and body.
class reply_reader {
public:
  reply_reader(std::string_view body, std::string url, long status, size_t excerpt_bytes)
    : body_(body), url_(std::move(url)), status_(status), excerpt_bytes_(excerpt_bytes) {}

  caf::error malformed(const std::string& what) const {
    return make_error(errc::io_failure, "malformed reply from " + url_ + " (HTTP "
                                          + std::to_string(status_) + "): " + what + "; body: "
                                          + body_excerpt(std::string{body_}, excerpt_bytes_));
  }

  /// Parses the body; the root must be an object.
  caf::expected<element> parse_object() {
    padded_ = simdjson::padded_string{body_};
    element root;
    if (auto err = parser_.parse(padded_).get(root))
      return malformed(std::string{"the body is not valid JSON ("}
                       + simdjson::error_message(err) + ")");
    if (!root.is_object())
      return malformed("the body is " + kind_of(root) + ", expected a JSON object");
    if (auto error = present(root, "error")) {
      auto message = server_error_message(body_);
      return make_error(errc::io_failure,
                        "the server at " + url_ + " answered with an error (HTTP "
                          + std::to_string(status_) + "): " + message.value_or(kind_of(*error))
                          + "; body: " + body_excerpt(std::string{body_}, excerpt_bytes_));
    }
    return root;
  }

private:
  std::string_view body_;
  std::string url_;
  long status_;
  size_t excerpt_bytes_;
  simdjson::padded_string padded_;
  simdjson::dom::parser parser_;
};

/// The sampled tokens of one choice, as the logprobs describe them.
struct sampled_tokens {
  std::vector<std::string> texts; ///< token as the server wrote it ("token_id:12" or text)
  std::vector<float> logprobs;
};

/// Reads choices[i].logprobs in the completions form ({tokens, token_logprobs}) or the chat form
/// ({content: [{token, logprob}]}); both servers' APIs are accepted for either endpoint
/// (llama.cpp answers /v1/completions in the chat form).
caf::expected<sampled_tokens> read_logprobs(element logprobs, const std::string& path,
                                            const reply_reader& reader) {
  if (!logprobs.is_object())
    return reader.malformed(path + " is " + kind_of(logprobs) + ", expected an object");
  sampled_tokens out;
  auto read_logprob = [&](element value, const std::string& where) -> caf::expected<float> {
    if (!is_number(value))
      return reader.malformed(where + " is " + kind_of(value) + ", expected a number");
    double x = 0;
    if (value.get_double().get(x))
      return reader.malformed(where + " is not a readable number");
    return static_cast<float>(x);
  };
  if (auto content = field(logprobs, "content")) {
    if (!content->is_array())
      return reader.malformed(path + ".content is " + kind_of(*content) + ", expected an array");
    size_t k = 0;
    for (element entry : elements_of(*content)) {
      const std::string where = path + ".content[" + std::to_string(k++) + "]";
      if (!entry.is_object())
        return reader.malformed(where + " is " + kind_of(entry) + ", expected an object");
      auto token = field(entry, "token");
      if (!token || !token->is_string())
        return reader.malformed(where + ".token is "
                                + (token ? kind_of(*token) : std::string{"missing"})
                                + ", expected a string");
      auto logprob = field(entry, "logprob");
      if (!logprob)
        return reader.malformed(where + ".logprob is missing");
      auto value = read_logprob(*logprob, where + ".logprob");
      if (!value)
        return value.error();
      out.texts.emplace_back(token->get_string().value_unsafe());
      out.logprobs.push_back(*value);
    }
    return out;
  }
  auto tokens = field(logprobs, "tokens");
  auto token_logprobs = field(logprobs, "token_logprobs");
  if (!tokens || !token_logprobs)
    return reader.malformed(path
                            + " has neither \"content\" nor \"tokens\" and \"token_logprobs\"");
  if (!tokens->is_array())
    return reader.malformed(path + ".tokens is " + kind_of(*tokens) + ", expected an array");
  if (!token_logprobs->is_array())
    return reader.malformed(path + ".token_logprobs is " + kind_of(*token_logprobs)
                            + ", expected an array");
  size_t k = 0;
  for (element token : elements_of(*tokens)) {
    if (!token.is_string())
      return reader.malformed(path + ".tokens[" + std::to_string(k) + "] is " + kind_of(token)
                              + ", expected a string");
    out.texts.emplace_back(token.get_string().value_unsafe());
    ++k;
  }
  k = 0;
  for (element value : elements_of(*token_logprobs)) {
    auto x = read_logprob(value, path + ".token_logprobs[" + std::to_string(k++) + "]");
    if (!x)
      return x.error();
    out.logprobs.push_back(*x);
  }
  if (out.texts.size() != out.logprobs.size())
    return reader.malformed(path + ".tokens has " + std::to_string(out.texts.size())
                            + " entries but token_logprobs has "
                            + std::to_string(out.logprobs.size()));
  return out;
}

/// Token ids from "token_id:N" texts: all of them, none (plain text tokens), or an error for a
/// mixture.
caf::expected<std::vector<int32_t>> ids_of(const std::vector<std::string>& texts,
                                           const std::string& path, const reply_reader& reader) {
  std::vector<int32_t> ids;
  for (size_t k = 0; k < texts.size(); ++k) {
    auto id = parse_token_id(texts[k]);
    if (id) {
      if (ids.size() != k)
        return reader.malformed(path + "[" + std::to_string(k) + "] is \"" + texts[k]
                                + "\" but earlier tokens are not of the form \"token_id:N\"");
      ids.push_back(*id);
    } else if (!ids.empty()) {
      return reader.malformed(path + "[" + std::to_string(k) + "] is \"" + texts[k]
                              + "\", not of the form \"token_id:N\" like the tokens before it");
    }
  }
  return ids;
}

caf::expected<generation_result> read_choice(element choice, size_t position,
                                             const reply_context& ctx,
                                             const reply_reader& reader, int64_t& index) {
  const std::string path = "choices[" + std::to_string(position) + "]";
  if (!choice.is_object())
    return reader.malformed(path + " is " + kind_of(choice) + ", expected an object");
  generation_result result;
  result.id = ctx.request_id;
  result.policy_version = ctx.policy_version;
  result.sampler = ctx.sampler;
  index = static_cast<int64_t>(position);
  if (auto i = present(choice, "index")) {
    if (i->get_int64().get(index) || index < 0)
      return reader.malformed(path + ".index is " + kind_of(*i)
                              + ", expected an integer >= 0");
  }
  // The completion text.
  if (ctx.api == remote_api::chat) {
    auto message = field(choice, "message");
    if (!message || !message->is_object())
      return reader.malformed(path + ".message is "
                              + (message ? kind_of(*message) : std::string{"missing"})
                              + ", expected an object");
    if (auto content = present(*message, "content")) {
      if (!content->is_string())
        return reader.malformed(path + ".message.content is " + kind_of(*content)
                                + ", expected a string");
      result.completion_text = std::string{content->get_string().value_unsafe()};
    }
  } else {
    auto text = field(choice, "text");
    if (!text || !text->is_string())
      return reader.malformed(path + ".text is "
                              + (text ? kind_of(*text) : std::string{"missing"})
                              + ", expected a string");
    result.completion_text = std::string{text->get_string().value_unsafe()};
  }
  // How it ended.
  auto finish = present(choice, "finish_reason");
  if (!finish || !finish->is_string())
    return reader.malformed(path + ".finish_reason is "
                            + (finish ? kind_of(*finish) : std::string{"missing or null"})
                            + ", expected a string");
  char stop_kind = 'n';
  if (auto stop = present(choice, "stop_reason")) {
    if (stop->is_int64() || stop->is_uint64())
      stop_kind = 'i';
    else if (stop->is_string())
      stop_kind = 's';
    else
      return reader.malformed(path + ".stop_reason is " + kind_of(*stop)
                              + ", expected an integer, a string or null");
  }
  const std::string_view finish_text = finish->get_string().value_unsafe();
  result.finish = map_finish_reason(finish_text, stop_kind);
  if (result.finish == finish_reason::error)
    result.error = "the server ended the completion with finish_reason \""
                   + std::string{finish_text} + "\"";
  // The sampled tokens and their log-probabilities.
  auto logprobs = present(choice, "logprobs");
  if (!logprobs)
    return reader.malformed(path + ".logprobs is missing or null: the server returned no "
                                   "log-probabilities for the sampled tokens");
  auto sampled = read_logprobs(*logprobs, path + ".logprobs", reader);
  if (!sampled)
    return sampled.error();
  result.logprobs = std::move(sampled->logprobs);
  if (auto token_ids = present(choice, "token_ids")) {
    if (!token_ids->is_array())
      return reader.malformed(path + ".token_ids is " + kind_of(*token_ids)
                              + ", expected an array");
    size_t k = 0;
    for (element id : elements_of(*token_ids)) {
      int64_t value = 0;
      if (id.get_int64().get(value) || value < 0 || value > std::numeric_limits<int32_t>::max())
        return reader.malformed(path + ".token_ids[" + std::to_string(k) + "] is " + kind_of(id)
                                + ", expected a token id (an integer >= 0)");
      result.completion_tokens.push_back(static_cast<int32_t>(value));
      ++k;
    }
    if (result.completion_tokens.size() != result.logprobs.size())
      return reader.malformed(path + ".token_ids has " + std::to_string(k)
                              + " entries but the logprobs have "
                              + std::to_string(result.logprobs.size()));
  } else {
    const std::string tokens_path =
      path + ".logprobs." + (field(*logprobs, "content") ? "content[].token" : "tokens");
    auto ids = ids_of(sampled->texts, tokens_path, reader);
    if (!ids)
      return ids.error();
    result.completion_tokens = std::move(*ids);
  }
  if (ctx.require_token_ids && result.completion_tokens.size() != result.logprobs.size())
    return reader.malformed(path + ": the sampled tokens carry no token ids (require_token_ids "
                                   "is set; vLLM gives them with return_tokens_as_token_ids)");
  return result;
}

} // namespace

std::optional<int32_t> parse_token_id(std::string_view token) {
  const std::string_view prefix = "token_id:";
  if (token.size() <= prefix.size() || token.compare(0, prefix.size(), prefix) != 0)
    return std::nullopt;
  int64_t value = 0;
  for (char c : token.substr(prefix.size())) {
    if (c < '0' || c > '9')
      return std::nullopt;
    value = value * 10 + (c - '0');
    if (value > std::numeric_limits<int32_t>::max())
      return std::nullopt;
  }
  return static_cast<int32_t>(value);
}

finish_reason map_finish_reason(std::string_view finish, char stop_reason_kind) {
  if (finish == "length")
    return finish_reason::length;
  if (finish == "stop")
    return stop_reason_kind == 's' ? finish_reason::stop_string : finish_reason::stop_token;
  if (finish == "abort")
    return finish_reason::cancelled;
  return finish_reason::error;
}

std::optional<std::string> server_error_message(std::string_view body) {
  simdjson::dom::parser parser;
  simdjson::padded_string padded{body};
  element root;
  if (parser.parse(padded).get(root) || !root.is_object())
    return std::nullopt;
  auto text = [](std::optional<element> e) -> std::optional<std::string> {
    if (e && e->is_string())
      return std::string{e->get_string().value_unsafe()};
    return std::nullopt;
  };
  if (auto error = field(root, "error")) {
    if (auto s = text(error))
      return s;
    if (error->is_object())
      if (auto s = text(field(*error, "message")))
        return s;
  }
  if (auto s = text(field(root, "message")))
    return s;
  if (auto detail = field(root, "detail")) {
    if (auto s = text(detail))
      return s;
    if (detail->is_array()) {
      std::string joined;
      for (element item : elements_of(*detail)) {
        if (!item.is_object())
          continue;
        if (auto s = text(field(item, "msg"))) {
          if (!joined.empty())
            joined += "; ";
          joined += *s;
        }
      }
      if (!joined.empty())
        return joined;
    }
  }
  return std::nullopt;
}

caf::expected<std::string> build_request_body(const generation_request& request,
                                              const request_shape& shape) {
  const auto& p = request.params;
  auto refuse = [&](const std::string& what) {
    return make_error(errc::invalid_argument,
                      "generation request " + std::to_string(request.id)
                        + (request.trace.empty() ? "" : " (" + request.trace + ")") + ": " + what);
  };
  if (p.max_new_tokens < 1)
    return refuse("max_new_tokens must be >= 1, got " + std::to_string(p.max_new_tokens));
  if (!std::isfinite(p.temperature) || p.temperature < 0)
    return refuse("temperature must be >= 0, got " + number_text(p.temperature));
  if (!std::isfinite(p.top_p) || p.top_p <= 0 || p.top_p > 1)
    return refuse("top_p must be in (0, 1], got " + number_text(p.top_p));
  if (shape.n < 1)
    return refuse("n must be >= 1, got " + std::to_string(shape.n));
  if (request.prompt_text.empty() && request.prompt_tokens.empty())
    return refuse("it has no prompt (neither prompt_text nor prompt_tokens)");
  json_writer w;
  w.begin_object();
  w.field("model", shape.model);
  if (shape.api == remote_api::chat) {
    if (request.prompt_text.empty())
      return refuse("the chat endpoint needs prompt_text, and this request has only "
                    "prompt_tokens (use the completions endpoint for token prompts)");
    w.key("messages").begin_array();
    w.begin_object().field("role", "user").field("content", request.prompt_text).end_object();
    w.end_array();
    w.field("logprobs", true);
    w.field("top_logprobs", shape.top_logprobs);
  } else {
    if (shape.token_prompt && !request.prompt_tokens.empty()) {
      w.key("prompt").begin_array();
      for (int32_t id : request.prompt_tokens)
        w.value(id);
      w.end_array();
    } else if (!request.prompt_text.empty()) {
      w.field("prompt", request.prompt_text);
    } else {
      return refuse("it has only prompt_tokens, and token prompts are off "
                    "(use_token_prompts = false, or the server refused them)");
    }
    w.field("logprobs", shape.top_logprobs);
  }
  w.field("max_tokens", p.max_new_tokens);
  w.field("temperature", p.temperature);
  w.field("top_p", p.top_p);
  if (p.top_k > 0)
    w.field("top_k", p.top_k);
  w.field("n", shape.n);
  w.field("seed", static_cast<int64_t>(p.seed & 0x7fffffffffffffffull));
  if (!p.stop_strings.empty()) {
    w.key("stop").begin_array();
    for (const auto& s : p.stop_strings)
      w.value(s);
    w.end_array();
  }
  if (!p.stop_token_ids.empty()) {
    w.key("stop_token_ids").begin_array();
    for (int32_t id : p.stop_token_ids)
      w.value(id);
    w.end_array();
  }
  if (shape.request_token_ids)
    w.field("return_tokens_as_token_ids", true);
  w.field("stream", false);
  w.end_object();
  return w.str();
}

caf::expected<std::vector<generation_result>> parse_generation_reply(std::string_view body,
                                                                     const reply_context& ctx) {
  reply_reader reader{body, ctx.url, ctx.status, ctx.excerpt_bytes};
  auto root = reader.parse_object();
  if (!root)
    return root.error();
  auto choices = field(*root, "choices");
  if (!choices)
    return reader.malformed("it has no \"choices\"");
  if (!choices->is_array())
    return reader.malformed("choices is " + kind_of(*choices) + ", expected an array");
  int32_t prompt_tokens = ctx.prompt_token_count;
  if (auto usage = present(*root, "usage")) {
    int64_t count = 0;
    if (usage->is_object())
      if (auto pt = present(*usage, "prompt_tokens"); pt && !pt->get_int64().get(count))
        prompt_tokens = static_cast<int32_t>(count);
  }
  std::vector<std::pair<int64_t, generation_result>> indexed;
  size_t position = 0;
  for (element choice : elements_of(*choices)) {
    int64_t index = 0;
    auto result = read_choice(choice, position++, ctx, reader, index);
    if (!result)
      return result.error();
    result->prompt_token_count = prompt_tokens;
    indexed.emplace_back(index, std::move(*result));
  }
  if (indexed.empty())
    return reader.malformed("choices is empty");
  std::stable_sort(indexed.begin(), indexed.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<generation_result> out;
  out.reserve(indexed.size());
  for (auto& [index, result] : indexed)
    out.push_back(std::move(result));
  return out;
}

caf::expected<std::vector<std::string>> parse_model_list(std::string_view body,
                                                         const std::string& url, long status,
                                                         size_t excerpt_bytes) {
  reply_reader reader{body, url, status, excerpt_bytes};
  auto root = reader.parse_object();
  if (!root)
    return root.error();
  auto data = field(*root, "data");
  if (!data || !data->is_array())
    return reader.malformed("data is " + (data ? kind_of(*data) : std::string{"missing"})
                            + ", expected an array of models");
  std::vector<std::string> ids;
  size_t k = 0;
  for (element model : elements_of(*data)) {
    const std::string path = "data[" + std::to_string(k++) + "]";
    auto id = model.is_object() ? field(model, "id") : std::nullopt;
    if (!id || !id->is_string())
      return reader.malformed(path + ".id is " + (id ? kind_of(*id) : std::string{"missing"})
                              + ", expected a string");
    ids.emplace_back(id->get_string().value_unsafe());
  }
  return ids;
}

} // namespace kbrl::remote
