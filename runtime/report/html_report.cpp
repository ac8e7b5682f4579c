#include "runtime/report/html_report.hpp"

#include "runtime/tokenizer/unicode.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace kbrl::report {

namespace {

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string percent(double share) { return fmt("%.1f%%", 100.0 * share); }
std::string times(double speedup) { return speedup > 0 ? fmt("%.2fx", speedup) : "-"; }
std::string ms(double v) { return v > 0 ? fmt("%.4g", v) : "-"; }
std::string num(double v) { return fmt("%g", v); }

/// A table cell whose sort key is a number.
std::string cell(const std::string& text, double sort_key) {
  return "<td data-v=\"" + fmt("%.17g", sort_key) + "\">" + text + "</td>";
}
std::string cell(const std::string& text) { return "<td>" + text + "</td>"; }

const char* const style = R"(
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px auto;
       max-width: 1360px; padding: 0 16px; color: #1d2330; }
h1 { font-size: 22px; margin-bottom: 4px; } h2 { font-size: 17px; margin-top: 32px; }
table { border-collapse: collapse; margin: 8px 0; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #d5d9e2; padding: 3px 8px; text-align: right; vertical-align: top; }
th { background: #f0f2f6; cursor: pointer; white-space: nowrap; }
td:first-child, th:first-child { text-align: left; }
td.text { text-align: left; }
tr.group-all td { font-weight: 600; }
.meta td { text-align: left; border: none; padding: 1px 12px 1px 0; }
.meta td:first-child { color: #5b6476; }
.note { color: #5b6476; max-width: 900px; }
.ok { color: #17803d; } .bad { color: #b42318; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; max-width: 640px; margin: 0;
      font-size: 12px; text-align: left; }
.wide { overflow-x: auto; max-width: 100%; }
td.text { overflow-wrap: anywhere; max-width: 420px; }
td.long { min-width: 10em; max-width: 280px; }
details summary { cursor: pointer; color: #2f5bd3; }
svg text { font: 11px system-ui, sans-serif; fill: #1d2330; }
th[data-sort=asc]::after { content: " \25B2"; } th[data-sort=desc]::after { content: " \25BC"; }
)";

const char* const error_capture = R"(
window.addEventListener('error', function (e) {
  var h = document.documentElement;
  h.setAttribute('data-js-errors', (h.getAttribute('data-js-errors') || '') + e.message + '; ');
});
)";

const char* const page_script = R"(
(function () {
  function key(cell) {
    var v = cell.getAttribute('data-v');
    return v !== null ? parseFloat(v) : cell.textContent.trim().toLowerCase();
  }
  document.querySelectorAll('table.sortable').forEach(function (table) {
    var body = table.tBodies[0];
    table.querySelectorAll('thead th').forEach(function (th) {
      th.addEventListener('click', function () {
        var col = th.cellIndex, asc = th.getAttribute('data-sort') !== 'asc';
        table.querySelectorAll('thead th').forEach(function (o) { o.removeAttribute('data-sort'); });
        th.setAttribute('data-sort', asc ? 'asc' : 'desc');
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = key(a.cells[col]), y = key(b.cells[col]);
          var r = x < y ? -1 : x > y ? 1 : 0;
          return asc ? r : -r;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  });
  document.body.setAttribute('data-page-width', document.documentElement.scrollWidth);
  document.body.setAttribute('data-rendered', 'yes');
})();
)";

// -- tables --------------------------------------------------------------------------------------

/// The k whose pass@k gets a column among 1..n: 1 to 5, then 10, 20, 50, 100, 200, 500, ... and
/// n itself (one column per k would not fit a page with many samples).
std::vector<size_t> shown_ks(size_t n) {
  std::vector<size_t> out;
  for (size_t k = 1; k <= std::min<size_t>(n, 5); ++k)
    out.push_back(k);
  for (size_t base = 10; base < n; base *= 10)
    for (size_t f : {1, 2, 5})
      if (base * f > 5 && base * f < n)
        out.push_back(base * f);
  if (n > 5)
    out.push_back(n);
  return out;
}

void group_table(std::string& out, const std::string& id, const std::vector<const metric_group*>& groups,
                 const std::vector<double>& thresholds, bool best_of_n) {
  size_t ks = 0;
  for (auto* g : groups)
    ks = std::max(ks, g->pass_at_k.size());
  const auto shown = shown_ks(ks);
  out += "<div class=\"wide\"><table id=\"" + id + "\" class=\"sortable\"><thead><tr>"
         "<th>group</th><th>problems</th><th>samples</th><th>compiled</th><th>correct</th>";
  for (auto k : shown)
    out += "<th>pass@" + std::to_string(k) + "</th>";
  for (auto p : thresholds)
    out += "<th>fast<sub>" + num(p) + "</sub></th>";
  out += "<th>geomean speedup</th></tr></thead><tbody>";
  for (auto* g : groups) {
    out += g->name == "all" ? "<tr class=\"group-all\">" : "<tr>";
    out += cell(html_escape(g->name));
    out += cell(std::to_string(g->problems), static_cast<double>(g->problems));
    out += cell(std::to_string(g->samples), static_cast<double>(g->samples));
    out += cell(percent(g->compiled_rate), g->compiled_rate);
    out += cell(percent(g->correct_rate) + " (" + std::to_string(g->correct) + ")",
                g->correct_rate);
    for (auto k : shown)
      out += k <= g->pass_at_k.size() ? cell(percent(g->pass_at_k[k - 1]), g->pass_at_k[k - 1])
                                      : cell("-", -1);
    auto& fp = best_of_n ? g->fast_p_best : g->fast_p;
    for (size_t i = 0; i < thresholds.size(); ++i)
      out += cell(percent(fp[i]), fp[i]);
    out += cell(times(g->geomean_speedup) + " (" + std::to_string(g->timed_correct) + ")",
                g->geomean_speedup);
    out += "</tr>";
  }
  out += "</tbody></table></div>";
}

/// KernelBench's verdict per group: correct rate, pass@k, fast_p (first sample).
void kernelbench_table(std::string& out, const std::vector<const metric_group*>& groups,
                       const std::vector<double>& thresholds) {
  size_t ks = 0;
  for (auto* g : groups)
    ks = std::max(ks, g->kernelbench_pass_at_k.size());
  const auto shown = shown_ks(ks);
  out += "<div class=\"wide\"><table id=\"kernelbench\" class=\"sortable\"><thead><tr>"
         "<th>group</th><th>correct</th>";
  for (auto k : shown)
    out += "<th>pass@" + std::to_string(k) + "</th>";
  for (auto p : thresholds)
    out += "<th>fast<sub>" + num(p) + "</sub></th>";
  out += "</tr></thead><tbody>";
  for (auto* g : groups) {
    out += g->name == "all" ? "<tr class=\"group-all\">" : "<tr>";
    out += cell(html_escape(g->name));
    out += cell(percent(g->kernelbench_correct_rate) + " ("
                  + std::to_string(g->kernelbench_correct) + ")",
                g->kernelbench_correct_rate);
    for (auto k : shown)
      out += k <= g->kernelbench_pass_at_k.size()
               ? cell(percent(g->kernelbench_pass_at_k[k - 1]), g->kernelbench_pass_at_k[k - 1])
               : cell("-", -1);
    for (size_t i = 0; i < thresholds.size(); ++i) {
      double f = i < g->kernelbench_fast_p.size() ? g->kernelbench_fast_p[i] : 0;
      out += cell(percent(f), f);
    }
    out += "</tr>";
  }
  out += "</tbody></table></div>";
}

void count_table(std::string& out, const std::string& id, const std::string& what,
                 const std::map<std::string, size_t>& counts, size_t total) {
  out += "<table id=\"" + id + "\" class=\"sortable\"><thead><tr><th>" + what
         + "</th><th>samples</th><th>share</th></tr></thead><tbody>";
  for (auto& [name, n] : counts) {
    double share = total ? static_cast<double>(n) / static_cast<double>(total) : 0;
    out += "<tr>" + cell(html_escape(name)) + cell(std::to_string(n), static_cast<double>(n))
           + cell(percent(share), share) + "</tr>";
  }
  out += "</tbody></table>";
}

// -- charts --------------------------------------------------------------------------------------

/// Speedups of the correct, timed samples in right-closed bins (p, q], like fast_p's "> p".
void speedup_histogram(std::string& out, const std::vector<sample_record>& records) {
  const std::vector<double> edges{0, 0.5, 0.8, 1.0, 1.5, 2.0, 4.0,
                                  std::numeric_limits<double>::infinity()};
  const std::vector<std::string> labels{"\u2264 0.5x", "0.5-0.8x", "0.8-1x", "1-1.5x",
                                        "1.5-2x",      "2-4x",     "> 4x"};
  std::vector<size_t> counts(labels.size(), 0);
  size_t incorrect = 0, untimed = 0;
  for (auto& r : records) {
    if (!r.correct) {
      ++incorrect;
      continue;
    }
    if (r.speedup <= 0) {
      ++untimed;
      continue;
    }
    for (size_t i = 0; i + 1 < edges.size(); ++i)
      if (r.speedup > edges[i] && r.speedup <= edges[i + 1])
        ++counts[i];
  }
  const double width = 640, height = 240, left = 40, bottom = 40, top = 20;
  const double plot_h = height - bottom - top, bar_w = (width - left - 10) / labels.size();
  size_t most = std::max<size_t>(1, *std::max_element(counts.begin(), counts.end()));
  out += "<svg id=\"speedup-histogram\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(width)
         + "\" height=\"" + num(height) + "\" viewBox=\"0 0 " + num(width) + " " + num(height)
         + "\" role=\"img\" aria-label=\"histogram of the speedups of correct samples\">";
  out += "<line x1=\"" + num(left) + "\" y1=\"" + num(top + plot_h) + "\" x2=\"" + num(width - 10)
         + "\" y2=\"" + num(top + plot_h) + "\" stroke=\"#8a93a6\"/>";
  for (size_t i = 0; i < labels.size(); ++i) {
    double h = plot_h * static_cast<double>(counts[i]) / static_cast<double>(most);
    double x = left + i * bar_w + 4, y = top + plot_h - h;
    const char* colour = edges[i] >= 1.0 ? "#2e9d5b" : "#e0a030";
    out += "<rect x=\"" + num(x) + "\" y=\"" + num(y) + "\" width=\"" + num(bar_w - 8)
           + "\" height=\"" + num(h) + "\" fill=\"" + colour + "\"><title>" + labels[i] + ": "
           + std::to_string(counts[i]) + " samples</title></rect>";
    out += "<text x=\"" + num(x + (bar_w - 8) / 2) + "\" y=\"" + num(y - 4)
           + "\" text-anchor=\"middle\">" + std::to_string(counts[i]) + "</text>";
    out += "<text x=\"" + num(x + (bar_w - 8) / 2) + "\" y=\"" + num(top + plot_h + 16)
           + "\" text-anchor=\"middle\">" + html_escape(labels[i]) + "</text>";
  }
  out += "<text x=\"" + num(left) + "\" y=\"" + num(height - 6) + "\">speedup over the reference "
         "(correct samples); not correct: " + std::to_string(incorrect) + ", correct but not "
         "timed: " + std::to_string(untimed) + "</text></svg>";
}

/// Each problem's best speedup on a log scale (1/8x .. 8x, clamped), red marks for problems
/// without a correct sample.
void problem_chart(std::string& out, const std::vector<problem_summary>& problems) {
  const double width = 960, height = 260, left = 44, right = 10, top = 14, bottom = 30;
  const double plot_w = width - left - right, plot_h = height - top - bottom;
  const double lo = std::log2(1.0 / 8), hi = std::log2(8.0);
  auto y_of = [&](double speedup) {
    double l = std::clamp(std::log2(speedup), lo, hi);
    return top + plot_h * (hi - l) / (hi - lo);
  };
  out += "<svg id=\"problem-chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(width)
         + "\" height=\"" + num(height) + "\" viewBox=\"0 0 " + num(width) + " " + num(height)
         + "\" role=\"img\" aria-label=\"best speedup per problem\">";
  for (double s : {0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0}) {
    double y = y_of(s);
    out += "<line x1=\"" + num(left) + "\" y1=\"" + num(y) + "\" x2=\"" + num(width - right)
           + "\" y2=\"" + num(y) + "\" stroke=\"" + (s == 1.0 ? "#5b6476" : "#e3e6ec") + "\"/>";
    out += "<text x=\"" + num(left - 4) + "\" y=\"" + num(y + 4) + "\" text-anchor=\"end\">"
           + num(s) + "x</text>";
  }
  const double n = std::max<double>(1, static_cast<double>(problems.size()));
  const double slot = plot_w / n, bar = std::clamp(slot * 0.8, 1.0, 36.0);
  const double base = y_of(1.0);
  for (size_t i = 0; i < problems.size(); ++i) {
    auto& p = problems[i];
    double x = left + i * slot + (slot - bar) / 2;
    std::string title = html_escape(p.problem) + ": ";
    if (p.best_speedup > 0) {
      double y = y_of(p.best_speedup);
      title += times(p.best_speedup) + " (" + std::to_string(p.correct) + "/"
               + std::to_string(p.samples) + " correct)";
      out += "<rect x=\"" + num(x) + "\" y=\"" + num(std::min(y, base)) + "\" width=\""
             + num(bar) + "\" height=\"" + num(std::max(1.0, std::fabs(base - y)))
             + "\" fill=\"" + (p.best_speedup > 1 ? "#2e9d5b" : "#e0a030") + "\"><title>" + title
             + "</title></rect>";
    } else {
      title += p.correct > 0 ? "correct, not timed" : "no correct sample";
      out += "<rect x=\"" + num(x) + "\" y=\"" + num(top + plot_h - 6) + "\" width=\"" + num(bar)
             + "\" height=\"6\" fill=\"" + (p.correct > 0 ? "#8a93a6" : "#c8372d")
             + "\"><title>" + title + "</title></rect>";
    }
  }
  out += "<text x=\"" + num(left) + "\" y=\"" + num(height - 8)
         + "\">best speedup of a correct sample, per problem (log scale; red: none correct)"
           "</text></svg>";
}

std::string info_row(const std::string& key, const std::string& value) {
  return value.empty() ? "" : "<tr><td>" + key + "</td><td>" + html_escape(value) + "</td></tr>";
}

/// The samples table's source cell: the file's name, and its program folded under it.
std::string program(const sample_record& r, const source_reader& source) {
  std::string code = source ? source(r) : "";
  if (code.empty())
    return html_escape(r.source);
  constexpr size_t limit = 30 * 1024;
  if (code.size() > limit)
    code = code.substr(0, limit) + "\n... (cut at 30 KB)";
  return "<details><summary>" + html_escape(r.source) + "</summary><pre>" + html_escape(code)
         + "</pre></details>";
}

} // namespace

std::string html_escape(const std::string& text) {
  std::string out;
  for (char c : tok::repair_utf8(text)) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string render_html_report(const run_info& info, const eval_metrics& m,
                               const std::vector<sample_record>& records,
                               const source_reader& source) {
  std::string title = "kbrl-eval: " + (info.mode == "model" ? info.model : info.generations_dir);
  std::string out;
  out.reserve(64 * 1024 + records.size() * 600);
  out += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>"
         + html_escape(title) + "</title><script>" + error_capture + "</script><style>" + style
         + "</style></head><body>\n";
  out += "<h1>" + html_escape(title) + "</h1>\n<table class=\"meta\">";
  std::string levels;
  for (auto l : info.levels)
    levels += (levels.empty() ? "" : ", ") + std::to_string(l);
  out += info_row("mode", info.mode) + info_row("model", info.model)
         + info_row("adapter", info.adapter) + info_row("generations", info.generations_dir)
         + info_row("problems", info.problem_source + " (levels " + levels + ", problems "
                                  + info.problems + ")")
         + info_row("samples x turns", std::to_string(info.samples) + " x "
                                         + std::to_string(info.turns))
         + info_row("backend, precision", info.backend + ", " + info.precision)
         + info_row("sampling", info.sampling) + info_row("prompt", info.prompt)
         + info_row("evaluator", info.evaluator) + info_row("machine", info.machine)
         + info_row("timing", std::to_string(info.timing.correctness_trials)
                                + " correctness trials, "
                                + (info.timing.measure_performance
                                     ? std::to_string(info.timing.perf_trials) + " timed runs"
                                     : std::string("not timed")))
         + info_row("correct means", info.correctness == "kernelbench"
                                       ? "KernelBench's check (torch.allclose on every trial)"
                                       : "the strict check (strict tolerances on every trial, "
                                         "every runtime check passed)")
         + info_row("speedups against", info.reference == "compile"
                                          ? "torch.compile of the reference (default mode)"
                                          : "the eager PyTorch reference")
         + info_row("run", info.started + " to " + info.finished + " (this invocation "
                             + fmt("%.1f s", info.wall_seconds) + "), kbrl " + info.kbrl_version);
  if (info.tensorboard_step >= 0)
    out += info_row("TensorBoard step", std::to_string(info.tensorboard_step));
  out += "</table>\n";

  out += "<h2>Summary</h2>\n";
  std::vector<const metric_group*> groups{&m.overall};
  for (auto& g : m.levels)
    groups.push_back(&g);
  group_table(out, "summary", groups, m.thresholds, false);
  out += "<p class=\"note\">Correct and compiled: shares of all samples. pass@k: the unbiased "
         "estimate per problem, averaged over problems. fast<sub>p</sub>: share of all problems "
         "whose first sample is correct and more than p times faster than the eager PyTorch "
         "reference (KernelBench scores sample 0 only). Geometric mean over correct, timed "
         "samples (their number in brackets).";
  if (m.max_turns > 1)
    out += " With several turns, each sample counts with its best turn.";
  out += "</p>\n";
  out += "<h2>KernelBench's verdict</h2>\n";
  kernelbench_table(out, groups, m.thresholds);
  out += std::string("<p class=\"note\">Correct above is ")
         + (info.correctness == "kernelbench"
              ? "this verdict too (eval.correctness = \"kernelbench\")"
              : "the strict verdict (every trial within the strict tolerances, every runtime "
                "check passed)")
         + ". Here: KernelBench's own check (torch.allclose with atol/rtol on every trial, "
           "nothing else), the numbers to compare with KernelBench's; fast<sub>p</sub> as "
           "above, from the samples this check accepts.</p>\n";
  if (m.max_samples > 1) {
    out += "<h2>Best of N</h2>\n";
    group_table(out, "best-of-n", groups, m.thresholds, true);
    out += "<p class=\"note\">fast<sub>p</sub> here counts a problem when any of its samples is "
           "correct and faster than p.</p>\n";
  }
  if (!m.turns.empty()) {
    out += "<h2>Per turn</h2>\n";
    std::vector<const metric_group*> turns;
    for (auto& g : m.turns)
      turns.push_back(&g);
    group_table(out, "turns", turns, m.thresholds, false);
    out += "<p class=\"note\">Turn t: each sample's best result over turns 0..t.</p>\n";
  }
  out += "<h2>Against torch.compile</h2>\n";
  if (m.compile_reference_timed) {
    auto& g = m.overall;
    out += "<table id=\"vs-compile\"><thead><tr><th>group</th><th>timed correct</th>";
    for (auto p : m.thresholds)
      out += "<th>fast<sub>" + num(p) + "</sub></th>";
    out += "<th>geomean speedup</th></tr></thead><tbody><tr>" + cell("all")
           + cell(std::to_string(g.compile_timed_correct));
    for (size_t i = 0; i < m.thresholds.size(); ++i)
      out += cell(percent(g.fast_p_vs_compile[i]), g.fast_p_vs_compile[i]);
    out += cell(times(g.geomean_speedup_vs_compile)) + "</tr></tbody></table>\n";
  } else if (info.timing.compare_torch_compile || info.reference == "compile") {
    out += "<p class=\"note bad\" id=\"vs-compile-missing\">Asked for, but missing: no sample "
           "has a torch.compile timing (the samples' errors say why).</p>\n";
  } else {
    out += "<p class=\"note\">Not requested (kbrl-eval --reference compile or "
           "--compare-torch-compile).</p>\n";
  }

  out += "<h2>Speedups</h2>\n";
  speedup_histogram(out, records);
  out += "\n<h2>Per problem</h2>\n";
  problem_chart(out, m.problems);
  out += "\n<table id=\"problems\" class=\"sortable\"><thead><tr><th>problem</th><th>level</th>"
         "<th>samples</th><th>correct</th><th>first sample</th><th>best speedup</th>"
         "<th>verdicts</th></tr></thead><tbody>";
  for (auto& p : m.problems) {
    std::string verdicts;
    for (auto& [e, n] : p.errors)
      verdicts += (verdicts.empty() ? "" : ", ") + (e == "none" ? std::string("checked") : e)
                  + (n > 1 ? " x" + std::to_string(n) : "");
    out += "<tr>" + cell(html_escape(p.problem)) + cell(std::to_string(p.level), p.level)
           + cell(std::to_string(p.samples), static_cast<double>(p.samples))
           + cell(std::to_string(p.correct), static_cast<double>(p.correct))
           + cell(p.first_correct ? "<span class=\"ok\">correct " + times(p.first_speedup)
                                      + "</span>"
                                  : "<span class=\"bad\">not correct</span>",
                  p.first_correct ? p.first_speedup : -1)
           + cell(times(p.best_speedup), p.best_speedup)
           + "<td class=\"text\">" + html_escape(verdicts) + "</td></tr>";
  }
  out += "</tbody></table>\n";

  out += "<h2>Verdicts</h2>\n";
  count_table(out, "errors", "category", m.overall.errors, m.overall.samples);
  out += "<p class=\"note\">none: checked against the reference (correct, or not when outputs "
         "differ: mismatch); missing: no file for the sample; generation: the sampler failed; "
         "format: no program found in the answer.</p>\n";
  out += "<h2>Hack flags</h2>\n";
  count_table(out, "hack-flags", "flag", m.overall.hack_flags, m.overall.samples);
  if (m.overall.hack_flags.empty())
    out += "<p class=\"note\">No sample was flagged.</p>\n";

  out += "<h2>Samples</h2>\n<details><summary>" + std::to_string(records.size())
         + " evaluated candidates</summary>\n<div class=\"wide\"><table id=\"samples\" "
           "class=\"sortable\"><thead><tr>"
           "<th>problem</th><th>sample</th><th>turn</th><th>verdict</th><th>KernelBench</th>"
           "<th>speedup</th><th>kernel ms</th><th>reference ms</th><th>time coverage</th>"
           "<th>flags</th><th>source</th><th>error</th>"
           "</tr></thead><tbody>";
  for (auto& r : records) {
    std::string verdict = r.correct ? "<span class=\"ok\">correct</span>"
                                    : "<span class=\"bad\">"
                                        + html_escape(r.error == "none" ? "incorrect" : r.error)
                                        + "</span>";
    std::string flags;
    for (auto& f : r.hack_flags)
      flags += (flags.empty() ? "" : ", ") + f;
    std::string excerpt;
    if (!r.error_excerpt.empty()) {
      auto first_line = r.error_excerpt.substr(0, r.error_excerpt.find('\n')).substr(0, 80);
      excerpt = "<details><summary>" + html_escape(first_line) + "</summary><pre>"
                + html_escape(r.error_excerpt) + "</pre></details>";
    }
    out += "<tr>" + cell(html_escape(r.problem)) + cell(std::to_string(r.sample), r.sample)
           + cell(std::to_string(r.turn), r.turn) + cell(verdict, r.correct ? 1 : 0)
           + cell(r.kernelbench_correct ? "<span class=\"ok\">correct</span>"
                                        : "<span class=\"bad\">incorrect</span>",
                  r.kernelbench_correct ? 1 : 0)
           + cell(times(r.speedup), r.speedup) + cell(ms(r.kernel_ms), r.kernel_ms)
           + cell(ms(r.reference_ms), r.reference_ms)
           + cell(r.time_coverage < 0 ? std::string("-") : percent(r.time_coverage),
                  r.time_coverage)
           + "<td class=\"text\">" + html_escape(flags) + "</td><td class=\"text long\">"
           + program(r, source) + "</td><td class=\"text long\">" + excerpt + "</td></tr>";
  }
  out += "</tbody></table></div></details>\n<script>" + std::string(page_script) + "</script>\n"
         "</body></html>\n";
  return out;
}

} // namespace kbrl::report
