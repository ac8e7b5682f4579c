#include "runtime/retrieval/embedder.hpp"

#include "messages/errors.hpp"

#include <cmath>

namespace kbrl::retrieval {

std::string embedder_identity::describe() const {
  std::string out = kind + " " + model;
  if (pooling == "last")
    out += " (last-token pooling)";
  else if (!pooling.empty())
    out += " (" + pooling + " pooling)";
  out += ", dimension " + (dimension > 0 ? std::to_string(dimension) : std::string{"unknown"});
  return out;
}

caf::expected<void> check_compatible(const embedder_identity& index,
                                     const embedder_identity& query,
                                     const std::string& index_dir) {
  const bool same = index.kind == query.kind && index.model == query.model
                    && index.pooling == query.pooling
                    && (query.dimension == 0 || index.dimension == query.dimension);
  if (same)
    return {};
  return make_error(errc::invalid_argument,
                    "index " + index_dir + " was built with the embedder " + index.describe()
                      + "; refusing to search it with " + query.describe()
                      + ": vectors of different embedders are not comparable (query with the "
                        "index's embedder, or rebuild the index with kbrl-index build "
                        "--embedder ...)");
}

void normalize_rows(std::vector<float>& rows, int32_t dimension) {
  if (dimension <= 0)
    return;
  const size_t d = static_cast<size_t>(dimension);
  for (size_t r = 0; r + d <= rows.size(); r += d) {
    double sum = 0;
    for (size_t j = 0; j < d; ++j)
      sum += static_cast<double>(rows[r + j]) * rows[r + j];
    if (sum <= 0)
      continue;
    const float scale = static_cast<float>(1.0 / std::sqrt(sum));
    for (size_t j = 0; j < d; ++j)
      rows[r + j] *= scale;
  }
}

} // namespace kbrl::retrieval
