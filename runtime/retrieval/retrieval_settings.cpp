#include "runtime/retrieval/retrieval_settings.hpp"

#include "runtime/config/settings.hpp"

namespace kbrl::retrieval {

retrieval_settings retrieval_settings_from(const config::run_config& config) {
  retrieval_settings s;
  s.index_dir = config.get_string("retrieval.index_dir");
  s.k = static_cast<int32_t>(config.get_int("retrieval.k"));
  s.token_budget = config.get_int("retrieval.token_budget");
  s.embedder = config.get_string("retrieval.embedder");
  return s;
}

retriever_options retriever_options_from(const retrieval_settings& settings) {
  retriever_options o;
  o.index_dir = settings.index_dir;
  o.embedder_spec = settings.embedder;
  return o;
}

} // namespace kbrl::retrieval
