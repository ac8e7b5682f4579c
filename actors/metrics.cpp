#include "actors/metrics.hpp"

#include "runtime/config/settings.hpp"
#include "runtime/report/metrics_jsonl.hpp"
#include "runtime/report/run_hparams.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>

namespace kbrl {

metrics_state::~metrics_state() {
  for (auto& [step, records] : held)
    write_line(step, records);
}

void metrics_state::write_line(uint64_t step, const std::vector<metric_record>& records) {
  if (records.empty() || !out.is_open())
    return;
  int64_t unix_ms = 0;
  for (auto& r : records)
    unix_ms = std::max(unix_ms, r.unix_ms);
  out << report::metrics_line(step, unix_ms, records) << '\n';
  out.flush();
  ++lines;
  written.insert(step);
  if (!out) {
    stats.last_error = "write to " + path + " failed";
    spdlog::error("metrics: {}", stats.last_error);
    out.clear();
  }
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
    if (!st.run_config_toml.empty())
      if (auto run = config::run_config::parse(st.run_config_toml, "the run's config.toml")) {
        auto group = run->get_string("run.name");
        if (auto ok = st.tensorboard->write_hparams(report::hparams_of(*run), group); !ok)
          return fail(ok.error());
        if (auto ok = st.tensorboard->write_text(static_cast<int64_t>(first), "config",
                                                 report::config_markdown(st.run_config_toml));
            !ok)
          return fail(ok.error());
      }
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

/// Holds or writes the batch's records, step by step (see metrics.hpp).
void write_jsonl(metrics_pointer self, const std::vector<metric_record>& batch) {
  auto& st = self->state;
  std::map<uint64_t, std::vector<metric_record>> by_step;
  for (auto& r : batch)
    by_step[r.step].push_back(r);
  for (auto& [step, records] : by_step) {
    const bool committed =
      std::any_of(records.begin(), records.end(),
                  [](const metric_record& r) { return r.name == report::step_committed_metric; });
    if (committed || st.written.count(step)) {
      auto line = std::move(st.held[step]);
      st.held.erase(step);
      line.insert(line.end(), records.begin(), records.end());
      st.write_line(step, line);
    } else {
      auto& held = st.held[step];
      held.insert(held.end(), records.begin(), records.end());
    }
  }
}

} // namespace

metrics_actor::behavior_type metrics_sink(metrics_pointer self, actor_stats stats,
                                          std::string path, std::string run_config_toml) {
  auto& st = self->state;
  st.stats = std::move(stats);
  st.path = std::move(path);
  st.run_config_toml = std::move(run_config_toml);
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
        {"records", std::to_string(st.records)},
        {"lines written", std::to_string(st.lines)},
        {"steps held", std::to_string(st.held.size())},
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
      for (auto& r : batch)
        st.latest[r.name] = r;
      st.records += batch.size();
      write_jsonl(self, batch);
      write_tensorboard(self, batch);
    },
  };
}

} // namespace kbrl
