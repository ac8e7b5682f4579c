#pragma once
// Embeddings from a decoder checkpoint run by kbrl's own transformer (runtime/model): code
// embedding models such as bge-code-v1 and nomic-embed-code are Qwen2 decoders whose embedding
// is the final hidden state of the last token (or the mean over the tokens).
//
//   text -> tokenizer (added tokens not recognised in the text) -> cut to max_tokens
//        -> + end-of-sequence token (append_eos) -> transformer::forward -> hidden [seq, H]
//        -> pool: last real token, or mean over real tokens -> unit length
//
// Batches are right-padded; with the causal mask, real tokens never see the padding, so a text
// embeds the same alone or in a batch (up to float rounding).
// Runs on the CPU or a CUDA device, in float32 or bfloat16 (pooling and normalisation in
// float32).

#include "runtime/retrieval/embedder.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kbrl::retrieval {

/// Settings of a model_embedder.
struct model_embedder_options {
  /// Model directory in Hugging Face layout (config.json, safetensors, tokenizer.json).
  /// Required.
  std::string path;
  /// "last" (the last real token's hidden state) or "mean" (the mean over real tokens).
  /// Default "last", as bge-code-v1 and nomic-embed-code are trained.
  std::string pooling = "last";
  /// "cpu", "cuda" or "cuda:N". Default "cpu".
  std::string device = "cpu";
  /// "fp32" or "bf16". Default "fp32".
  std::string dtype = "fp32";
  /// Texts per forward pass. 1..1024. Default 8.
  int32_t batch_size = 8;
  /// Tokens kept per text (the first ones), the end-of-sequence token included. 2..131072.
  /// Default 1024.
  int32_t max_tokens = 1024;
  /// Append the tokenizer's end-of-sequence token (tokenizer_config.json's eos_token, else the
  /// model's first eos id) to every text, as last-token embedders expect. Default true.
  bool append_eos = true;
};

/// An embedder running a local checkpoint. Not thread-safe (one embed() at a time).
class model_embedder final : public embedder {
public:
  /// Loads the model and tokenizer. Fails with the model loader's or tokenizer's errors, or
  /// errc::invalid_config naming the option for a bad pooling, device, dtype or size.
  static caf::expected<std::unique_ptr<model_embedder>> load(const model_embedder_options& options);

  ~model_embedder() override;

  /// ("model", the directory's name, pooling, hidden size).
  embedder_identity identity() const override;

  /// Fails with errc::internal carrying libtorch's message if a forward pass throws (e.g. out of
  /// device memory).
  caf::expected<std::vector<float>> embed(const std::vector<std::string>& texts) override;

  /// The token ids a text is embedded from (cut and with the end token), for tests and tools.
  std::vector<int32_t> token_ids(const std::string& text) const;

private:
  struct impl;
  explicit model_embedder(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

/// Lets make_embedder() (embedder_spec.hpp) load model:PATH embedders in this program. Called
/// once at start by every program that links kbrl's torch library and offers retrieval.
void install_model_embedder();

} // namespace kbrl::retrieval
