#include "runtime/retrieval/http_embedder.hpp"

#include "messages/errors.hpp"
#include "runtime/io/json_writer.hpp"
#include "runtime/remote/http_client.hpp"
#include "runtime/remote/openai_protocol.hpp"
#include "messages/error_codes.hpp"

#include <simdjson.h>

#include <cmath>
#include <cstdlib>
#include <future>

namespace kbrl::retrieval {

namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

constexpr size_t excerpt_bytes = 400;

/// `text` cut to at most `max_bytes` bytes without splitting a UTF-8 character.
std::string_view utf8_prefix(std::string_view text, size_t max_bytes) {
  if (max_bytes == 0 || text.size() <= max_bytes)
    return text;
  size_t n = max_bytes;
  while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80)
    --n; // text[n] continues a character: cut before that character starts
  return text.substr(0, n);
}

std::string request_body(const std::vector<std::string>& texts, size_t from, size_t to,
                         const http_embedder_options& o) {
  json_writer w;
  w.begin_object();
  w.key("input").begin_array();
  for (size_t i = from; i < to; ++i)
    w.value(utf8_prefix(texts[i], o.max_input_bytes));
  w.end_array();
  if (!o.model.empty())
    w.field("model", o.model);
  w.field("encoding_format", "float");
  w.end_object();
  return w.str();
}

} // namespace

caf::expected<void> validate(const http_embedder_options& o) {
  std::vector<std::string> problems;
  auto check = [&](bool ok, const std::string& field, const std::string& what) {
    if (!ok)
      problems.push_back("http_embedder_options." + field + ": " + what);
  };
  check(o.base_url.rfind("http://", 0) == 0 || o.base_url.rfind("https://", 0) == 0, "base_url",
        "expected \"http://host:port\" or \"https://...\", got \"" + o.base_url + "\"");
  check(o.batch_size >= 1 && o.batch_size <= 4096, "batch_size",
        "expected 1..4096, got " + std::to_string(o.batch_size));
  check(o.max_in_flight >= 1 && o.max_in_flight <= 256, "max_in_flight",
        "expected 1..256, got " + std::to_string(o.max_in_flight));
  check(o.connect_timeout_s > 0, "connect_timeout_s", "expected > 0");
  check(o.request_timeout_s > 0, "request_timeout_s", "expected > 0");
  check(o.dimension >= 0, "dimension", "expected >= 0 (0: learnt from the first reply)");
  check(o.retry.max_retries >= 0 && o.retry.initial_backoff_s > 0
          && o.retry.max_backoff_s >= o.retry.initial_backoff_s,
        "retry", "expected max_retries >= 0 and 0 < initial_backoff_s <= max_backoff_s");
  if (problems.empty())
    return {};
  std::string text;
  for (auto& p : problems)
    text += (text.empty() ? "" : "\n") + p;
  return make_error(errc::invalid_config, std::move(text));
}

caf::expected<std::vector<float>> parse_embedding_reply(std::string_view body,
                                                        size_t expected_count, int32_t dimension,
                                                        const std::string& url, long status) {
  auto fail = [&](const std::string& what) {
    return make_error(errc::io_failure, "POST " + url + " (HTTP " + std::to_string(status)
                                          + "): " + what + "; body: "
                                          + remote::body_excerpt(std::string{body},
                                                                 excerpt_bytes));
  };
  if (status != 200) {
    if (auto msg = remote::server_error_message(body))
      return make_error(errc::io_failure, "POST " + url + " answered HTTP "
                                            + std::to_string(status) + ": " + *msg);
    return fail("the server refused the request");
  }
  simdjson::dom::parser parser;
  element doc;
  if (auto err = parser.parse(body.data(), body.size()).get(doc))
    return fail(std::string{"the reply is not JSON ("} + simdjson::error_message(err) + ")");
  if (auto msg = remote::server_error_message(body); msg && doc["data"].error())
    return make_error(errc::io_failure, "POST " + url + ": the server answered an error: " + *msg);
  simdjson::dom::array data;
  if (doc["data"].get(data))
    return fail("the reply has no \"data\" array");
  if (data.size() != expected_count)
    return fail("the reply holds " + std::to_string(data.size()) + " embeddings for "
                + std::to_string(expected_count) + " inputs");
  std::vector<std::vector<float>> rows(expected_count);
  size_t position = 0;
  int32_t dim = dimension;
  for (element item : data) {
    const std::string path = "data[" + std::to_string(position) + "]";
    int64_t index = static_cast<int64_t>(position); // servers that leave index out keep order
    if (element idx; !item["index"].get(idx)) {
      if (idx.get(index))
        return fail(path + ".index is not an integer");
    }
    if (index < 0 || static_cast<size_t>(index) >= expected_count)
      return fail(path + ".index is " + std::to_string(index) + ", expected 0.."
                  + std::to_string(expected_count - 1));
    auto& row = rows[static_cast<size_t>(index)];
    if (!row.empty())
      return fail(path + ".index " + std::to_string(index) + " appears twice");
    simdjson::dom::array values;
    if (item["embedding"].get(values))
      return fail(path + ".embedding is missing or not an array of numbers (base64 encoding "
                         "is not read; kbrl asks for \"float\")");
    row.reserve(values.size());
    size_t j = 0;
    bool any_nonzero = false;
    for (element v : values) {
      double x = 0;
      if (v.get(x))
        return fail(path + ".embedding[" + std::to_string(j) + "] is not a number");
      if (!std::isfinite(x))
        return fail(path + ".embedding[" + std::to_string(j) + "] is not finite");
      any_nonzero = any_nonzero || x != 0;
      row.push_back(static_cast<float>(x));
      ++j;
    }
    if (row.empty())
      return fail(path + ".embedding is empty");
    if (dim == 0)
      dim = static_cast<int32_t>(row.size());
    if (static_cast<int32_t>(row.size()) != dim)
      return fail(path + ".embedding has " + std::to_string(row.size()) + " values, expected "
                  + std::to_string(dim) + (dimension == 0 ? " (as the first one)" : ""));
    if (!any_nonzero)
      return fail(path + ".embedding is all zeros");
    ++position;
  }
  std::vector<float> out;
  out.reserve(expected_count * static_cast<size_t>(dim));
  for (auto& r : rows)
    out.insert(out.end(), r.begin(), r.end());
  return out;
}

