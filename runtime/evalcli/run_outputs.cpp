#include "runtime/evalcli/run_outputs.hpp"

#include "runtime/eval/answer_parsing.hpp"
#include "runtime/io/file_io.hpp"
#include "runtime/report/html_report.hpp"
#include "runtime/report/tfevents_writer.hpp"

#include <cstdio>
#include <filesystem>

namespace kbrl::evalcli {

namespace fs = std::filesystem;

caf::expected<void> write_run_outputs(const std::string& output_dir, const report::run_info& info,
                                      const report::eval_metrics& metrics,
                                      const std::vector<report::sample_record>& records,
                                      const std::string& sources_root) {
  const fs::path out(output_dir);
  if (auto ok = report::write_file_atomically((out / "results.json").string(),
                                              report::results_json(info, metrics, records));
      !ok)
    return ok;
  // Each sample's program for the report: its file, or the code taken out of an answer.
  report::source_reader source;
  if (!sources_root.empty())
    source = [root = fs::path(sources_root)](const report::sample_record& r) -> std::string {
      if (r.source.empty())
        return "";
      auto text = io::read_text_file(root / r.source);
      if (!text)
        return "";
      if (r.extraction.empty() || r.extraction == "file")
        return *text;
      auto found = eval::extract_kernel_code(*text);
      return found ? found->code : *text;
    };
  return report::write_file_atomically((out / "report.html").string(),
                                       report::render_html_report(info, metrics, records, source));
}

caf::expected<std::string> log_to_tensorboard(const tensorboard_target& target,
                                              const report::eval_metrics& metrics) {
  auto writer = report::tfevents_writer::create(target.log_dir, "kbrl-eval");
  if (!writer)
    return writer.error();
  if (auto ok = writer->write_scalars(target.step, report::metric_scalars(metrics)); !ok)
    return ok.error();
  return writer->path();
}

void print_summary(const report::eval_metrics& m, const std::string& reference) {
  auto line = [&](const report::metric_group& g) {
    std::printf("%-8s %4zu problems %5zu samples  correct %5.1f%%", g.name.c_str(), g.problems,
                g.samples, 100 * g.correct_rate);
    for (size_t k = 0; k < g.pass_at_k.size() && k < 3; ++k)
      std::printf("  pass@%zu %5.1f%%", k + 1, 100 * g.pass_at_k[k]);
    for (size_t i = 0; i < m.thresholds.size(); ++i)
      if (m.thresholds[i] == 1.0 || m.thresholds[i] == 2.0 || m.thresholds[i] == 0.0)
        std::printf("  %s %5.1f%%", report::fast_p_name(m.thresholds[i]).c_str(),
                    100 * g.fast_p[i]);
    std::printf("  geomean %.2fx\n", g.geomean_speedup);
    // KernelBench's own verdict (allclose only) beside it, the numbers comparable with its own.
    std::printf("%-8s %28s KernelBench %5.1f%%", "", "", 100 * g.kernelbench_correct_rate);
    for (size_t k = 0; k < g.kernelbench_pass_at_k.size() && k < 3; ++k)
      std::printf("  pass@%zu %5.1f%%", k + 1, 100 * g.kernelbench_pass_at_k[k]);
    for (size_t i = 0; i < m.thresholds.size() && i < g.kernelbench_fast_p.size(); ++i)
      if (m.thresholds[i] == 1.0 || m.thresholds[i] == 2.0 || m.thresholds[i] == 0.0)
        std::printf("  %s %5.1f%%", report::fast_p_name(m.thresholds[i]).c_str(),
                    100 * g.kernelbench_fast_p[i]);
    std::printf("\n");
  };
  line(m.overall);
  for (auto& g : m.levels)
    line(g);
  if (!m.turns.empty())
    std::printf("per turn (each sample's best turn so far):\n");
  for (auto& g : m.turns)
    line(g);
  std::printf("speedups against %s\n", reference == "compile"
                                          ? "torch.compile of the reference (default mode)"
                                          : "the eager PyTorch reference");
}

} // namespace kbrl::evalcli
