#pragma once
// report.html: an evaluation run for a person. One self-contained page (inline CSS, inline SVG
// charts, a few lines of script to sort tables; nothing fetched from the network):
//
//   the run (model or generations folder, problems, samples, evaluator, timing)
//   a summary table per level: compiled and correct rates, pass@k, fast_p, geometric-mean speedup
//   best-of-N fast_p (when several samples), per turn (when several turns), vs torch.compile
//   a histogram of the correct samples' speedups, a chart of each problem's best speedup
//   tables of problems, error categories, hack flags and every sample (error excerpts folded)
//
// Element ids the tests (and scripts) rely on: table#summary, table#problems, table#errors,
// table#hack-flags, table#samples, svg#speedup-histogram, svg#problem-chart. After its script
// has run, <body> carries data-rendered="yes"; an uncaught script error is recorded in the
// data-js-errors attribute of <html>.

#include "runtime/report/eval_metrics.hpp"
#include "runtime/report/results_json.hpp"

#include <string>
#include <vector>

namespace kbrl::report {

/// The report page for `records` and their `metrics`.
std::string render_html_report(const run_info& info, const eval_metrics& metrics,
                               const std::vector<sample_record>& records);

/// `text` with &, <, >, " and ' escaped for HTML (invalid UTF-8 repaired).
std::string html_escape(const std::string& text);

} // namespace kbrl::report
