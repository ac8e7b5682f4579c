#pragma once
// Embeddings from an OpenAI-compatible server: POST /v1/embeddings as text-embeddings-inference
// (TEI) and vLLM (--task embed) serve it.
//
//   request   {"input": ["text", ...], "model": "...", "encoding_format": "float"}
//             (model left out when none is configured: TEI and one-model vLLM servers take that)
//   reply     {"data": [{"index": 0, "embedding": [0.1, ...]}, ...], ...}
//
// Texts go in batches of batch_size, up to max_in_flight batches on the wire at once, through
// runtime/remote/http_client.hpp (kept-alive connections, retries with back-off on connection
// failures, 429 and 5xx). Every reply is checked: one embedding per input, indices 0..n-1 each
// once, every vector of the same, expected dimension, finite and not all zero. The vectors are
// scaled to unit length (servers differ on whether they normalise).

#include "runtime/remote/remote_options.hpp"
#include "runtime/retrieval/embedder.hpp"

#include <caf/expected.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kbrl::remote {
class http_client;
}

namespace kbrl::retrieval {

/// Settings of an http_embedder.
struct http_embedder_options {
  /// Server root, "http://host:port" (a trailing "/" or "/v1" is dropped). Required.
  std::string base_url;
  /// The `model` field; empty: not sent. Default empty.
  std::string model;
  /// Sent as "Authorization: Bearer <key>"; empty: OPENAI_API_KEY when set. Default empty.
  std::string api_key;
  /// Texts per request. 1..4096. Default 32.
  int32_t batch_size = 32;
  /// Requests on the wire at once. 1..256. Default 4.
  int32_t max_in_flight = 4;
  /// Seconds to open a connection. > 0. Default 10.
  double connect_timeout_s = 10;
  /// Seconds one attempt may take. > 0. Default 120.
  double request_timeout_s = 120;
  /// Retry budget and spacing (remote_options.hpp).
  remote::retry_options retry;
  /// Expected vector length; 0: taken from the first reply, then required of every later one.
  /// Default 0.
  int32_t dimension = 0;
  /// Texts longer than this many bytes are cut (at a UTF-8 boundary) before sending, since
  /// servers refuse inputs beyond their model's context; 0: never cut. Default 32768.
  size_t max_input_bytes = 32768;
};

/// Checks the options; errc::invalid_config naming each wrong field, one per line.
caf::expected<void> validate(const http_embedder_options& options);

/// Reads one /v1/embeddings reply that must hold `expected_count` vectors (of `dimension`
/// floats unless it is 0). Returns them in input order, row after row, not normalised. Fails
/// with errc::io_failure naming `url`, the HTTP status and what is wrong (with its JSON path:
/// "data[2].embedding[5] is a string"), or the server's own message when the body is an error.
caf::expected<std::vector<float>> parse_embedding_reply(std::string_view body,
                                                        size_t expected_count, int32_t dimension,
                                                        const std::string& url, long status);

/// The embedder of an OpenAI-compatible server. Its identity is ("http", model or the URL when
/// no model is set, "", dimension once known).
class http_embedder final : public embedder {
public:
  /// Checks the options (no network yet).
  static caf::expected<std::unique_ptr<http_embedder>> create(http_embedder_options options);

  ~http_embedder() override;

  embedder_identity identity() const override;

  /// Sends every batch and waits for all. Fails with the first failed batch's error (HTTP
  /// failures name the URL, the status and the batch's first text index).
  caf::expected<std::vector<float>> embed(const std::vector<std::string>& texts) override;

  const http_embedder_options& options() const { return opts_; }

private:
  explicit http_embedder(http_embedder_options options);
  http_embedder_options opts_;
  std::string url_;
  std::unique_ptr<remote::http_client> http_;
};

} // namespace kbrl::retrieval