http_embedder::http_embedder(http_embedder_options options) : opts_(std::move(options)) {
  url_ = remote::normalized_base_url(opts_.base_url) + "/v1/embeddings";
  remote::http_client_options h;
  h.max_in_flight = opts_.max_in_flight;
  h.connect_timeout_s = opts_.connect_timeout_s;
  h.request_timeout_s = opts_.request_timeout_s;
  h.retry = opts_.retry;
  remote::remote_sampler_options key_source;
  key_source.api_key = opts_.api_key;
  h.bearer_token = remote::resolved_api_key(key_source);
  http_ = std::make_unique<remote::http_client>(std::move(h));
}

http_embedder::~http_embedder() = default;

caf::expected<std::unique_ptr<http_embedder>> http_embedder::create(http_embedder_options options) {
  if (auto ok = validate(options); !ok)
    return std::move(ok.error());
  return std::unique_ptr<http_embedder>(new http_embedder(std::move(options)));
}

embedder_identity http_embedder::identity() const {
  return {"http", opts_.model.empty() ? remote::normalized_base_url(opts_.base_url) : opts_.model,
          "", opts_.dimension};
}

caf::expected<std::vector<float>> http_embedder::embed(const std::vector<std::string>& texts) {
  if (texts.empty())
    return std::vector<float>{};
  const size_t batch = static_cast<size_t>(opts_.batch_size);
  std::vector<std::future<remote::http_reply>> replies;
  std::vector<std::pair<size_t, size_t>> spans;
  for (size_t from = 0; from < texts.size(); from += batch) {
    const size_t to = std::min(texts.size(), from + batch);
    auto promise = std::make_shared<std::promise<remote::http_reply>>();
    replies.push_back(promise->get_future());
    spans.emplace_back(from, to);
    remote::http_request req;
    req.method = "POST";
    req.url = url_;
    req.body = request_body(texts, from, to, opts_);
    http_->submit(std::move(req), [promise](remote::http_reply r) {
      promise->set_value(std::move(r));
    });
  }
  std::vector<float> out;
  caf::error first_error;
  for (size_t b = 0; b < replies.size(); ++b) {
    auto reply = replies[b].get(); // wait for all, also after a failure
    if (first_error)
      continue;
    const auto [from, to] = spans[b];
    const std::string where = " (texts " + std::to_string(from) + ".." + std::to_string(to - 1)
                              + ")";
    if (reply.error) {
      first_error = reworded(reply.error, "", where);
      continue;
    }
    auto rows = parse_embedding_reply(reply.body, to - from, opts_.dimension, url_, reply.status);
    if (!rows) {
      first_error = reworded(rows.error(), "", where);
      continue;
    }
    if (opts_.dimension == 0)
      opts_.dimension = static_cast<int32_t>(rows->size() / (to - from));
    out.insert(out.end(), rows->begin(), rows->end());
  }
  if (first_error)
    return first_error;
  normalize_rows(out, opts_.dimension);
  return out;
}

} // namespace kbrl::retrieval
