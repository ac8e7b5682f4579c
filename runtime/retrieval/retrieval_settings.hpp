#pragma once
// The run config's retrieval.* keys (runtime/config/settings.cpp documents each) as a struct.

#include "runtime/retrieval/retriever.hpp"

#include <cstdint>
#include <string>

namespace kbrl::config {
class run_config;
}

namespace kbrl::retrieval {

/// What a run retrieves with.
struct retrieval_settings {
  /// retrieval.index_dir: the index directory; "" turns retrieval off.
  std::string index_dir;
  /// retrieval.k: examples per problem, 1..32.
  int32_t k = 3;
  /// retrieval.token_budget: prompt tokens for all examples together.
  int64_t token_budget = 3000;
  /// retrieval.embedder: "" (the index's) or an embedder spec.
  std::string embedder;

  bool enabled() const { return !index_dir.empty(); }
};

/// The retrieval.* values of `config`.
retrieval_settings retrieval_settings_from(const config::run_config& config);

/// How a retriever opens the index these settings name.
retriever_options retriever_options_from(const retrieval_settings& settings);

} // namespace kbrl::retrieval
