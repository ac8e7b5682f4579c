#pragma once
// The built-in embedding: no model, no server. A program's code features (code_features.hpp)
// are weighted by kind x (1 + ln count) x IDF, hashed into a fixed number of buckets with a sign
// drawn from the hash (collisions then cancel rather than pile up), and scaled to unit length.
// Two programs that apply the same operators in the same order, on inputs of the same rank,
// land close together whatever their variables are called.
//
// The IDF statistics come from the corpus when an index is built and are stored in the index
// (idf.bin), so a query is weighted exactly as the corpus was.
//
// idf.bin: "KBRLIDF1", uint64 documents, uint32 dimension, uint32 reserved (0), uint64 count,
// then `count` records of (uint64 feature hash, uint32 document frequency) sorted by hash; all
// little-endian. Features seen in one document only are left out (their frequency is taken as
// 1), which keeps the file small: names that occur once carry no shared signal anyway.

#include "runtime/retrieval/embedder.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kbrl::retrieval {

/// Document frequencies of code features over a corpus.
class idf_table {
public:
  /// An empty table (every feature weighs the same).
  idf_table() = default;

  /// Counts the features of `documents` using up to `threads` threads (0: all cores).
  static idf_table count(const std::vector<std::string>& documents, int threads = 0);

  /// ln((documents + 1) / (df + 1)) + 1, the smoothed inverse document frequency; a feature not
  /// in the table counts as df = 1.
  float idf(uint64_t feature_hash) const;

  uint64_t documents() const { return documents_; }
  size_t size() const { return frequencies_.size(); }

  /// Writes idf.bin (see the file comment) with `dimension` recorded. errc::io_failure naming
  /// the file if it cannot be written.
  caf::expected<void> save(const std::string& path, int32_t dimension) const;

  /// Reads idf.bin; the recorded dimension comes back with the table. Fails with
  /// errc::invalid_argument naming the file for a wrong magic, a size that does not match the
  /// count, or unsorted records; errc::io_failure if it cannot be read.
  static caf::expected<std::pair<idf_table, int32_t>> load(const std::string& path);

private:
  uint64_t documents_ = 0;
  std::vector<std::pair<uint64_t, uint32_t>> frequencies_; ///< sorted by hash
};

/// The built-in embedder. Thread-safe: embed() only reads.
class lexical_embedder final : public embedder {
public:
  /// The model name in identities and manifests; changes when the features or their weights do.
  static constexpr const char* model_name = "lexical-v1";

  /// Default number of buckets.
  static constexpr int32_t default_dimension = 512;

  /// Precondition: dimension >= 8.
  lexical_embedder(idf_table idf, int32_t dimension = default_dimension);

  embedder_identity identity() const override;
  caf::expected<std::vector<float>> embed(const std::vector<std::string>& texts) override;

  /// The unit-length vector of one text, written to `out` (dimension() floats).
  void embed_one(const std::string& text, float* out) const;

  int32_t dimension() const { return dimension_; }
  const idf_table& idf() const { return idf_; }

private:
  idf_table idf_;
  int32_t dimension_;
};

} // namespace kbrl::retrieval
