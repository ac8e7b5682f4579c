#pragma once
// Which embedder to use, as users write it on the command line and in the run config:
//
//   builtin         the lexical embedder (no model; the default)
//   http:URL        an OpenAI-compatible /v1/embeddings server at URL (http://host:port)
//   model:PATH      a decoder checkpoint directory run by kbrl's transformer
//
// plus the settings each needs beyond its location.

#include "runtime/retrieval/embedder.hpp"
#include "runtime/retrieval/http_embedder.hpp"
#include "runtime/retrieval/lexical_embedder.hpp"
#include "runtime/retrieval/model_embedder.hpp"

#include <caf/expected.hpp>

#include <memory>
#include <string>

namespace kbrl::retrieval {

/// A parsed embedder choice.
struct embedder_spec {
  std::string kind;      ///< "builtin", "http" or "model"
  std::string location;  ///< the URL (http) or the directory (model); "" for builtin
};

/// Parses "builtin", "http:URL" or "model:PATH". Fails with errc::invalid_argument saying the
/// three forms.
caf::expected<embedder_spec> parse_embedder_spec(const std::string& text);

/// The text parse_embedder_spec() reads back.
std::string to_string(const embedder_spec& spec);

/// What each kind needs besides its location.
struct embedder_settings {
  /// Buckets of the built-in embedding. 8..65536. Default 512.
  int32_t builtin_dimension = lexical_embedder::default_dimension;
  /// The http embedder's settings; base_url is taken from the spec.
  http_embedder_options http;
  /// The model embedder's settings; path is taken from the spec.
  model_embedder_options model;
};

/// How a model embedder is loaded. kbrl's torch library has the loader (model_embedder.hpp:
/// install_model_embedder()); programs that offer model:PATH install it at start, so that this
/// file, the index and the retriever stay free of torch.
using model_embedder_loader =
  caf::expected<std::unique_ptr<embedder>> (*)(const model_embedder_options& options);

/// Installs the loader make_embedder() uses for model:PATH (the last one installed wins).
void set_model_embedder_loader(model_embedder_loader loader);

/// An embedder as `spec` says. The built-in one weighs features with `idf` (the corpus's when
/// building, the index's when querying). Fails with the embedder's own errors; model:PATH fails
/// with errc::not_supported in a program that installed no model loader.
caf::expected<std::unique_ptr<embedder>> make_embedder(const embedder_spec& spec,
                                                       embedder_settings settings,
                                                       idf_table idf = {});

} // namespace kbrl::retrieval
