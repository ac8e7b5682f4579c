#include "actors/retriever.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>

namespace kbrl {

namespace {

std::string fixed(double x, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return buf;
}

/// Opens the index named by the state's options; on success replaces the current one.
caf::error open_index(retriever_state& st) {
  auto opened = retrieval::retriever::open(st.options);
  if (!opened)
    return std::move(opened.error());
  st.retriever = std::move(*opened);
  st.open_failure = caf::error{};
  const auto& m = st.retriever->index().manifest();
  spdlog::info("{} serves {} examples ({} reference programs) from {}, embedder {}",
               st.stats.name, m.entries, m.references, st.options.index_dir,
               m.embedder.describe());
  return {};
}

std::vector<status_detail> retriever_details(const retriever_state& st) {
  std::vector<status_detail> d;
  d.push_back({"index", st.options.index_dir.empty() ? "(none)" : st.options.index_dir});
  if (!st.retriever) {
    d.push_back({"error", describe(st.open_failure)});
    return d;
  }
  const auto& m = st.retriever->index().manifest();
  d.push_back({"embedder", m.embedder.describe()});
  d.push_back({"entries", std::to_string(m.entries)});
  d.push_back({"reference programs", std::to_string(m.references)});
  d.push_back({"k", std::to_string(st.settings.k)});
  d.push_back({"queries", std::to_string(st.queries)});
  d.push_back({"mean latency (ms)",
               st.queries == 0 ? "-" : fixed(1000.0 * st.total_seconds / st.queries, 2)});
  d.push_back({"failures", std::to_string(st.failures)});
  d.push_back({"problems kept out (leakage guard)",
               std::to_string(st.retriever->stats().leaks_skipped)});
  return d;
}

} // namespace

retriever_actor::behavior_type retriever(retriever_pointer self, actor_stats stats,
                                         retrieval::retrieval_settings settings,
                                         retrieval::retriever_options options) {
  auto& st = self->state;
  st.stats = std::move(stats);
  st.settings = std::move(settings);
  st.options = std::move(options);
  if (auto err = open_index(st)) {
    st.open_failure = err;
    st.stats.last_error = describe(err);
    spdlog::error("{} has no index, every request will fail: {}", st.stats.name,
                  st.stats.last_error);
  }
  return {
    [self](status_atom) -> actor_status {
      auto& st = self->state;
      st.stats.count();
      return st.stats.snapshot(st.retriever ? actor_health::ok : actor_health::failed,
                               st.retriever ? "ready" : "failed", self->mailbox().size(),
                               retriever_details(st), {"reload"});
    },
    [self](control_atom, const std::string& verb,
           const std::vector<std::string>& args) -> caf::result<std::string> {
      auto& st = self->state;
      st.stats.count();
      if (verb != "reload")
        return make_error(errc::not_supported,
                          st.stats.name + " accepts the control verb reload, got '" + verb + "'");
      if (!args.empty())
        return make_error(errc::invalid_argument, "reload takes no arguments");
      if (auto err = open_index(st)) {
        st.stats.last_error = describe(err);
        if (!st.retriever)
          st.open_failure = err;
        return err;
      }
      return "reloaded " + st.options.index_dir + " on " + st.stats.name + ": "
             + std::to_string(st.retriever->index().manifest().entries) + " examples";
    },
    [self](retrieve_atom, const problem& p,
           int32_t k) -> caf::result<std::vector<retrieved_example>> {
      auto& st = self->state;
      st.stats.count();
      if (!st.retriever) {
        ++st.failures;
        return st.open_failure;
      }
      if (k <= 0)
        k = st.settings.k;
      if (k > max_retrieved_examples) {
        ++st.failures;
        return make_error(errc::invalid_argument,
                          "retrieve: k is " + std::to_string(k) + ", at most "
                            + std::to_string(max_retrieved_examples) + " examples are served");
      }
      const auto start = std::chrono::steady_clock::now();
      caf::expected<std::vector<retrieved_example>> found = std::vector<retrieved_example>{};
      try {
        found = st.retriever->retrieve(p, k);
      } catch (const std::exception& e) { // an embedder's library failing: answer, stay up
        found = make_error(errc::internal, st.stats.name + ": retrieval failed: " + e.what());
      }
      if (!found) {
        ++st.failures;
        st.stats.last_error = describe(found.error());
        return std::move(found.error());
      }
      ++st.queries;
      st.total_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      return std::move(*found);
    },
  };
}

} // namespace kbrl
