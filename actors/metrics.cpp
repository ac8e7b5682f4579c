#include "actors/metrics.hpp"

#include "runtime/io/json_writer.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

namespace kbrl {

std::string metric_json_line(const metric_record& r) {
  json_writer w;
  w.begin_object()
    .field("step", r.step)
    .field("name", r.name)
    .field("value", r.value)
    .field("unix_ms", r.unix_ms)
    .field("source", r.source)
    .end_object();
  return w.str();
}

metrics_actor::behavior_type metrics_sink(metrics_pointer self, actor_stats stats,
                                          std::string path) {
  auto& st = self->state;
  st.stats = std::move(stats);
  st.path = std::move(path);
  st.out.open(st.path, std::ios::app);
  if (!st.out) {
    auto err = make_error(errc::io_failure, "cannot open " + st.path + " for appending");
    spdlog::error("{}", describe(err));
    self->quit(err);
    return metrics_actor::behavior_type::make_empty_behavior();
  }
  return {
    [self](status_atom) -> actor_status {
      auto& st = self->state;
      st.stats.count();
      std::vector<status_detail> details{{"file", st.path},
                                         {"records written", std::to_string(st.records)}};
      for (auto& [name, rec] : st.latest)
        details.push_back({name, std::to_string(rec.value) + " (step "
                                   + std::to_string(rec.step) + ")"});
      return st.stats.snapshot("writing", self->mailbox().size(), std::move(details));
    },
    [self](control_atom, const std::string& verb,
           const std::vector<std::string>&) -> caf::result<std::string> {
      self->state.stats.count();
      return no_control_verbs(self->state.stats.name, verb);
    },
    [self](metrics_atom, const std::vector<metric_record>& batch) {
      auto& st = self->state;
      st.stats.count();
      for (auto& r : batch) {
        st.out << metric_json_line(r) << '\n';
        st.latest[r.name] = r;
      }
      st.out.flush();
      st.records += batch.size();
      if (!st.out) {
        st.stats.last_error = "write to " + st.path + " failed";
        spdlog::error("metrics: {}", st.stats.last_error);
        st.out.clear();
      }
    },
  };
}

} // namespace kbrl
