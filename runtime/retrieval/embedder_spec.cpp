#include "runtime/retrieval/embedder_spec.hpp"

#include "messages/errors.hpp"

#include <atomic>

namespace kbrl::retrieval {

namespace {

std::atomic<model_embedder_loader> installed_model_loader{nullptr};

} // namespace

void set_model_embedder_loader(model_embedder_loader loader) {
  installed_model_loader.store(loader);
}

caf::expected<embedder_spec> parse_embedder_spec(const std::string& text) {
  if (text == "builtin")
    return embedder_spec{"builtin", ""};
  for (const char* kind : {"http", "model"}) {
    const std::string prefix = std::string{kind} + ":";
    if (text.rfind(prefix, 0) == 0 && text.size() > prefix.size()) {
      auto location = text.substr(prefix.size());
      if (std::string{kind} == "http" && location.rfind("http://", 0) != 0
          && location.rfind("https://", 0) != 0)
        break;
      return embedder_spec{kind, location};
    }
  }
  return make_error(errc::invalid_argument,
                    "embedder \"" + text
                      + "\": expected builtin, http:URL (an OpenAI-compatible embeddings "
                        "server, e.g. http:http://gpu-host:8080) or model:PATH (a model "
                        "directory)");
}

std::string to_string(const embedder_spec& spec) {
  return spec.kind == "builtin" ? spec.kind : spec.kind + ":" + spec.location;
}

caf::expected<std::unique_ptr<embedder>> make_embedder(const embedder_spec& spec,
                                                       embedder_settings settings,
                                                       idf_table idf) {
  if (spec.kind == "builtin") {
    if (settings.builtin_dimension < 8 || settings.builtin_dimension > 65536)
      return make_error(errc::invalid_config,
                        "builtin embedder: dimension " + std::to_string(settings.builtin_dimension)
                          + " is outside 8..65536");
    return std::unique_ptr<embedder>(
      std::make_unique<lexical_embedder>(std::move(idf), settings.builtin_dimension));
  }
  if (spec.kind == "http") {
    settings.http.base_url = spec.location;
    auto e = http_embedder::create(std::move(settings.http));
    if (!e)
      return std::move(e.error());
    return std::unique_ptr<embedder>(std::move(*e));
  }
  if (spec.kind == "model") {
    settings.model.path = spec.location;
    auto load = installed_model_loader.load();
    if (load == nullptr)
      return make_error(errc::not_supported,
                        "embedder model:" + spec.location
                          + ": this program runs no models (it was linked without kbrl's torch "
                            "library); use kbrl-index or kbrl-node");
    return load(settings.model);
  }
  return make_error(errc::invalid_argument, "unknown embedder kind \"" + spec.kind + "\"");
}

} // namespace kbrl::retrieval
