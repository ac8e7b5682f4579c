#pragma once
// Embeddings of PyTorch programs, three ways behind one interface:
//
//   builtin  lexical_embedder.hpp: code features, TF-IDF weighted, hashed; no model, the default
//   http     http_embedder.hpp: an OpenAI-compatible /v1/embeddings server (text-embeddings-
//            inference, vLLM)
//   model    model_embedder.hpp: a decoder checkpoint run by kbrl's own transformer (bge-code-v1
//            and nomic-embed-code are Qwen2-based), last-token or mean pooling
//
// Every embedder returns unit-length vectors, so the inner product is the cosine similarity.
// Vectors of two embedders are not comparable: an index records the identity of the embedder
// that built it and refuses queries from another (check_compatible()).

#include <caf/expected.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kbrl::retrieval {

/// What makes two embedders' vectors comparable.
struct embedder_identity {
  std::string kind;       ///< "builtin", "http" or "model"
  std::string model;      ///< builtin: "lexical-v1"; http: the model name (the URL when none is
                          ///< sent); model: the checkpoint directory's name
  std::string pooling;    ///< model: "last" or "mean"; else ""
  int32_t dimension = 0;  ///< 0 while unknown (an http embedder before its first reply)

  /// "builtin lexical-v1, dimension 512", "model bge-code-v1 (last-token pooling), ...".
  std::string describe() const;
};

/// Succeeds when vectors of `query` can be searched in an index built by `index`: same kind,
/// model and pooling, and the same dimension (a query dimension of 0 is not checked). Fails with
/// errc::invalid_argument naming `index_dir`, both embedders and what to do.
caf::expected<void> check_compatible(const embedder_identity& index,
                                     const embedder_identity& query,
                                     const std::string& index_dir);

/// Turns texts into unit-length vectors. Implementations are not required to be thread-safe:
/// one caller at a time.
class embedder {
public:
  virtual ~embedder() = default;

  /// What the vectors are comparable with.
  virtual embedder_identity identity() const = 0;

  /// The vectors of `texts`: texts.size() rows of identity().dimension floats, row i for text i,
  /// each of unit length (an empty text may give a zero row). Errors depend on the embedder (a
  /// server's reply, a model's failure) and name what failed.
  virtual caf::expected<std::vector<float>> embed(const std::vector<std::string>& texts) = 0;
};

/// Scales each row of `rows` (row length `dimension`) to unit length; zero rows stay zero.
void normalize_rows(std::vector<float>& rows, int32_t dimension);

} // namespace kbrl::retrieval
