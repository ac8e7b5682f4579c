#pragma once
// Finding example kernels for a problem: the query side of an index.
//
//   problem's reference program -> embed (the index's embedder) -> nearest reference programs
//   -> skip the problem itself (leakage guard) -> per program, its best kernel of the wanted
//   backend (highest labelled speedup) -> the first k
//
// Leakage guard: an entry whose reference has the problem's normalised-source hash
// (problem::source_hash, or computed from its reference_source) or the problem's reference_key
// (the same program with other comments or spacing; source_keys.hpp) is never returned. When
// training on KernelBench with a corpus built from KernelBench solutions, the problem being
// solved cannot show the model its own solution.
//
// Not thread-safe: one query at a time (the retriever actor serialises them).

#include "messages/data.hpp"
#include "runtime/retrieval/embedder_spec.hpp"
#include "runtime/retrieval/index_store.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kbrl::retrieval {

/// How a retriever opens its index.
struct retriever_options {
  /// The index directory (kbrl-index build --output). Required.
  std::string index_dir;
  /// "" uses the embedder the index was built with; else a spec (embedder_spec.hpp) that must
  /// be the same embedder, reached elsewhere (another URL, another copy of the model).
  std::string embedder_spec;
  /// Settings of http and model embedders (timeouts, device, batch sizes).
  embedder_settings embedding;
  /// Search candidates (hnsw_options::ef_search); 0 keeps the index's.
  int32_t ef_search = 0;
};

/// One search.
struct retrieval_query {
  std::string reference_source;          ///< the program to find neighbours of
  std::string source_hash;               ///< problem::source_hash; "" computes it
  std::optional<kernel_backend> backend; ///< only kernels of this backend; nullopt: any
  int32_t k = 3;
  bool leakage_guard = true;             ///< false only to measure what the guard removes
};

/// A search hit: an entry and its reference program's similarity to the query.
struct retrieval_hit {
  uint32_t entry = 0;
  float score = 0;
};

/// Counters since the retriever was opened.
struct retriever_stats {
  uint64_t queries = 0;
  uint64_t failures = 0;
  uint64_t leaks_skipped = 0;   ///< reference programs skipped as the problem itself
  double total_seconds = 0;     ///< of successful queries
};

/// See the file comment.
class retriever {
public:
  /// Opens the index and its query embedder. Fails with kernel_index::open()'s and
  /// query_embedder()'s errors.
  static caf::expected<std::unique_ptr<retriever>> open(const retriever_options& options);

  /// The hits of `q`, best first, at most q.k, one per reference program. Fails with
  /// errc::invalid_argument for k < 1, and with the embedder's errors.
  caf::expected<std::vector<retrieval_hit>> search(const retrieval_query& q);

  /// The k nearest examples of the problem's backend, never the problem itself: search() with
  /// the problem's reference, hash and backend, then the sources read from the index.
  caf::expected<std::vector<retrieved_example>> retrieve(const problem& p, int32_t k);

  /// A hit as a message struct (sources read from disk).
  caf::expected<retrieved_example> example(const retrieval_hit& hit) const;

  const kernel_index& index() const { return index_; }
  const embedder& query_embedder() const { return *embedder_; }
  embedder& query_embedder() { return *embedder_; }
  const retriever_stats& stats() const { return stats_; }

private:
  retriever(kernel_index index, std::unique_ptr<embedder> emb);
  kernel_index index_;
  std::unique_ptr<embedder> embedder_;
  retriever_stats stats_;
};

} // namespace kbrl::retrieval
