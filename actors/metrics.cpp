#include "actors/metrics.hpp"

#include "runtime/io/json_writer.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <filesystem>

namespace kbrl {

std::string metric_json_line(const metric_record& r) {
  json_writer w;
  w.begin_object()
    .field("step", r.step)
    .field("name", r.name)
    .field("value", r.value)
    .field("unix_ms", r.unix_ms)
    .field("source", r.source);
  if (!r.samples.empty()) {
    w.key("samples").begin_array();
    for (double x : r.samples)
      w.value(x);
    w.end_array();
  }
  w.end_object();
  return w.str();
}

namespace {

/// The batch in TensorBoard: per step, one event of scalars and one of histograms.
void write_tensorboard(metrics_pointer self, const std::vector<metric_record>& batch) {
  auto& st = self->state;
  if (batch.empty() || !st.tensorboard_error.empty())
    return;
  auto fail = [&](const caf::error& err) {
    st.tensorboard_error = describe(err);
    st.stats.last_error = st.tensorboard_error;
    spdlog::error("metrics: no more TensorBoard events: {}", st.tensorboard_error);
  };
  if (!st.tensorboard) {
    auto w = report::tfevents_writer::create(st.tensorboard_dir, "kbrl");
    if (!w)
      return fail(w.error());
    st.tensorboard.emplace(std::move(*w));
    uint64_t first = batch.front().step;
    for (auto& r : batch)
      first = std::min(first, r.step);
    if (auto ok = st.tensorboard->write_session_start(static_cast<int64_t>(first)); !ok)
      return fail(ok.error());
  }
  std::map<uint64_t, std::vector<std::pair<std::string, double>>> scalars;
  std::map<uint64_t, std::vector<std::pair<std::string, report::histogram>>> histograms;
  for (auto& r : batch) {
    if (r.samples.empty())
      scalars[r.step].emplace_back(r.name, r.value);
    else
      histograms[r.step].emplace_back(r.name, report::make_histogram(r.samples));
  }
  for (auto& [step, values] : scalars)
    if (auto ok = st.tensorboard->write_scalars(static_cast<int64_t>(step), values); !ok)
      return fail(ok.error());
  for (auto& [step, values] : histograms)
    if (auto ok = st.tensorboard->write_histograms(static_cast<int64_t>(step), values); !ok)
      return fail(ok.error());
}

} // namespace

metrics_actor::behavior_type metrics_sink(metrics_pointer self, actor_stats stats,
                                          std::string path) {
  auto& st = self->state;
  st.stats = std::move(stats);
  st.path = std::move(path);
  st.tensorboard_dir =
    (std::filesystem::path(st.path).parent_path() / "tensorboard").string();
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
      std::vector<status_detail> details{
        {"file", st.path},
        {"records written", std::to_string(st.records)},
        {"tensorboard", !st.tensorboard_error.empty() ? "failed: " + st.tensorboard_error
                        : st.tensorboard              ? st.tensorboard->path()
                                                      : st.tensorboard_dir + " (no events yet)"}};
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
      write_tensorboard(self, batch);
    },
  };
}

} // namespace kbrl
