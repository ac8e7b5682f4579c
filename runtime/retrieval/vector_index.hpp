#pragma once
// Nearest-neighbour search over unit-length vectors: an hnswlib graph (HNSW, inner-product
// space, so the score is the cosine similarity), plus the exact brute-force search it is
// measured against.
//
// Labels are row numbers 0..size-1 of the vectors the index was built from. hnswlib reads its
// file without checking what it reads; load() checks the header against what the caller
// expects (dimension, count, layout) and the file's size before handing it over, and the index
// directory also checks the file's SHA-256 (index_store.hpp), so a damaged file is refused with
// an error instead of crashing a search.

#include <caf/expected.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace kbrl::retrieval {

/// How the graph is built and searched.
struct hnsw_options {
  /// Links per node (hnswlib's M); more gives better recall, a larger graph and a slower build.
  /// 2..200. Default 16.
  int32_t m = 16;
  /// Candidates kept while inserting; more gives a better graph and a slower build. >= m.
  /// Default 200.
  int32_t ef_construction = 200;
  /// Candidates kept while searching (at least k); more gives better recall, slower queries.
  /// >= 1. Default 64.
  int32_t ef_search = 64;
  /// Seed of the level draws, for reproducible graphs. Default 100.
  uint64_t seed = 100;
  /// Threads inserting at once while building; 0: every core. Default 0.
  int32_t threads = 0;
};

/// One search hit.
struct neighbor {
  uint32_t label = 0;  ///< row number of the vector
  float score = 0;     ///< inner product with the query (cosine similarity for unit vectors)
};

/// An HNSW graph over vectors. Movable, not copyable. search() may run on several threads at
/// once; nothing else may run concurrently with it.
class vector_index {
public:
  vector_index(vector_index&&) noexcept;
  vector_index& operator=(vector_index&&) noexcept;
  ~vector_index();

  /// Builds the graph over `rows` (rows.size() / dimension vectors of `dimension` floats).
  /// `progress` (optional) is called now and then with the number of vectors inserted, from
  /// the calling thread. Fails with errc::invalid_argument for an empty set, a bad dimension or
  /// out-of-range options.
  static caf::expected<vector_index> build(const std::vector<float>& rows, int32_t dimension,
                                           const hnsw_options& options,
                                           const std::function<void(size_t)>& progress = {});

  /// Writes the graph (hnswlib's format) to `path`. errc::io_failure naming it on failure.
  caf::expected<void> save(const std::string& path) const;

  /// Reads a graph written by save() that must hold `count` vectors of `dimension` floats;
  /// searches keep `ef_search` candidates. Fails with errc::invalid_argument naming the file
  /// and the first field that does not match (or errc::io_failure if it cannot be read).
  static caf::expected<vector_index> load(const std::string& path, int32_t dimension,
                                          size_t count, int32_t ef_search = 64);

  /// The `k` nearest vectors to `query` (dimension() floats), best first; fewer when the index
  /// is smaller. Approximate: see hnsw_options::ef_search.
  std::vector<neighbor> search(const float* query, size_t k) const;

  /// The vector stored for `label` (a copy). Precondition: label < size().
  std::vector<float> vector(uint32_t label) const;

  size_t size() const;
  int32_t dimension() const;

private:
  struct impl;
  explicit vector_index(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

/// The exact `k` nearest rows of `rows` to `query` by inner product, best first (ties by lower
/// label): the brute-force search HNSW approximates.
std::vector<neighbor> exact_search(const std::vector<float>& rows, int32_t dimension,
                                   const float* query, size_t k);

} // namespace kbrl::retrieval
