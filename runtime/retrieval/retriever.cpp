#include "runtime/retrieval/retriever.hpp"

#include "messages/errors.hpp"
#include "runtime/retrieval/source_keys.hpp"

#include <algorithm>
#include <chrono>

namespace kbrl::retrieval {

retriever::retriever(kernel_index index, std::unique_ptr<embedder> emb)
    : index_(std::move(index)), embedder_(std::move(emb)) {}

caf::expected<std::unique_ptr<retriever>> retriever::open(const retriever_options& options) {
  if (options.index_dir.empty())
    return make_error(errc::invalid_config, "retriever: no index directory given");
  auto index = kernel_index::open(options.index_dir, options.ef_search);
  if (!index)
    return std::move(index.error());
  auto emb = index->query_embedder(options.embedder_spec, options.embedding);
  if (!emb)
    return std::move(emb.error());
  return std::unique_ptr<retriever>(new retriever(std::move(*index), std::move(*emb)));
}

caf::expected<std::vector<retrieval_hit>> retriever::search(const retrieval_query& q) {
  const auto start = std::chrono::steady_clock::now();
  if (q.k < 1) {
    ++stats_.failures;
    return make_error(errc::invalid_argument,
                      "retrieval: k must be at least 1, got " + std::to_string(q.k));
  }
  ++stats_.queries;
  auto vec = embedder_->embed({q.reference_source});
  if (!vec) {
    ++stats_.failures;
    return std::move(vec.error());
  }
  const auto dim = static_cast<size_t>(index_.manifest().embedder.dimension);
  if (vec->size() != dim) {
    ++stats_.failures;
    return make_error(errc::invalid_argument,
                      "retrieval: the query embedding has " + std::to_string(vec->size())
                        + " values, the index holds vectors of " + std::to_string(dim));
  }
  const std::string hash = q.source_hash.empty() ? reference_hash(q.reference_source)
                                                 : q.source_hash;
  const std::string key = q.reference_source.empty() ? std::string{}
                                                     : reference_key(q.reference_source);
  const auto& entries = index_.entries();
  const auto& groups = index_.groups();
  const size_t programs = groups.size();
  const size_t want = static_cast<size_t>(q.k);

  std::vector<retrieval_hit> hits;
  // Ask for more programs than needed (some are the problem itself or lack the backend), and
  // widen the search until enough are found or every program was seen.
  size_t asked = std::min(programs, want * 4 + 16);
  while (true) {
    hits.clear();
    uint64_t leaks = 0;
    for (const auto& n : index_.vectors().search(vec->data(), asked)) {
      const auto& members = groups[n.label];
      bool leak = false;
      const index_entry* best = nullptr;
      uint32_t best_index = 0;
      for (uint32_t m : members) {
        const auto& e = entries[m];
        if (q.leakage_guard && (e.reference_hash == hash || (!key.empty() && e.reference_key == key)))
          leak = true;
        if (q.backend && e.backend != *q.backend)
          continue;
        if (best == nullptr || e.speedup > best->speedup) {
          best = &e;
          best_index = m;
        }
      }
      if (leak) {
        ++leaks;
        continue;
      }
      if (best != nullptr)
        hits.push_back({best_index, n.score});
      if (hits.size() == want)
        break;
    }
    if (hits.size() == want || asked >= programs) {
      stats_.leaks_skipped += leaks;
      break;
    }
    asked = std::min(programs, asked * 4);
  }
  stats_.total_seconds +=
    std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return hits;
}

caf::expected<retrieved_example> retriever::example(const retrieval_hit& hit) const {
  const auto& e = index_.entries().at(hit.entry);
  auto reference = index_.reference_source(e);
  if (!reference)
    return std::move(reference.error());
  auto kernel = index_.kernel_source(e);
  if (!kernel)
    return std::move(kernel.error());
  retrieved_example x;
  x.id = e.id;
  x.reference_source = std::move(*reference);
  x.kernel_source = std::move(*kernel);
  x.backend = e.backend;
  x.score = hit.score;
  x.speedup = e.speedup;
  return x;
}

caf::expected<std::vector<retrieved_example>> retriever::retrieve(const problem& p, int32_t k) {
  retrieval_query q;
  q.reference_source = p.reference_source;
  q.source_hash = p.source_hash;
  q.backend = p.backend;
  q.k = k;
  auto hits = search(q);
  if (!hits)
    return std::move(hits.error());
  std::vector<retrieved_example> out;
  for (const auto& h : *hits) {
    auto x = example(h);
    if (!x) {
      ++stats_.failures;
      return std::move(x.error());
    }
    out.push_back(std::move(*x));
  }
  return out;
}

} // namespace kbrl::retrieval
